// Placement groups over three airt-node processes: each strategy's placement (seen through the
// nodes that the tasks in each bundle run on), a group that waits for a node to join, one that can
// never fit, removal, the rollback of every prepared bundle when a node refuses its part, and the
// bundles of a node killed with SIGKILL reserved again on another node.
#include <signal.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/actor_functions.h"
#include "tests/e2e/multinode_cluster.h"

int NodePid();
int SleepMs(int ms);

namespace airt {
namespace {

constexpr int64_t kLong = 60'000;

std::vector<int> BundlePids(const PlacementGroup& group, int bundles) {
  std::vector<ObjectRef<int>> refs;
  for (int i = 0; i < bundles; ++i) {
    refs.push_back(Task(NodePid).SetResource("CPU", 1).SetPlacementGroup(group, i).Remote());
  }
  std::vector<int> pids;
  for (auto& ref : refs) pids.push_back(*Get(ref, kLong));
  return pids;
}

internal::PlacementGroupEntry EntryOf(const PlacementGroup& group) {
  for (auto& e : internal::ListPlacementGroups()) {
    if (e.id == group.ID()) return e;
  }
  ADD_FAILURE() << "no group " << group.ID();
  return {};
}

PlacementGroup Make(PlacementStrategy strategy, int bundles, double cpus) {
  PlacementGroupCreationOptions options;
  options.strategy = strategy;
  for (int i = 0; i < bundles; ++i) options.bundles.push_back({{"CPU", cpus}});
  return CreatePlacementGroup(options);
}

class PlacementGroups : public ::testing::Test {
 protected:
  void StartThree(std::vector<std::string> head_flags = {}) {
    cluster_ = std::make_unique<e2e::MultiNodeCluster>(
        std::vector<std::string>{"--num-cpus=2", "--object-store-memory=64M"},
        std::move(head_flags));
    for (const char* name : {"a", "b", "c"}) {
      ASSERT_NO_FATAL_FAILURE(cluster_->AddNode(name, {"--resources={\"" + std::string(name) +
                                                       "_only\": 1}"}));
    }
    cluster_->Init();
  }
  std::unique_ptr<e2e::MultiNodeCluster> cluster_;
};

TEST_F(PlacementGroups, EachStrategyPlacesItsBundlesAsRaySays) {
  ASSERT_NO_FATAL_FAILURE(StartThree());
  PlacementGroup spread = Make(PlacementStrategy::STRICT_SPREAD, 3, 1);
  ASSERT_TRUE(spread.Wait(60));
  std::vector<int> pids = BundlePids(spread, 3);
  EXPECT_EQ(std::set<int>(pids.begin(), pids.end()).size(), 3u) << "a node per bundle";
  internal::PlacementGroupEntry entry = EntryOf(spread);
  EXPECT_EQ(entry.state, static_cast<int>(PlacementGroupState::CREATED));
  EXPECT_EQ(std::set<std::string>(entry.bundle_nodes.begin(), entry.bundle_nodes.end()).size(),
            3u);
  RemovePlacementGroup(spread.ID());

  PlacementGroup pack = Make(PlacementStrategy::STRICT_PACK, 2, 1);
  ASSERT_TRUE(pack.Wait(60));
  pids = BundlePids(pack, 2);
  EXPECT_EQ(pids[0], pids[1]) << "one node for every bundle";
  RemovePlacementGroup(pack.ID());

  // PACK: one node when one has room for all; SPREAD: as many nodes as there are bundles.
  PlacementGroup soft_pack = Make(PlacementStrategy::PACK, 2, 1);
  ASSERT_TRUE(soft_pack.Wait(60));
  entry = EntryOf(soft_pack);
  EXPECT_EQ(entry.bundle_nodes[0], entry.bundle_nodes[1]);
  EXPECT_EQ(GetPlacementGroupById(soft_pack.ID()).GetState(), PlacementGroupState::CREATED);
  RemovePlacementGroup(soft_pack.ID());
  PlacementGroup soft_spread = Make(PlacementStrategy::SPREAD, 3, 0.5);
  ASSERT_TRUE(soft_spread.Wait(60));
  entry = EntryOf(soft_spread);
  EXPECT_EQ(std::set<std::string>(entry.bundle_nodes.begin(), entry.bundle_nodes.end()).size(),
            3u);
  EXPECT_EQ(GetAllPlacementGroups().size(), 4u) << "removed groups are listed too";
  EXPECT_EQ(GetPlacementGroupById(pack.ID()).GetState(), PlacementGroupState::REMOVED);
}

TEST_F(PlacementGroups, APendingGroupIsPlacedWhenANodeJoins) {
  cluster_ = std::make_unique<e2e::MultiNodeCluster>(
      std::vector<std::string>{"--num-cpus=2", "--object-store-memory=64M"});
  ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("a", {}));
  ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("b", {}));
  cluster_->Init();
  PlacementGroup group = Make(PlacementStrategy::STRICT_SPREAD, 3, 2);
  EXPECT_FALSE(group.Wait(1)) << "three bundles of 2 CPUs need three nodes";
  internal::PlacementGroupEntry entry = EntryOf(group);
  EXPECT_EQ(entry.state, static_cast<int>(PlacementGroupState::PENDING));
  EXPECT_FALSE(entry.infeasible) << "a third node may join";
  ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("c", {}));
  EXPECT_TRUE(group.Wait(60));
  std::vector<int> pids = BundlePids(group, 3);
  EXPECT_EQ(std::set<int>(pids.begin(), pids.end()).size(), 3u);
}

TEST_F(PlacementGroups, AGroupBiggerThanEveryNodeStaysPendingAndIsReported) {
  ASSERT_NO_FATAL_FAILURE(StartThree());
  PlacementGroupCreationOptions options{"too_big", {{{"CPU", 1}}, {{"CPU", 64}}},
                                        PlacementStrategy::PACK};
  PlacementGroup group = CreatePlacementGroup(options);
  EXPECT_FALSE(group.Wait(1));
  internal::PlacementGroupEntry entry = EntryOf(group);
  EXPECT_EQ(entry.state, static_cast<int>(PlacementGroupState::PENDING));
  EXPECT_TRUE(entry.infeasible);
  EXPECT_NE(entry.pending_reason.find("bundle 1 {CPU: 64}"), std::string::npos)
      << entry.pending_reason;
  EXPECT_EQ(GetPlacementGroup("too_big").ID(), group.ID());
  EXPECT_THROW(CreatePlacementGroup(options), Exception) << "the name is taken";
  RemovePlacementGroup(group.ID());
  EXPECT_THROW(group.Wait(1), Exception) << "removed";
  EXPECT_TRUE(GetPlacementGroup("too_big").Empty());
}

TEST_F(PlacementGroups, RemovalStopsItsActorsAndGivesItsResourcesBack) {
  ASSERT_NO_FATAL_FAILURE(StartThree());
  // Every CPU of the cluster, in one group.
  PlacementGroup all = Make(PlacementStrategy::STRICT_SPREAD, 3, 2);
  ASSERT_TRUE(all.Wait(60));
  ActorHandle<Counter> actor = Actor(Counter::Create).SetPlacementGroup(all, 1).Remote(7);
  EXPECT_EQ(*Get(actor.Task(&Counter::Value).Remote(), kLong), 7);
  // Nothing is left outside the group: a second group of one CPU waits.
  PlacementGroup other = Make(PlacementStrategy::PACK, 1, 1);
  EXPECT_FALSE(other.Wait(1));
  RemovePlacementGroup(all.ID());
  // Its worker is stopped by its node right after the removal: a call soon fails for good.
  bool died = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!died && std::chrono::steady_clock::now() < deadline) {
    try {
      Get(actor.Task(&Counter::Value).Remote(), kLong);
    } catch (const ActorDiedError&) {
      died = true;
    }
  }
  EXPECT_TRUE(died) << "the actor of a removed group still answers";
  EXPECT_TRUE(other.Wait(60)) << "the removed group's CPUs came back";
}

// The head's view of a node's free resources is its last heartbeat; with heartbeats a minute
// apart, node c's two CPUs look free while an actor holds them, so c refuses its bundle and the
// bundles a and b had prepared are given back.
TEST_F(PlacementGroups, ARefusedPrepareRollsBackEveryPreparedBundle) {
  ASSERT_NO_FATAL_FAILURE(
      StartThree({"--heartbeat-interval-ms=60000", "--node-timeout-ms=600000"}));
  ActorHandle<Counter> busy =
      Actor(Counter::Create).SetResource("CPU", 2).SetResource("c_only", 1).Remote(4);
  ASSERT_EQ(*Get(busy.Task(&Counter::Value).Remote(), kLong), 4) << "it holds c's CPUs now";
  PlacementGroup group = Make(PlacementStrategy::STRICT_SPREAD, 3, 2);
  EXPECT_FALSE(group.Wait(2));
  internal::PlacementGroupEntry entry = EntryOf(group);
  EXPECT_EQ(entry.state, static_cast<int>(PlacementGroupState::PENDING));
  EXPECT_NE(entry.pending_reason.find("refused"), std::string::npos) << entry.pending_reason;
  // a's and b's CPUs are free again: tasks of 2 CPUs run on each.
  EXPECT_EQ(*Get(Task(SleepMs).SetResource("CPU", 2).SetResource("a_only", 1).Remote(1), kLong),
            1);
  EXPECT_EQ(*Get(Task(SleepMs).SetResource("CPU", 2).SetResource("b_only", 1).Remote(1), kLong),
            1);
  RemovePlacementGroup(group.ID());
}

// Node b or c (never a: the driver's) holding a bundle of a STRICT_SPREAD group of two is killed:
// the group is RESCHEDULING, that bundle alone is reserved again on the node holding none of the
// group (the strict rule kept), the other bundle stays, and a task and an actor in it run.
TEST_F(PlacementGroups, ADeadNodesBundleIsReservedAgainOnAnotherNode) {
  ASSERT_NO_FATAL_FAILURE(StartThree(
      {"--heartbeat-interval-ms=200", "--node-timeout-ms=20000", "--node-disconnect-grace-ms=300"}));
  PlacementGroup group = Make(PlacementStrategy::STRICT_SPREAD, 2, 1);
  ASSERT_TRUE(group.Wait(60));
  std::vector<int> pids = BundlePids(group, 2);
  internal::PlacementGroupEntry before = EntryOf(group);
  ASSERT_EQ(before.bundle_nodes.size(), 2u);
  int lost = -1;
  std::string victim;
  for (const char* name : {"b", "c"}) {
    for (int i = 0; i < 2 && lost < 0; ++i) {
      if (pids[i] == cluster_->node(name).pid()) {
        lost = i;
        victim = name;
      }
    }
  }
  ASSERT_GE(lost, 0) << "a STRICT_SPREAD group of two bundles uses b or c";
  int kept = 1 - lost;
  cluster_->node(victim).Kill(SIGKILL);

  internal::PlacementGroupEntry after;
  bool replaced = testing::WaitUntil(
      [&] {
        after = EntryOf(group);
        return after.state == static_cast<int>(PlacementGroupState::CREATED) &&
               after.bundle_nodes.size() == 2 &&
               after.bundle_nodes[lost] != before.bundle_nodes[lost];
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(replaced) << "state " << after.state;
  EXPECT_EQ(after.bundle_nodes[kept], before.bundle_nodes[kept]) << "the kept bundle stays";
  EXPECT_NE(after.bundle_nodes[lost], after.bundle_nodes[kept]) << "STRICT_SPREAD holds";
  EXPECT_TRUE(group.Wait(10));

  std::vector<int> now = BundlePids(group, 2);
  EXPECT_EQ(now[kept], pids[kept]);
  EXPECT_NE(now[lost], pids[lost]) << "bundle " << lost << " runs on a live node";
  EXPECT_NE(now[lost], now[kept]);
  ActorHandle<Counter> actor = Actor(Counter::Create).SetPlacementGroup(group, lost).Remote(5);
  EXPECT_EQ(*Get(actor.Task(&Counter::Value).Remote(), kLong), 5);
  EXPECT_EQ(*Get(actor.Task(&Counter::NodePid).Remote(), kLong), now[lost]);
}

}  // namespace
}  // namespace airt
