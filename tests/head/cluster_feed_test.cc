// The cluster change feed (head/internal/cluster_feed.h) on its own: versions per change, deltas
// since a version, nothing missed between a read and the next wait, membership-only waiters, the
// full view for another epoch or after a node was forgotten, waiters that go away or expire.
#include "head/internal/cluster_feed.h"

#include <gtest/gtest.h>
#include <kj/async.h>

#include <memory>

namespace airt::head::internal {
namespace {

constexpr uint64_t kEpoch = 77;

NodeView Node(const NodeId& id, double cpus_free, bool alive = true) {
  NodeView v;
  v.info.id = id;
  v.info.address = "10.0.0.1";
  v.info.node_port = 7000;
  v.info.total = {{"CPU", 8}};
  v.alive = alive;
  v.load.available = {{"CPU", cpus_free}};
  return v;
}

class ClusterFeedTest : public ::testing::Test {
 protected:
  // Held by pointer: a kj member's destructor is noexcept(false).
  std::unique_ptr<kj::EventLoop> loop_ = std::make_unique<kj::EventLoop>();
  std::unique_ptr<kj::WaitScope> scope_ = std::make_unique<kj::WaitScope>(*loop_);
  kj::WaitScope& wait_ = *scope_;
  ClusterFeed feed_{kEpoch};
  NodeId a_ = NodeId::FromRandom();
  NodeId b_ = NodeId::FromRandom();
};

TEST_F(ClusterFeedTest, FirstAskGetsTheFullViewAtOnce) {
  feed_.Publish({Node(a_, 8), Node(b_, 8)}, {});
  EXPECT_TRUE(feed_.Due(0, 0, false));
  ClusterFeed::Delta delta = feed_.Since(0, 0);
  EXPECT_TRUE(delta.full);
  EXPECT_EQ(delta.epoch, kEpoch);
  EXPECT_GT(delta.version, 0u);
  ASSERT_EQ(delta.nodes.size(), 2u);
  EXPECT_EQ(delta.nodes[0].info.id, a_);
  EXPECT_EQ(delta.nodes[1].info.id, b_);
}

TEST_F(ClusterFeedTest, ADeltaListsOnlyTheEntriesChangedAfterTheAskedVersion) {
  feed_.Publish({Node(a_, 8), Node(b_, 8)}, {});
  uint64_t seen = feed_.Since(0, 0).version;
  feed_.Publish({Node(a_, 8), Node(b_, 3)}, {});
  ClusterFeed::Delta delta = feed_.Since(kEpoch, seen);
  EXPECT_FALSE(delta.full);
  EXPECT_EQ(delta.version, seen + 1);
  ASSERT_EQ(delta.nodes.size(), 1u);
  EXPECT_EQ(delta.nodes[0].info.id, b_);
  EXPECT_EQ(delta.nodes[0].load.available[0].amount, 3);
  // Nothing new since: an empty delta, and a waiter would wait.
  EXPECT_TRUE(feed_.Since(kEpoch, delta.version).nodes.empty());
  EXPECT_FALSE(feed_.Due(kEpoch, delta.version, false));
}

TEST_F(ClusterFeedTest, AChangeBetweenAReadAndTheNextWaitIsNotMissed) {
  feed_.Publish({Node(a_, 8)}, {});
  ClusterFeed::Delta read = feed_.Since(0, 0);
  // The node dies before the client's next wait arrives.
  feed_.Publish({Node(a_, 8, /*alive=*/false)}, {});
  kj::Promise<void> wait = feed_.Wait(read.epoch, read.version, /*membership_only=*/true, 0);
  EXPECT_TRUE(wait.poll(wait_));
  ClusterFeed::Delta delta = feed_.Since(read.epoch, read.version);
  ASSERT_EQ(delta.nodes.size(), 1u);
  EXPECT_FALSE(delta.nodes[0].alive);
}

TEST_F(ClusterFeedTest, AWaiterWakesAtTheNextChangeAndSeesIt) {
  feed_.Publish({Node(a_, 8)}, {});
  uint64_t seen = feed_.Since(0, 0).version;
  kj::Promise<void> wait = feed_.Wait(kEpoch, seen, false, 0);
  EXPECT_FALSE(wait.poll(wait_));
  EXPECT_EQ(feed_.snapshot().waiters, 1u);
  feed_.Publish({Node(a_, 8), Node(b_, 8)}, {});
  ASSERT_TRUE(wait.poll(wait_));
  wait.wait(wait_);
  EXPECT_EQ(feed_.snapshot().waiters, 0u);
  ClusterFeed::Delta delta = feed_.Since(kEpoch, seen);
  ASSERT_EQ(delta.nodes.size(), 1u);
  EXPECT_EQ(delta.nodes[0].info.id, b_);
}

TEST_F(ClusterFeedTest, HeartbeatAgeAndTheWordingOfADeathAreNoNews) {
  NodeView dead = Node(a_, 8, false);
  dead.death_cause = "no heartbeat for 1001 ms";
  feed_.Publish({dead}, {});
  uint64_t seen = feed_.snapshot().version;
  dead.death_cause = "no heartbeat for 1250 ms";
  dead.ms_since_heartbeat = 1250;
  feed_.Publish({dead}, {});
  EXPECT_EQ(feed_.snapshot().version, seen);
  ClusterFeed::Delta kept = feed_.Since(0, 0);
  ASSERT_EQ(kept.nodes.size(), 1u);
  EXPECT_EQ(kept.nodes[0].death_cause, "no heartbeat for 1001 ms") << "the entry is as published";
  EXPECT_EQ(kept.nodes[0].ms_since_heartbeat, 0u);
  // Its death recorded (a time set) is a change.
  dead.death_time_ms = 5;
  feed_.Publish({dead}, {});
  EXPECT_EQ(feed_.snapshot().version, seen + 1);
  // A cause where there was none, and none where there was one, are changes.
  NodeView alive = Node(b_, 8);
  feed_.Publish({dead, alive}, {});
  seen = feed_.snapshot().version;
  alive.death_cause = "no heartbeat for 1001 ms";
  feed_.Publish({dead, alive}, {});
  EXPECT_EQ(feed_.snapshot().version, seen + 1);
  alive.death_cause.clear();
  feed_.Publish({dead, alive}, {});
  EXPECT_EQ(feed_.snapshot().version, seen + 2);
}

TEST_F(ClusterFeedTest, AMembershipOnlyWaiterSleepsThroughResourceChanges) {
  feed_.Publish({Node(a_, 8)}, {});
  uint64_t seen = feed_.snapshot().version;
  kj::Promise<void> members = feed_.Wait(kEpoch, seen, /*membership_only=*/true, 0);
  kj::Promise<void> all = feed_.Wait(kEpoch, seen, /*membership_only=*/false, 0);
  EXPECT_TRUE(feed_.PublishNode(Node(a_, 2)));  // a heartbeat: fewer CPUs free
  EXPECT_TRUE(all.poll(wait_));
  EXPECT_FALSE(members.poll(wait_));
  EXPECT_EQ(feed_.snapshot().membership_version, seen);
  EXPECT_TRUE(feed_.PublishNode(Node(a_, 2, /*alive=*/false)));
  EXPECT_TRUE(members.poll(wait_));
  // The answer lists the resource change too.
  ClusterFeed::Delta delta = feed_.Since(kEpoch, seen);
  ASSERT_EQ(delta.nodes.size(), 1u);
  EXPECT_FALSE(delta.nodes[0].alive);
  EXPECT_EQ(delta.nodes[0].load.available[0].amount, 2);
}

TEST_F(ClusterFeedTest, PublishNodeRefusesANodeItDoesNotHold) {
  feed_.Publish({Node(a_, 8)}, {});
  EXPECT_FALSE(feed_.PublishNode(Node(b_, 8)));
  EXPECT_EQ(feed_.snapshot().nodes, 1u);
}

TEST_F(ClusterFeedTest, AnotherEpochOrAVersionAheadGetsTheFullView) {
  feed_.Publish({Node(a_, 8), Node(b_, 8)}, {});
  feed_.Publish({Node(a_, 1), Node(b_, 8)}, {});
  uint64_t now = feed_.snapshot().version;
  // A client of an earlier head incarnation, whose version may be anything.
  EXPECT_TRUE(feed_.Due(kEpoch + 1, now, true));
  ClusterFeed::Delta other = feed_.Since(kEpoch + 1, now);
  EXPECT_TRUE(other.full);
  EXPECT_EQ(other.nodes.size(), 2u);
  EXPECT_TRUE(feed_.Since(kEpoch, now + 5).full);
}

TEST_F(ClusterFeedTest, ANodeForgottenMakesOlderVersionsGetTheFullView) {
  feed_.Publish({Node(a_, 8, false), Node(b_, 8)}, {});
  uint64_t seen = feed_.snapshot().version;
  kj::Promise<void> members = feed_.Wait(kEpoch, seen, true, 0);
  feed_.Publish({Node(b_, 8)}, {});  // the head forgot dead node a
  EXPECT_TRUE(members.poll(wait_));
  ClusterFeed::Delta delta = feed_.Since(kEpoch, seen);
  EXPECT_TRUE(delta.full);
  ASSERT_EQ(delta.nodes.size(), 1u);
  EXPECT_EQ(delta.nodes[0].info.id, b_);
  EXPECT_FALSE(feed_.Since(kEpoch, delta.version).full);
}

TEST_F(ClusterFeedTest, NodeTypesChangingIsAMembershipChange) {
  feed_.Publish({Node(a_, 8)}, {});
  uint64_t seen = feed_.snapshot().version;
  NodeInfo gpu_type;
  gpu_type.address = "gpu_node";
  gpu_type.total = {{"GPU", 1}};
  feed_.Publish({Node(a_, 8)}, {gpu_type});
  EXPECT_EQ(feed_.snapshot().membership_version, seen + 1);
  ClusterFeed::Delta delta = feed_.Since(kEpoch, seen);
  EXPECT_TRUE(delta.nodes.empty());
  ASSERT_EQ(delta.types.size(), 1u);
  EXPECT_EQ(delta.types[0].address, "gpu_node");
}

TEST_F(ClusterFeedTest, AWaiterDroppedIsRemoved) {
  feed_.Publish({Node(a_, 8)}, {});
  uint64_t seen = feed_.snapshot().version;
  {
    kj::Promise<void> first = feed_.Wait(kEpoch, seen, false, 0);
    kj::Promise<void> second = feed_.Wait(kEpoch, seen, true, 0);
    EXPECT_EQ(feed_.snapshot().waiters, 2u);
  }
  EXPECT_EQ(feed_.snapshot().waiters, 0u);
  feed_.Publish({Node(a_, 1)}, {});  // wakes nobody, touches nothing freed
  EXPECT_EQ(feed_.snapshot().waiters, 0u);
}

TEST_F(ClusterFeedTest, ExpireAnswersAWaiterPastItsDeadlineWithNothingChanged) {
  feed_.Publish({Node(a_, 8)}, {});
  uint64_t seen = feed_.snapshot().version;
  kj::Promise<void> bounded = feed_.Wait(kEpoch, seen, false, /*deadline_ms=*/1000);
  kj::Promise<void> unbounded = feed_.Wait(kEpoch, seen, false, 0);
  feed_.Expire(999);
  EXPECT_FALSE(bounded.poll(wait_));
  feed_.Expire(1000);
  EXPECT_TRUE(bounded.poll(wait_));
  EXPECT_FALSE(unbounded.poll(wait_));
  EXPECT_EQ(feed_.snapshot().waiters, 1u);
  ClusterFeed::Delta delta = feed_.Since(kEpoch, seen);
  EXPECT_EQ(delta.version, seen);
  EXPECT_FALSE(delta.full);
  EXPECT_TRUE(delta.nodes.empty());
}

TEST(ClusterFeed, AWaiterOutlivingTheFeedFailsInsteadOfHanging) {
  kj::EventLoop loop;
  kj::WaitScope wait(loop);
  auto feed = std::make_unique<ClusterFeed>(kEpoch);
  feed->Publish({Node(NodeId::FromRandom(), 8)}, {});
  kj::Promise<void> waiting = feed->Wait(kEpoch, feed->snapshot().version, false, 0);
  feed.reset();
  bool failed = false;
  waiting.catch_([&](kj::Exception&&) { failed = true; }).wait(wait);
  EXPECT_TRUE(failed);
}

TEST_F(ClusterFeedTest, AnEmptyViewHasAVersionToWaitOn) {
  ClusterFeed::Delta first = feed_.Since(0, 0);
  EXPECT_TRUE(first.full);
  EXPECT_TRUE(first.nodes.empty());
  EXPECT_NE(first.version, 0u);
  // Passing it back waits (instead of being answered at once, again and again).
  EXPECT_FALSE(feed_.Due(first.epoch, first.version, false));
  kj::Promise<void> wait = feed_.Wait(first.epoch, first.version, false, 0);
  EXPECT_FALSE(wait.poll(wait_));
  feed_.Publish({Node(a_, 8)}, {});
  EXPECT_TRUE(wait.poll(wait_));
}

TEST(ClusterFeed, NewFeedEpochIsNeverZero) {
  for (int i = 0; i < 100; ++i) EXPECT_NE(NewFeedEpoch(), 0u);
}

}  // namespace
}  // namespace airt::head::internal
