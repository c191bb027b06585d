// Actors placed by the head across nodes: a head, two airt-node processes on this machine, and
// this test as the driver attached to the first. Each actor reports the pid of the node that
// started its worker, so the test sees where the head put it.
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/actor_functions.h"
#include "tests/e2e/multinode_cluster.h"

namespace airt {
namespace {

TEST(MultiNodeActors, TheHeadSpreadsActorsAndPutsEachWhereItsResourceIs) {
  e2e::MultiNodeCluster cluster({"--num-cpus=2", "--object-store-memory=64M"});
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("first", {}));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("second", {"--resources={\"special\": 1}"}));
  cluster.Init();  // the driver's node is `first`
  int first = cluster.node("first").pid(), second = cluster.node("second").pid();

  // Two actors asking for nothing: one on each node, not both on their owner's.
  ActorHandle<Counter> light_a = Actor(Counter::Create).Remote(0);
  ActorHandle<Counter> light_b = Actor(Counter::Create).Remote(0);
  std::vector<int> light = {*Get(light_a.Task(&Counter::NodePid).Remote(), 30'000),
                            *Get(light_b.Task(&Counter::NodePid).Remote(), 30'000)};
  EXPECT_EQ(light, (std::vector<int>{first, second}));

  // Four actors of one CPU each over two nodes of two CPUs: two on each, though the driver (their
  // owner) is on `first`, and created back to back, faster than any heartbeat shows them.
  std::vector<ActorHandle<Counter>> actors;
  for (int i = 0; i < 4; ++i) {
    actors.push_back(Actor(Counter::Create).SetResource("CPU", 1).Remote(i));
  }
  std::map<int, int> per_node;
  for (auto& actor : actors) ++per_node[*Get(actor.Task(&Counter::NodePid).Remote(), 30'000)];
  EXPECT_EQ(per_node[first], 2);
  EXPECT_EQ(per_node[second], 2);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(*Get(actors[i].Task(&Counter::Value).Remote()), i);

  // Only `second` has {special: 1}: the head puts the actor there, its owner on `first` leases
  // the worker there directly.
  ActorHandle<Counter> special = Actor(Counter::Create).SetResource("special", 1).Remote(5);
  EXPECT_EQ(*Get(special.Task(&Counter::NodePid).Remote(), 30'000), second);
  EXPECT_EQ(*Get(special.Task(&Counter::Add).Remote(1)), 6);

  // Every CPU is held now: one more CPU actor still goes to the least loaded node whose totals
  // fit (`first`: three actors against four) and waits there until a CPU is given back.
  ActorHandle<Counter> waiting = Actor(Counter::Create).SetResource("CPU", 1).Remote(9);
  ObjectRef<int> waited = waiting.Task(&Counter::NodePid).Remote();
  EXPECT_TRUE(Wait(std::vector<ObjectRef<int>>{waited}, 1, 1000).ready.empty())
      << "no CPU is free anywhere";
  int freed = *Get(actors[0].Task(&Counter::NodePid).Remote());
  EXPECT_EQ(freed, first);
  actors[0].Kill();
  EXPECT_EQ(*Get(waited, 30'000), first);
}

}  // namespace
}  // namespace airt
