#include "tests/e2e/task_cluster.h"

#include <gtest/gtest.h>

#include "airt/api.h"

namespace airt::e2e {

using airt::testing::ChildProcess;
using airt::testing::ReadFile;
using airt::testing::WaitForLine;
using namespace std::chrono_literals;

TaskCluster::TaskCluster(const std::vector<std::string>& node_flags, Config config) {
  Start(node_flags, std::move(config));
}

void TaskCluster::Start(const std::vector<std::string>& node_flags, Config config) {
  head_ = std::make_unique<ChildProcess>(std::vector<std::string>{AIRT_HEAD_BIN, "--port=0"},
                                         dir_.File("head.log"));
  std::string address =
      WaitForLine(dir_.File("head.log"), "head ready ", 30s, head_.get()).value_or("");
  ASSERT_FALSE(address.empty()) << ReadFile(dir_.File("head.log"));
  std::vector<std::string> argv = {AIRT_NODE_BIN, "--head-address=" + address,
                                   "--temp-dir=" + dir_.path(),
                                   "--worker-binary=" + std::string(AIRT_WORKER_BIN),
                                   "--worker-code-search-path=" + std::string(AIRT_TASK_FUNCTIONS)};
  argv.insert(argv.end(), node_flags.begin(), node_flags.end());
  node_ = std::make_unique<ChildProcess>(argv, dir_.File("node.log"));
  ASSERT_TRUE(WaitForLine(dir_.File("node.log"), "node ready ", 30s, node_.get())) << NodeLog();
  config.address = address;
  Init(config);
  initialized_ = true;
}

TaskCluster::~TaskCluster() {
  if (initialized_) Shutdown();
  node_.reset();  // killed by pid
  head_.reset();
}

}  // namespace airt::e2e
