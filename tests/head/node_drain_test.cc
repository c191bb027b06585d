// The node table's drain marks with a manual clock: shown in the view, the earlier deadline
// kept, refused for dead nodes, named in a drained node's death cause, kept in the node's row
// for a table loaded again (a restarted head); and actor placement leaving draining nodes out.
#include <gtest/gtest.h>

#include "head/internal/actor_placement.h"
#include "head/internal/node_table.h"
#include "tests/head/head_doubles.h"

namespace airt::head::internal {
namespace {

NodeInfo Node(const std::string& address) {
  NodeInfo info;
  info.id = NodeId::FromRandom();
  info.address = address;
  info.node_port = 7000;
  info.total = {{"CPU", 8}};
  return info;
}

class NodeDrainTable : public ::testing::Test {
 protected:
  InMemoryMetadataStore backing_;
  testing::FaultInjectingMetadataStore store_{backing_};
  testing::Committer commit_{store_};
  testing::ManualClock clock_;
  NodeTable table_{{1000, 100}, store_, clock_};
};

TEST_F(NodeDrainTable, DrainingNodeShowsItsReasonAndDeadlineWhileAlive) {
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  EXPECT_FALSE(table_.Find(a.id)->draining);
  Result<uint64_t> deadline = commit_(table_.StartDrain(a.id, "maintenance", 5000));
  ASSERT_TRUE(deadline.ok()) << deadline.status().ToString();
  EXPECT_EQ(*deadline, 5000u);
  std::optional<NodeView> view = table_.Find(a.id);
  EXPECT_TRUE(view->alive);
  EXPECT_TRUE(view->draining);
  EXPECT_EQ(view->drain_reason, "maintenance");
  EXPECT_EQ(view->drain_deadline_ms, 5000u);
}

TEST_F(NodeDrainTable, DrainedAgainKeepsTheEarlierDeadlineAndTakesTheNewReason) {
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  ASSERT_TRUE(commit_(table_.StartDrain(a.id, "first", 5000)).ok());
  EXPECT_EQ(*commit_(table_.StartDrain(a.id, "later", 9000)), 5000u) << "a later deadline is not taken";
  EXPECT_EQ(table_.Find(a.id)->drain_reason, "later");
  EXPECT_EQ(*commit_(table_.StartDrain(a.id, "sooner", 3000)), 3000u) << "an earlier one is";
}

TEST_F(NodeDrainTable, DrainOfAnUnknownNodeIsNotFoundAndOfADeadOneFailedPrecondition) {
  EXPECT_EQ(commit_(table_.StartDrain(NodeId::FromRandom(), "x", 1)).status().code(), Code::kNotFound);
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  ASSERT_TRUE(commit_(table_.MarkDead(a.id, "killed")).ok());
  EXPECT_EQ(commit_(table_.StartDrain(a.id, "x", 1)).status().code(), Code::kFailedPrecondition);
}

TEST_F(NodeDrainTable, DrainedNodeThatUnregistersDiesNamingItsDrain) {
  NodeInfo a = Node("10.0.0.1");
  NodeInfo b = Node("10.0.0.2");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  ASSERT_TRUE(commit_(table_.Register(b)).ok());
  ASSERT_TRUE(commit_(table_.StartDrain(a.id, "preemption notice", 5000)).ok());
  ASSERT_TRUE(commit_(table_.Unregister(a.id)).ok());
  ASSERT_TRUE(commit_(table_.Unregister(b.id)).ok());
  std::optional<NodeView> drained = table_.Find(a.id);
  EXPECT_FALSE(drained->alive);
  EXPECT_FALSE(drained->draining) << "a dead node is not shown draining";
  EXPECT_EQ(drained->death_cause, "it was drained (preemption notice) and left the cluster");
  EXPECT_EQ(table_.Find(b.id)->death_cause.rfind("it unregistered", 0), 0u);
}

TEST_F(NodeDrainTable, CancelDrainForgetsTheMark) {
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  ASSERT_TRUE(commit_(table_.StartDrain(a.id, "x", 5000)).ok());
  ASSERT_TRUE(commit_(table_.CancelDrain(a.id)).ok());
  EXPECT_FALSE(table_.Find(a.id)->draining);
  ASSERT_TRUE(commit_(table_.Unregister(a.id)).ok());
  EXPECT_EQ(table_.Find(a.id)->death_cause.rfind("it unregistered", 0), 0u);
}

TEST_F(NodeDrainTable, TableLoadedFromTheStoreKeepsTheDrainMark) {
  NodeInfo a = Node("10.0.0.1");
  NodeInfo b = Node("10.0.0.2");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  ASSERT_TRUE(commit_(table_.Register(b)).ok());
  ASSERT_TRUE(commit_(table_.StartDrain(a.id, "spot preemption", 5000)).ok());

  NodeTable restarted({1000, 100}, store_, clock_);
  ASSERT_TRUE(restarted.Load().ok());
  std::optional<NodeView> view = restarted.Find(a.id);
  ASSERT_TRUE(view.has_value());
  EXPECT_TRUE(view->draining);
  EXPECT_EQ(view->drain_reason, "spot preemption");
  EXPECT_EQ(view->drain_deadline_ms, 5000u);
  EXPECT_FALSE(restarted.Find(b.id)->draining);

  // The node registers with the restarted head: still draining, in memory and in its row.
  ASSERT_TRUE(commit_(restarted.Register(a)).ok());
  EXPECT_TRUE(restarted.Find(a.id)->draining);
  NodeTable again({1000, 100}, store_, clock_);
  ASSERT_TRUE(again.Load().ok());
  EXPECT_TRUE(again.Find(a.id)->draining);
  EXPECT_EQ(*commit_(again.StartDrain(a.id, "later", 9000)), 5000u) << "its deadline is kept";
  ASSERT_TRUE(commit_(again.Unregister(a.id)).ok());
  EXPECT_EQ(again.Find(a.id)->death_cause, "it was drained (later) and left the cluster");
}

TEST_F(NodeDrainTable, CancelledDrainIsForgottenInTheRowToo) {
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  ASSERT_TRUE(commit_(table_.StartDrain(a.id, "x", 5000)).ok());
  ASSERT_TRUE(commit_(table_.CancelDrain(a.id)).ok());
  NodeTable restarted({1000, 100}, store_, clock_);
  ASSERT_TRUE(restarted.Load().ok());
  EXPECT_FALSE(restarted.Find(a.id)->draining);
}

TEST_F(NodeDrainTable, DrainWhoseWriteFailsLeavesTheNodeUndrained) {
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  store_.FailNextWrites(1, Unavailable("redis went away"));
  EXPECT_EQ(commit_(table_.StartDrain(a.id, "x", 5000)).status().code(), Code::kUnavailable);
  EXPECT_FALSE(table_.Find(a.id)->draining);
}

TEST_F(NodeDrainTable, ActorPlacementLeavesADrainingNodeOut) {
  NodeInfo a = Node("10.0.0.1");
  NodeInfo b = Node("10.0.0.2");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  ASSERT_TRUE(commit_(table_.Register(b)).ok());
  ASSERT_TRUE(commit_(table_.StartDrain(a.id, "x", 5000)).ok());
  ActorId actor = ActorId::FromRandom();
  for (int i = 0; i < 4; ++i) {
    PlacementDecision decision = DecidePlacement(
        {{{"CPU", 1}}, "", {}}, PlacementNodes(table_.View(), {}, actor), {}, false);
    ASSERT_TRUE(std::holds_alternative<PlaceOn>(decision));
    EXPECT_EQ(std::get<PlaceOn>(decision).node, b.id);
  }
  ASSERT_TRUE(commit_(table_.StartDrain(b.id, "x", 5000)).ok());
  PlacementDecision none = DecidePlacement(
      {{{"CPU", 1}}, "", {}}, PlacementNodes(table_.View(), {}, actor), {}, false);
  EXPECT_FALSE(std::holds_alternative<PlaceOn>(none)) << "every node is draining";
}

}  // namespace
}  // namespace airt::head::internal
