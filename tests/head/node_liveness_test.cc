// The head's node liveness over the real RPC stack on loopback, with the manual clock: a node whose
// connection drops is dead after a short grace with that cause, a dead node may not come back, a node that
// re-registers keeps its session, and a restarted head keeps the deaths.
#include <gtest/gtest.h>

#include "tests/head/head_rpc_fixture.h"

namespace airt::head::testing {
namespace {

// The node's side of a session: never answers `hold`.
class HeldSession final : public proto::NodeSession::Server {
 protected:
  kj::Promise<void> hold(HoldContext) override { return kj::NEVER_DONE; }
};

class NodeLivenessTest : public HeadRpcTest {
 protected:
  static std::function<void(proto::NodeInfo::Builder)> Fill(const NodeId& id) {
    return [id](proto::NodeInfo::Builder info) { FillNode(info, id); };
  }
};

// A node on a connection of its own, which the test can close.
struct SessionNode {
  SessionNode(uint port, const std::function<void(proto::NodeInfo::Builder)>& fill)
      : client("127.0.0.1", port) {
    auto request = client.getMain<proto::Head>().registerNodeRequest();
    fill(request.initInfo());
    request.setSession(kj::heap<HeldSession>());
    registered = CatchKj([&] { request.send().wait(client.getWaitScope()); });
  }
  capnp::EzRpcClient client;
  Status registered;
};

std::string CauseOf(proto::NodeStatus::Reader node) { return node.getDeathCause().cStr(); }

TEST_F(NodeLivenessTest, NodeWhoseConnectionDropsIsDeadAfterTheGraceWithThatCause) {
  NodeId a = NodeId::FromRandom(), b = NodeId::FromRandom();
  auto node_a = std::make_unique<SessionNode>(port(), Fill(a));
  ASSERT_TRUE(node_a->registered.ok()) << node_a->registered.ToString();
  SessionNode node_b(port(), Fill(b));
  ASSERT_TRUE(node_b.registered.ok());
  node_a.reset();  // its connection closes, as when the node is killed
  ASSERT_TRUE(PumpUntil([&] { return !*Heartbeat(a); }))
      << "once the head saw the drop, the node must register again";
  EXPECT_TRUE(View()->getNodes()[0].getAlive()) << "within the grace";
  clock_.AdvanceMs(kDisconnectGraceMs);
  int64_t wall = clock_.WallMs();
  EXPECT_FALSE(View()->getNodes()[0].getAlive()) << "the grace passed, long before the timeout";
  ASSERT_EQ(head_->CheckLiveness().wait(server_->getWaitScope()), std::vector<NodeId>{a});
  auto view = View();
  EXPECT_NE(CauseOf(view->getNodes()[0]).find("its connection to the head dropped"),
            std::string::npos)
      << CauseOf(view->getNodes()[0]);
  EXPECT_EQ(view->getNodes()[0].getDeathTimeMs(), static_cast<uint64_t>(wall));
  EXPECT_TRUE(view->getNodes()[1].getAlive()) << "the other node is untouched";
  Status back = RegisterNode(a);
  EXPECT_EQ(back.code(), Code::kFailedPrecondition);
  EXPECT_NE(back.message().find("connection to the head dropped"), std::string::npos)
      << back.message();
}

TEST_F(NodeLivenessTest, NodeThatRegistersAgainWithinTheGraceStaysAlive) {
  NodeId a = NodeId::FromRandom();
  auto first = std::make_unique<SessionNode>(port(), Fill(a));
  ASSERT_TRUE(first->registered.ok());
  first.reset();
  ASSERT_TRUE(PumpUntil([&] { return !*Heartbeat(a); }));
  SessionNode again(port(), Fill(a));  // its connection broke and it reconnected
  ASSERT_TRUE(again.registered.ok()) << again.registered.ToString();
  clock_.AdvanceMs(kDisconnectGraceMs);
  EXPECT_TRUE(View()->getNodes()[0].getAlive());
  EXPECT_TRUE(*Heartbeat(a));
}

TEST_F(NodeLivenessTest, ReRegisteringOnANewConnectionKeepsTheNodeAliveWhenTheOldOneCloses) {
  NodeId a = NodeId::FromRandom();
  auto first = std::make_unique<SessionNode>(port(), Fill(a));
  ASSERT_TRUE(first->registered.ok());
  SessionNode second(port(), Fill(a));
  ASSERT_TRUE(second.registered.ok());
  first.reset();
  // Let the head see the first connection close.
  kj::Timer& timer = server_->getIoProvider().getTimer();
  for (int i = 0; i < 20; ++i) timer.afterDelay(kj::MILLISECONDS).wait(server_->getWaitScope());
  EXPECT_TRUE(*Heartbeat(a)) << "only the latest session's drop counts";
  clock_.AdvanceMs(kDisconnectGraceMs);
  EXPECT_TRUE(View()->getNodes()[0].getAlive());
}

TEST_F(NodeLivenessTest, UnregisteredNodeClosingItsConnectionKeepsTheUnregisterCause) {
  NodeId a = NodeId::FromRandom();
  auto node = std::make_unique<SessionNode>(port(), Fill(a));
  ASSERT_TRUE(node->registered.ok());
  auto request = node->client.getMain<proto::Head>().unregisterNodeRequest();
  request.setNodeId(capnp::Data::Reader(a.data(), NodeId::kSize));
  request.send().wait(node->client.getWaitScope());
  node.reset();
  kj::Timer& timer = server_->getIoProvider().getTimer();
  for (int i = 0; i < 20; ++i) timer.afterDelay(kj::MILLISECONDS).wait(server_->getWaitScope());
  auto view = View();
  EXPECT_FALSE(view->getNodes()[0].getAlive());
  EXPECT_NE(CauseOf(view->getNodes()[0]).find("unregistered"), std::string::npos)
      << CauseOf(view->getNodes()[0]);
}

TEST_F(NodeLivenessTest, RestartedHeadShowsTheDeadNodeWithItsCauseAndStillRefusesIt) {
  NodeId a = NodeId::FromRandom(), b = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(a).ok());
  ASSERT_TRUE(RegisterNode(b).ok());
  clock_.AdvanceMs(kTimeoutMs / 2);
  ASSERT_TRUE(*Heartbeat(b));
  clock_.AdvanceMs(kTimeoutMs / 2);
  std::vector<NodeId> died = head_->CheckLiveness().wait(server_->getWaitScope());
  ASSERT_EQ(died, std::vector<NodeId>{a});

  StopHead();
  StartHead();
  auto view = View();
  ASSERT_EQ(view->getNodes().size(), 2u);
  EXPECT_FALSE(view->getNodes()[0].getAlive());
  EXPECT_EQ(CauseOf(view->getNodes()[0]),
            "no heartbeat for 1000 ms (the head's node timeout is 1000 ms)");
  EXPECT_TRUE(view->getNodes()[1].getAlive());
  EXPECT_EQ(RegisterNode(a).code(), Code::kFailedPrecondition);
  EXPECT_TRUE(RegisterNode(b).ok()) << "a node alive before the restart is welcome back";
}

}  // namespace
}  // namespace airt::head::testing
