// placeActor over EzRpc on loopback: the head chooses a node from its view for a registered actor,
// records it in the directory, leaves out the nodes that refused, waits for nodes to join during
// the grace period and then answers infeasible; getActor tells whether the actor's job runs.
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "tests/head/head_rpc_fixture.h"

namespace airt::head::testing {
namespace {

class HeadPlacementTest : public HeadRpcTest {
 protected:
  using Placement = capnp::Response<proto::Head::PlaceActorResults>;

  Result<Placement> Place(const ActorId& id, const std::vector<NodeId>& avoid = {}) {
    auto request = head().placeActorRequest();
    request.setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
    auto list = request.initAvoidNodes(avoid.size());
    for (size_t i = 0; i < avoid.size(); ++i) {
      list.set(i, capnp::Data::Reader(avoid[i].data(), NodeId::kSize));
    }
    return Send(kj::mv(request));
  }

  // A node of `cpus` CPUs (and `extra` of a custom resource when named) serving on `port`.
  Status AddNode(const NodeId& id, double cpus, uint16_t port, const std::string& extra = "") {
    return RegisterNode(id, 0, [&](proto::NodeInfo::Builder info) {
      info.setNodePort(port);
      auto total = info.initTotal(extra.empty() ? 1 : 2);
      total[0].setName("CPU");
      total[0].setAmount(cpus);
      if (!extra.empty()) {
        total[1].setName(extra);
        total[1].setAmount(1);
      }
    });
  }

  // An actor of a new job asking for `amount` of `resource`.
  ActorId NewActor(const std::string& resource, double amount, const std::string& name = "") {
    ActorId id = ActorId::Of(*RegisterJob());
    EXPECT_TRUE(RegisterActor(id, name, "", [&](proto::ActorInfo::Builder info) {
                  auto resources = info.initResources(1);
                  resources[0].setName(resource);
                  resources[0].setAmount(amount);
                }).ok());
    return id;
  }

  // Lets `ms` pass on the head's clock, `nodes` heartbeating often enough to stay alive.
  void Pass(int64_t ms, const std::vector<NodeId>& nodes) {
    for (int64_t passed = 0; passed < ms; passed += kHeartbeatMs) {
      clock_.AdvanceMs(kHeartbeatMs);
      for (const NodeId& node : nodes) ASSERT_TRUE(*Heartbeat(node));
    }
  }

  static NodeId PlacedOn(const Placement& placement) {
    auto placed = placement.getPlacement().getPlaced();
    return NodeId::FromRaw(placed.getNodeId().begin());
  }

  Result<capnp::Response<proto::Head::GetActorResults>> Get(const ActorId& id) {
    auto request = head().getActorRequest();
    request.setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
    return Send(kj::mv(request));
  }
};

TEST_F(HeadPlacementTest, PlacesOnTheNodeWithTheResourceAndRecordsIt) {
  NodeId plain = NodeId::FromRandom(), special = NodeId::FromRandom();
  ASSERT_TRUE(AddNode(plain, 8, 7000).ok());
  ASSERT_TRUE(AddNode(special, 1, 7100, "special").ok());
  ActorId actor = NewActor("special", 1);
  auto placed = Place(actor);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  ASSERT_TRUE(placed->getPlacement().isPlaced());
  EXPECT_EQ(PlacedOn(*placed), special);
  EXPECT_EQ(std::string(placed->getPlacement().getPlaced().getNodeAddress().cStr()),
            "10.0.0.1:7100");
  auto entry = Get(actor);
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ(entry->getInfo().getNodeId(), capnp::Data::Reader(special.data(), NodeId::kSize));
  EXPECT_EQ(entry->getInfo().getState(), proto::ActorState::PENDING) << "its owner's to change";
  ASSERT_EQ(entry->getInfo().getResources().size(), 1u);
  EXPECT_EQ(std::string(entry->getInfo().getResources()[0].getName().cStr()), "special");
}

TEST_F(HeadPlacementTest, SpreadsActorsOverNodesCountingThoseJustPlaced) {
  NodeId a = NodeId::FromRandom(), b = NodeId::FromRandom();
  ASSERT_TRUE(AddNode(a, 2, 7000).ok());
  ASSERT_TRUE(AddNode(b, 2, 7001).ok());
  std::map<NodeId, int> landed;
  for (int i = 0; i < 4; ++i) {
    auto placed = Place(NewActor("CPU", 1));  // no heartbeat in between: the directory counts
    ASSERT_TRUE(placed.ok() && placed->getPlacement().isPlaced());
    ++landed[PlacedOn(*placed)];
  }
  EXPECT_EQ(landed[a], 2);
  EXPECT_EQ(landed[b], 2);
}

TEST_F(HeadPlacementTest, ARefusingNodeIsAvoidedAndAKilledActorIsNotPlaced) {
  NodeId a = NodeId::FromRandom(), b = NodeId::FromRandom();
  ASSERT_TRUE(AddNode(a, 4, 7000).ok());
  ASSERT_TRUE(AddNode(b, 4, 7001).ok());
  ActorId actor = NewActor("CPU", 1);
  auto first = Place(actor);
  ASSERT_TRUE(first.ok() && first->getPlacement().isPlaced());
  NodeId refused = PlacedOn(*first);
  auto second = Place(actor, {refused});
  ASSERT_TRUE(second.ok() && second->getPlacement().isPlaced());
  EXPECT_NE(PlacedOn(*second), refused);

  auto kill = head().killActorRequest();
  kill.setActorId(capnp::Data::Reader(actor.data(), ActorId::kSize));
  ASSERT_TRUE(Send(kj::mv(kill)).ok());
  EXPECT_EQ(Place(actor).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(Place(ActorId::Of(JobId::FromRandom())).status().code(), Code::kNotFound);
}

TEST_F(HeadPlacementTest, WaitsForANodeToJoinThenAnswersInfeasibleAfterTheGrace) {
  NodeId small = NodeId::FromRandom();
  ASSERT_TRUE(AddNode(small, 2, 7000).ok());
  ActorId joins = NewActor("CPU", 16), never = NewActor("CPU", 64);
  for (const ActorId& id : {joins, never}) {
    auto early = Place(id);
    ASSERT_TRUE(early.ok());
    ASSERT_TRUE(early->getPlacement().isWaiting());
    EXPECT_NE(std::string(early->getPlacement().getWaiting().cStr()).find("waiting for nodes"),
              std::string::npos);
  }
  Pass(5000, {small});
  NodeId big = NodeId::FromRandom();
  ASSERT_TRUE(AddNode(big, 32, 7001).ok());
  auto joined = Place(joins);
  ASSERT_TRUE(joined.ok() && joined->getPlacement().isPlaced());
  EXPECT_EQ(PlacedOn(*joined), big);

  auto still = Place(never);
  ASSERT_TRUE(still.ok() && still->getPlacement().isWaiting()) << "the grace counts from its ask";
  Pass(5000, {small, big});
  auto late = Place(never);
  ASSERT_TRUE(late.ok() && late->getPlacement().isInfeasible());
  EXPECT_EQ(std::string(late->getPlacement().getInfeasible().cStr()),
            "no node can ever run {CPU: 64}: node " + small.Hex().substr(0, 8) +
                " has {CPU: 2} (accelerator_type A10), node " + big.Hex().substr(0, 8) +
                " has {CPU: 32} (accelerator_type A10)");
}

TEST_F(HeadPlacementTest, GetActorTellsWhetherTheActorsJobStillRuns) {
  JobId job = *RegisterJob();
  ActorId detached = ActorId::Of(job);
  ASSERT_TRUE(RegisterActor(detached, "keeper", "ns", [](proto::ActorInfo::Builder info) {
                info.setDetached(true);
              }).ok());
  auto running = Get(detached);
  ASSERT_TRUE(running.ok());
  EXPECT_TRUE(running->getJobAlive());
  auto finish = head().finishJobRequest();
  finish.setJobId(capnp::Data::Reader(job.data(), JobId::kSize));
  ASSERT_TRUE(Send(kj::mv(finish)).ok());
  auto finished = Get(detached);
  ASSERT_TRUE(finished.ok());
  EXPECT_NE(finished->getInfo().getState(), proto::ActorState::DEAD) << "detached";
  EXPECT_FALSE(finished->getJobAlive());
}

}  // namespace
}  // namespace airt::head::testing
