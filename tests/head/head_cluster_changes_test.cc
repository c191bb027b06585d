// Head.waitClusterChange over EzRpc on loopback (docs/cluster.md "Cluster changes"): the first ask
// gets the full view, a pending wait answers the next registration, heartbeat or death with only
// what changed, a membership-only wait sleeps through heartbeats, maxWaitMs answers a quiet head
// with nothing changed, a subscriber whose connection drops leaves no waiter behind, and a
// restarted head answers an old subscriber with its full view.
#include <gtest/gtest.h>

#include "tests/head/head_rpc_fixture.h"

namespace airt::head::testing {
namespace {

class HeadClusterChangesTest : public HeadRpcTest {
 protected:
  using ChangeReply = capnp::Response<proto::Head::WaitClusterChangeResults>;

  capnp::RemotePromise<proto::Head::WaitClusterChangeResults> Ask(
      uint64_t epoch, uint64_t since, bool membership_only = false, uint32_t max_wait_ms = 0) {
    auto request = head().waitClusterChangeRequest();
    request.setEpoch(epoch);
    request.setSinceVersion(since);
    request.setMembershipOnly(membership_only);
    request.setMaxWaitMs(max_wait_ms);
    return request.send();
  }

  // Runs the loop until `pending` answered; false after 10 s.
  template <typename P>
  bool Answered(P& pending) {
    return PumpUntil([&] { return pending.poll(client_->getWaitScope()); });
  }

  // A few turns of the loop, after which a wait that should not answer still has not.
  template <typename P>
  bool StillWaiting(P& pending) {
    kj::Timer& timer = server_->getIoProvider().getTimer();
    for (int i = 0; i < 20; ++i) {
      timer.afterDelay(kj::MILLISECONDS).wait(server_->getWaitScope());
      if (pending.poll(client_->getWaitScope())) return false;
    }
    return true;
  }

  static bool Lists(const ChangeReply& reply, const NodeId& id, bool alive) {
    for (auto node : reply.getChange().getNodes()) {
      if (node.getInfo().getNodeId() == capnp::Data::Reader(id.data(), NodeId::kSize)) {
        return node.getAlive() == alive;
      }
    }
    return false;
  }
};

TEST_F(HeadClusterChangesTest, AWaitAnswersTheNextRegistrationAndDeathWithWhatChanged) {
  NodeId a = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(a).ok());
  ChangeReply first = Ask(0, 0).wait(client_->getWaitScope());
  EXPECT_TRUE(first.getChange().getFull());
  EXPECT_NE(first.getChange().getEpoch(), 0u);
  EXPECT_TRUE(Lists(first, a, true));
  uint64_t epoch = first.getChange().getEpoch();
  uint64_t version = first.getChange().getVersion();

  auto joined = Ask(epoch, version, /*membership_only=*/true);
  ASSERT_TRUE(StillWaiting(joined));
  NodeId b = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(b).ok());
  ASSERT_TRUE(Answered(joined));
  ChangeReply second = joined.wait(client_->getWaitScope());
  EXPECT_FALSE(second.getChange().getFull());
  ASSERT_EQ(second.getChange().getNodes().size(), 1u);
  EXPECT_TRUE(Lists(second, b, true));
  version = second.getChange().getVersion();

  auto left = Ask(epoch, version, true);
  ASSERT_TRUE(StillWaiting(left));
  auto unregister = head().unregisterNodeRequest();
  unregister.setNodeId(capnp::Data::Reader(a.data(), NodeId::kSize));
  ASSERT_TRUE(Send(kj::mv(unregister)).ok());
  ASSERT_TRUE(Answered(left));
  ChangeReply third = left.wait(client_->getWaitScope());
  ASSERT_EQ(third.getChange().getNodes().size(), 1u);
  EXPECT_TRUE(Lists(third, a, false));
}

TEST_F(HeadClusterChangesTest, AHeartbeatWakesResourceWaitersButNotMembershipOnes) {
  NodeId a = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(a).ok());
  ChangeReply first = Ask(0, 0).wait(client_->getWaitScope());
  uint64_t epoch = first.getChange().getEpoch();
  uint64_t version = first.getChange().getVersion();
  auto members = Ask(epoch, version, true);
  auto resources = Ask(epoch, version, false);
  ASSERT_TRUE(Heartbeat(a).ok());  // 4 of 8 CPUs free now
  ASSERT_TRUE(Answered(resources));
  ChangeReply changed = resources.wait(client_->getWaitScope());
  ASSERT_EQ(changed.getChange().getNodes().size(), 1u);
  EXPECT_EQ(changed.getChange().getNodes()[0].getAvailable()[0].getAmount(), 4);
  EXPECT_TRUE(StillWaiting(members));
  // The same load again is no news.
  auto again = Ask(epoch, changed.getChange().getVersion(), false);
  ASSERT_TRUE(Heartbeat(a).ok());
  EXPECT_TRUE(StillWaiting(again));
}

TEST_F(HeadClusterChangesTest, ATimedOutNodeShowsDeadAtTheNextLivenessCheck) {
  NodeId a = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(a).ok());
  ChangeReply first = Ask(0, 0).wait(client_->getWaitScope());
  auto died = Ask(first.getChange().getEpoch(), first.getChange().getVersion(), true);
  clock_.AdvanceMs(kTimeoutMs + 1);
  head_->CheckLiveness().wait(server_->getWaitScope());
  ASSERT_TRUE(Answered(died));
  EXPECT_TRUE(Lists(died.wait(client_->getWaitScope()), a, false));
}

TEST_F(HeadClusterChangesTest, MaxWaitAnswersAQuietHeadWithNothingChanged) {
  ASSERT_TRUE(RegisterNode(NodeId::FromRandom()).ok());
  ChangeReply first = Ask(0, 0).wait(client_->getWaitScope());
  uint64_t version = first.getChange().getVersion();
  auto quiet = Ask(first.getChange().getEpoch(), version, true, /*max_wait_ms=*/500);
  ASSERT_TRUE(StillWaiting(quiet));
  clock_.AdvanceMs(500);
  head_->CheckLiveness().wait(server_->getWaitScope());
  ASSERT_TRUE(Answered(quiet));
  ChangeReply reply = quiet.wait(client_->getWaitScope());
  EXPECT_EQ(reply.getChange().getVersion(), version);
  EXPECT_FALSE(reply.getChange().getFull());
  EXPECT_EQ(reply.getChange().getNodes().size(), 0u);
}

TEST_F(HeadClusterChangesTest, ASubscriberWhoseConnectionDropsLeavesNoWaiter) {
  ASSERT_TRUE(RegisterNode(NodeId::FromRandom()).ok());
  ChangeReply first = Ask(0, 0).wait(client_->getWaitScope());
  {
    capnp::EzRpcClient other("127.0.0.1", port());
    auto request = other.getMain<proto::Head>().waitClusterChangeRequest();
    request.setEpoch(first.getChange().getEpoch());
    request.setSinceVersion(first.getChange().getVersion());
    auto pending = request.send();
    ASSERT_TRUE(PumpUntil([&] { return head_->ClusterFeedSnapshot().waiters == 1; }));
  }
  EXPECT_TRUE(PumpUntil([&] { return head_->ClusterFeedSnapshot().waiters == 0; }));
  // The head goes on publishing.
  ASSERT_TRUE(RegisterNode(NodeId::FromRandom()).ok());
  EXPECT_EQ(head_->ClusterFeedSnapshot().nodes, 2u);
}

TEST_F(HeadClusterChangesTest, ARestartedHeadAnswersAnOldSubscriberWithItsFullView) {
  NodeId a = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(a).ok());
  ChangeReply first = Ask(0, 0).wait(client_->getWaitScope());
  uint64_t old_epoch = first.getChange().getEpoch();
  uint64_t old_version = first.getChange().getVersion();
  StopHead();
  StartHead();  // same store: it reads node a back
  ChangeReply after = Ask(old_epoch, old_version, true).wait(client_->getWaitScope());
  EXPECT_NE(after.getChange().getEpoch(), old_epoch);
  EXPECT_TRUE(after.getChange().getFull());
  EXPECT_EQ(after.getChange().getNodes().size(), 1u);
}

}  // namespace
}  // namespace airt::head::testing
