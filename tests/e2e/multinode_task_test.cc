// Tasks across nodes: a head, two airt-node processes on this machine (each with its own store
// and folder, objects moving between them only through the transfer service), and this test as
// the driver on the first node. A task needing a resource only the second node has is spilled
// back there; its result is pulled back; a task on the first node takes that result as argument.
#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/multinode_cluster.h"

int NodePid();
std::vector<uint8_t> Bytes(int n, int seed);
int64_t SumBytes(std::vector<uint8_t> bytes);

namespace airt {
namespace {

TEST(MultiNodeTasks, TasksRunWhereTheirResourcesAreAndResultsCrossBetweenThreeNodes) {
  e2e::MultiNodeCluster cluster(
      {"--num-cpus=1", "--object-store-memory=64M", "--cluster-view-interval-ms=100"});
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("first", {}));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("second", {"--resources={\"special\": 1}"}));
  cluster.Init();  // the driver's node is the first alive node at 127.0.0.1: `first`
  EXPECT_EQ(*Get(Task(NodePid).Remote(), 30000), cluster.node("first").pid());
  // Only `second` has {special: 1}: the first node spills the lease back once its view shows it.
  EXPECT_EQ(*Get(Task(NodePid).SetResource("special", 1).Remote(), 30000),
            cluster.node("second").pid());

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
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("third", {"--resources={\"other\": 1}"}));
  EXPECT_EQ(*Get(Task(NodePid).SetResource("other", 1).Remote(), 30000),
            cluster.node("third").pid());
  EXPECT_EQ(*Get(Task(SumBytes).SetResource("other", 1).Remote(made), 30000), expect);
}

}  // namespace
}  // namespace airt
