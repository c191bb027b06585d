#include "tests/e2e/multinode_cluster.h"

#include <signal.h>

#include <filesystem>
#include <stdexcept>

#include <gtest/gtest.h>

#include "airt/api.h"

namespace airt::e2e {

using airt::testing::ChildProcess;
using airt::testing::ReadFile;
using airt::testing::WaitForLine;
using namespace std::chrono_literals;

MultiNodeCluster::MultiNodeCluster(std::vector<std::string> node_flags,
                                   std::vector<std::string> head_flags)
    : node_flags_(std::move(node_flags)), head_flags_(std::move(head_flags)) {
  StartHead();
}

void MultiNodeCluster::StartHead(const std::string& port) {
  std::vector<std::string> argv = {AIRT_HEAD_BIN, "--port=" + port};
  argv.insert(argv.end(), head_flags_.begin(), head_flags_.end());
  std::string log = ++head_starts_ == 1 ? dir_.File("head.log")
                                        : dir_.File("head-" + std::to_string(head_starts_) + ".log");
  head_ = std::make_unique<ChildProcess>(argv, log);
  address_ = WaitForLine(log, "head ready ", 30s, head_.get()).value_or("");
  ASSERT_FALSE(address_.empty()) << ReadFile(log);
}

void MultiNodeCluster::RestartHead(const std::function<void()>& while_down) {
  ASSERT_FALSE(address_.empty()) << "the head did not start";
  std::string port = address_.substr(address_.rfind(':') + 1);
  head_->Kill(SIGKILL);
  head_->Wait(10s);
  head_.reset();
  if (while_down) while_down();
  StartHead(port);
}

void MultiNodeCluster::AddNode(const std::string& name, const std::vector<std::string>& flags) {
  ASSERT_FALSE(address_.empty()) << "the head did not start";
  std::vector<std::string> argv = {AIRT_NODE_BIN, "--head-address=" + address_,
                                   "--temp-dir=" + dir_.File(name),
                                   "--worker-binary=" + std::string(AIRT_WORKER_BIN),
                                   "--worker-code-search-path=" + std::string(AIRT_TASK_FUNCTIONS)};
  argv.insert(argv.end(), node_flags_.begin(), node_flags_.end());
  argv.insert(argv.end(), flags.begin(), flags.end());
  nodes_.emplace_back(name, std::make_unique<ChildProcess>(argv, dir_.File(name + ".log")));
  ASSERT_TRUE(WaitForLine(dir_.File(name + ".log"), "node ready ", 30s, nodes_.back().second.get()))
      << Log(name);
}

void MultiNodeCluster::Init() {
  Config config;
  config.address = address_;
  airt::Init(config);
  initialized_ = true;
}

ChildProcess& MultiNodeCluster::node(const std::string& name) {
  for (auto& [n, process] : nodes_) {
    if (n == name) return *process;
  }
  throw std::out_of_range("no node named " + name);
}

std::string MultiNodeCluster::Log(const std::string& name) const {
  return ReadFile(dir_.File(name + ".log"));
}

std::string MultiNodeCluster::StoreSocket(const std::string& name) const {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.File(name), ec)) {
    auto socket = entry.path() / "store.sock";
    if (entry.path().filename().string().rfind("node-", 0) == 0 &&
        std::filesystem::exists(socket)) {
      return socket.string();
    }
  }
  return "";
}

MultiNodeCluster::~MultiNodeCluster() {
  if (initialized_) Shutdown();
  while (!nodes_.empty()) nodes_.pop_back();  // killed by pid, the last added first
  head_.reset();
}

}  // namespace airt::e2e
