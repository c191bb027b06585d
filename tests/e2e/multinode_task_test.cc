// Tasks across nodes: a head, two airt-node processes on this machine (each with its own store
// and folder, objects moving between them only through the transfer service), and this test as
// the driver on the first node. A task needing a resource only the second node has is spilled
// back there; its result is pulled back; a task on the first node takes that result as argument.
#include <filesystem>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/testing/test_support.h"

int NodePid();
std::vector<uint8_t> Bytes(int n, int seed);
int64_t SumBytes(std::vector<uint8_t> bytes);

namespace airt {
namespace {

using airt::testing::ChildProcess;
using airt::testing::ReadFile;
using airt::testing::TempDir;
using airt::testing::WaitForLine;
using namespace std::chrono_literals;

TEST(MultiNodeTasks, TasksRunWhereTheirResourcesAreAndResultsCrossBetweenThreeNodes) {
  TempDir dir;
  ChildProcess head({AIRT_HEAD_BIN, "--port=0"}, dir.File("head.log"));
  std::string address = WaitForLine(dir.File("head.log"), "head ready ", 30s, &head).value_or("");
  ASSERT_FALSE(address.empty()) << ReadFile(dir.File("head.log"));
  auto node = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {
        AIRT_NODE_BIN,
        "--head-address=" + address,
        "--num-cpus=1",
        "--object-store-memory=64M",
        "--temp-dir=" + dir.File(name),
        "--worker-binary=" + std::string(AIRT_WORKER_BIN),
        "--worker-code-search-path=" + std::string(AIRT_TASK_FUNCTIONS),
        "--cluster-view-interval-ms=100"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<ChildProcess>(argv, dir.File(name + ".log"));
  };
  auto first = node("first", {});
  ASSERT_TRUE(WaitForLine(dir.File("first.log"), "node ready ", 30s, first.get()))
      << ReadFile(dir.File("first.log"));
  auto second = node("second", {"--resources={\"special\": 1}"});
  ASSERT_TRUE(WaitForLine(dir.File("second.log"), "node ready ", 30s, second.get()))
      << ReadFile(dir.File("second.log"));

  Config config;
  config.address = address;  // the driver's node is the first alive node at 127.0.0.1: `first`
  Init(config);
  EXPECT_EQ(*Get(Task(NodePid).Remote(), 30000), first->pid());
  // Only `second` has {special: 1}: the first node spills the lease back once its view shows it.
  EXPECT_EQ(*Get(Task(NodePid).SetResource("special", 1).Remote(), 30000), second->pid());

  // A 1 MiB result made on `second` lives in its store; Get pulls it to `first`.
  ObjectRef<std::vector<uint8_t>> made = Task(Bytes).SetResource("special", 1).Remote(1 << 20, 5);
  std::shared_ptr<std::vector<uint8_t>> bytes = Get(made, 30000);
  ASSERT_EQ(bytes->size(), 1u << 20);
  int64_t expect = 0;
  for (uint8_t b : *bytes) expect += b;
  // A task on `first` takes it as an argument.
  EXPECT_EQ(*Get(Task(SumBytes).Remote(made), 30000), expect);

  // A third node with its own resource: a result made on `second` feeds a task on `third`, whose
  // worker pulls it from `second` directly.
  auto third = node("third", {"--resources={\"other\": 1}"});
  ASSERT_TRUE(WaitForLine(dir.File("third.log"), "node ready ", 30s, third.get()))
      << ReadFile(dir.File("third.log"));
  EXPECT_EQ(*Get(Task(NodePid).SetResource("other", 1).Remote(), 30000), third->pid());
  EXPECT_EQ(*Get(Task(SumBytes).SetResource("other", 1).Remote(made), 30000), expect);
  Shutdown();
}

}  // namespace
}  // namespace airt
