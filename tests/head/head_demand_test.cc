// The head's demand over EzRpc on loopback (docs/autoscaler.md "Demand"): waitDemand answers at
// once for an old version and otherwise waits for the next change; the nodes' queued shapes
// (summed, and shown per node), pending actors, pending placement groups with their strategy and
// the standing request_resources all count (and a restarted head keeps the latter); the autoscaler's node types keep an actor that no
// node but a node type holds waiting, not infeasible.
#include <gtest/gtest.h>

#include "tests/head/head_rpc_fixture.h"

namespace airt::head::testing {
namespace {

class HeadDemandTest : public HeadRpcTest {
 protected:
  using DemandReply = capnp::Response<proto::Head::WaitDemandResults>;

  Result<DemandReply> Demand(uint64_t since) {
    auto request = head().waitDemandRequest();
    request.setSinceVersion(since);
    return Send(kj::mv(request));
  }

  // A heartbeat reporting `count` queued requests for {GPU: 1}.
  Result<bool> HeartbeatQueued(const NodeId& node, uint32_t count) {
    return Heartbeat(node, [&](proto::Head::HeartbeatParams::Builder params) {
      auto queued = params.initQueued(count > 0 ? 1 : 0);
      if (count == 0) return;
      auto resources = queued[0].initResources(1);
      resources[0].setName("GPU");
      resources[0].setAmount(1);
      queued[0].setCount(count);
      params.setNumLeases(3);
    });
  }

  ActorId NewActor(const std::string& resource, double amount) {
    ActorId id = ActorId::Of(*RegisterJob());
    EXPECT_TRUE(RegisterActor(id, "", "", [&](proto::ActorInfo::Builder info) {
                  auto resources = info.initResources(1);
                  resources[0].setName(resource);
                  resources[0].setAmount(amount);
                }).ok());
    return id;
  }

  Result<capnp::Response<proto::Head::PlaceActorResults>> Place(const ActorId& id) {
    auto request = head().placeActorRequest();
    request.setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
    return Send(kj::mv(request));
  }
};

TEST_F(HeadDemandTest, WaitDemandAnswersTheNextChangeOfTheNodesQueues) {
  NodeId node = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(node).ok());
  auto first = Demand(0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  uint64_t version = first->getDemand().getVersion();
  EXPECT_GT(version, 0u);
  EXPECT_EQ(first->getDemand().getQueued().size(), 0u);

  // Asked before the change, answered by it.
  auto request = head().waitDemandRequest();
  request.setSinceVersion(version);
  auto waiting = request.send();
  ASSERT_TRUE(*Heartbeat(node));  // no queue: no change
  ASSERT_TRUE(*HeartbeatQueued(node, 2));
  auto changed = waiting.wait(client_->getWaitScope());
  EXPECT_GT(changed.getDemand().getVersion(), version);
  ASSERT_EQ(changed.getDemand().getQueued().size(), 1u);
  auto shape = changed.getDemand().getQueued()[0];
  EXPECT_EQ(shape.getCount(), 2u);
  EXPECT_EQ(std::string(shape.getResources()[0].getName().cStr()), "GPU");

  auto view = View();
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->getNodes()[0].getQueued().size(), 1u);
  EXPECT_EQ(view->getNodes()[0].getNumLeases(), 3u);

  // The queue drains: the demand changes again.
  uint64_t queued_version = changed.getDemand().getVersion();
  ASSERT_TRUE(*HeartbeatQueued(node, 0));
  auto drained = Demand(queued_version);
  ASSERT_TRUE(drained.ok());
  EXPECT_EQ(drained->getDemand().getQueued().size(), 0u);
}

TEST_F(HeadDemandTest, PendingActorsGroupsAndRequestsAreDemand) {
  NodeId node = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(node).ok());
  ActorId actor = NewActor("GPU", 1);
  auto placed = Place(actor);
  ASSERT_TRUE(placed.ok() && placed->getPlacement().isWaiting());

  Result<JobId> job = RegisterJob();
  ASSERT_TRUE(job.ok());
  auto create = head().createPlacementGroupRequest();
  auto info = create.initInfo();
  info.setJobId(capnp::Data::Reader(job->data(), JobId::kSize));
  info.setStrategy(proto::PlacementStrategy::STRICT_SPREAD);
  auto bundles = info.initBundles(4);
  for (uint32_t i = 0; i < 4; ++i) {
    auto resources = bundles[i].initResources(1);
    resources[0].setName("CPU");
    resources[0].setAmount(1);
  }
  ASSERT_TRUE(Send(kj::mv(create)).ok());

  auto request = head().requestResourcesRequest();
  auto asked = request.initBundles(2);
  for (uint32_t i = 0; i < 2; ++i) {
    auto resources = asked[i].initResources(1);
    resources[0].setName("GPU");
    resources[0].setAmount(1);
  }
  auto selector = request.initLabelSelectors(1)[0].initLabels(1);
  selector[0].setKey("accelerator_type");
  selector[0].setValue("H100");
  ASSERT_TRUE(Send(kj::mv(request)).ok());

  auto demand = Demand(0);
  ASSERT_TRUE(demand.ok());
  auto d = demand->getDemand();
  ASSERT_EQ(d.getPendingActors().size(), 1u);
  EXPECT_EQ(std::string(d.getPendingActors()[0].getResources()[0].getName().cStr()), "GPU");
  ASSERT_EQ(d.getPendingGroups().size(), 1u);
  EXPECT_EQ(d.getPendingGroups()[0].getStrategy(), proto::PlacementStrategy::STRICT_SPREAD);
  EXPECT_EQ(d.getPendingGroups()[0].getBundles().size(), 4u);
  EXPECT_EQ(d.getRequested().size(), 2u);
  ASSERT_EQ(d.getRequestedSelectors().size(), 1u);
  EXPECT_EQ(std::string(d.getRequestedSelectors()[0].getLabels()[0].getValue().cStr()), "H100");

  // The next request replaces it; an empty one clears it.
  ASSERT_TRUE(Send(head().requestResourcesRequest()).ok());
  auto cleared = Demand(d.getVersion());
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->getDemand().getRequested().size(), 0u);
}

TEST_F(HeadDemandTest, RequestResourcesRejectsABadBundle) {
  auto request = head().requestResourcesRequest();
  auto resources = request.initBundles(1)[0].initResources(1);
  resources[0].setName("CPU");
  resources[0].setAmount(-1);
  Status s = Send(kj::mv(request)).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("bundles[0].resources"), std::string::npos) << s.message();

  auto more = head().requestResourcesRequest();
  more.initLabelSelectors(1);
  s = Send(kj::mv(more)).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("labelSelectors"), std::string::npos) << s.message();
}

TEST_F(HeadDemandTest, RestartedHeadKeepsTheStandingRequestUntilItIsCleared) {
  auto request = head().requestResourcesRequest();
  auto resources = request.initBundles(1)[0].initResources(1);
  resources[0].setName("GPU");
  resources[0].setAmount(4);
  auto selector = request.initLabelSelectors(1)[0].initLabels(1);
  selector[0].setKey("zone");
  selector[0].setValue("in(us-east-1a,us-east-1b)");
  ASSERT_TRUE(Send(kj::mv(request)).ok());

  StopHead();
  StartHead();
  auto demand = Demand(0);
  ASSERT_TRUE(demand.ok()) << demand.status().ToString();
  auto d = demand->getDemand();
  ASSERT_EQ(d.getRequested().size(), 1u);
  EXPECT_EQ(std::string(d.getRequested()[0].getResources()[0].getName().cStr()), "GPU");
  EXPECT_EQ(d.getRequested()[0].getResources()[0].getAmount(), 4);
  ASSERT_EQ(d.getRequestedSelectors().size(), 1u);
  ASSERT_EQ(d.getRequestedSelectors()[0].getLabels().size(), 1u);
  EXPECT_EQ(std::string(d.getRequestedSelectors()[0].getLabels()[0].getValue().cStr()),
            "in(us-east-1a,us-east-1b)");

  ASSERT_TRUE(Send(head().requestResourcesRequest()).ok());
  StopHead();
  StartHead();
  auto cleared = Demand(0);
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->getDemand().getRequested().size(), 0u) << "clearing it is kept too";
}

TEST_F(HeadDemandTest, RequestResourcesRejectsAMalformedLabelSelector) {
  auto request = head().requestResourcesRequest();
  auto resources = request.initBundles(1)[0].initResources(1);
  resources[0].setName("CPU");
  resources[0].setAmount(1);
  auto selector = request.initLabelSelectors(1)[0].initLabels(1);
  selector[0].setKey("zone");
  selector[0].setValue("in(a,b");
  Status s = Send(kj::mv(request)).status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("labelSelectors[0]"), std::string::npos) << s.message();
}

TEST_F(HeadDemandTest, AnActorOnlyANodeTypeHoldsWaitsInsteadOfBeingInfeasible) {
  NodeId node = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(node).ok());
  ASSERT_TRUE(KvPut("autoscaler", "node_types", "gpu_node\tCPU=1,GPU=1\taccelerator_type=H100\n")
                  .ok());
  ActorId gpu = NewActor("GPU", 1), tpu = NewActor("TPU", 1);
  ASSERT_TRUE(Place(gpu).ok());
  ASSERT_TRUE(Place(tpu).ok());
  for (int64_t passed = 0; passed < 11000; passed += kHeartbeatMs) {
    clock_.AdvanceMs(kHeartbeatMs);
    ASSERT_TRUE(*Heartbeat(node));
  }
  auto waits = Place(gpu);
  ASSERT_TRUE(waits.ok() && waits->getPlacement().isWaiting());
  EXPECT_NE(std::string(waits->getPlacement().getWaiting().cStr()).find("node type gpu_node"),
            std::string::npos);
  auto never = Place(tpu);
  ASSERT_TRUE(never.ok() && never->getPlacement().isInfeasible());

  auto view = View();
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->getNodeTypes().size(), 1u);
  EXPECT_EQ(std::string(view->getNodeTypes()[0].getAddress().cStr()), "gpu_node");
  EXPECT_EQ(view->getNodeTypes()[0].getTotal().size(), 2u);
}

// Nodes that cannot be reached: the groups below never get as far as reserving.
class UnreachableNodes final : public internal::NodeConnector {
 public:
  proto::Node::Client Connect(const std::string&) override {
    return proto::Node::Client(KJ_EXCEPTION(DISCONNECTED, "no node in this test"));
  }
  void Forget(const std::string&) override {}
  kj::Promise<void> WhenGone(const std::string&) override { return kj::READY_NOW; }
};

class HeadGroupDemandTest : public HeadDemandTest {
 protected:
  void SetUp() override {
    connector_ = &nodes_;
    HeadDemandTest::SetUp();
  }

  PlacementGroupId CreateGroup(double cpus) {
    Result<JobId> job = RegisterJob();
    EXPECT_TRUE(job.ok());
    auto create = head().createPlacementGroupRequest();
    auto info = create.initInfo();
    info.setJobId(capnp::Data::Reader(job->data(), JobId::kSize));
    info.setStrategy(proto::PlacementStrategy::PACK);
    auto resources = info.initBundles(1)[0].initResources(1);
    resources[0].setName("CPU");
    resources[0].setAmount(cpus);
    auto created = Send(kj::mv(create));
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return *PlacementGroupId::FromBinary(
        std::string(reinterpret_cast<const char*>(created->getGroupId().begin()),
                    created->getGroupId().size()));
  }

  std::optional<bool> Infeasible(const PlacementGroupId& id) {
    auto listed = Send(head().listPlacementGroupsRequest());
    if (!listed.ok()) return std::nullopt;
    for (auto group : listed->getGroups()) {
      if (group.getGroupId() == capnp::Data::Reader(id.data(), PlacementGroupId::kSize)) {
        return group.getInfeasible();
      }
    }
    return std::nullopt;
  }

  UnreachableNodes nodes_;
};

TEST_F(HeadGroupDemandTest, AGroupOnlyANodeTypeHoldsIsNotInfeasibleButOneNoTypeHoldsIs) {
  NodeId node = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(node).ok());  // 8 CPUs
  PlacementGroupId big = CreateGroup(16), huge = CreateGroup(64);
  ASSERT_TRUE(*Heartbeat(node));
  EXPECT_EQ(Infeasible(big), std::optional<bool>(true)) << "no node types yet";
  EXPECT_EQ(Infeasible(huge), std::optional<bool>(true));

  ASSERT_TRUE(KvPut("autoscaler", "node_types", "big_node\tCPU=32\t\n").ok());
  ASSERT_TRUE(*Heartbeat(node));  // the pending groups are tried again
  EXPECT_EQ(Infeasible(big), std::optional<bool>(false)) << "the autoscaler can add a big_node";
  EXPECT_EQ(Infeasible(huge), std::optional<bool>(true)) << "no node type holds 64 CPUs";
}

// Long polls end with their caller: a waitDemand or waitPlacementGroup whose call is dropped (the
// autoscaler's or pg.wait's timeout) leaves no waiter in the head.
TEST_F(HeadDemandTest, ADroppedWaitDemandLeavesNoWaiterBehind) {
  ASSERT_TRUE(RegisterNode(NodeId::FromRandom()).ok());
  auto first = Demand(0);
  ASSERT_TRUE(first.ok());
  {
    auto request = head().waitDemandRequest();
    request.setSinceVersion(first->getDemand().getVersion());
    auto pending = request.send();
    ASSERT_TRUE(PumpUntil([&] { return head_->Waiters().demand == 1; }));
  }
  EXPECT_TRUE(PumpUntil([&] { return head_->Waiters().demand == 0; }));
}

TEST_F(HeadDemandTest, ADroppedWaitPlacementGroupLeavesNoWaiterBehind) {
  Result<JobId> job = RegisterJob();
  ASSERT_TRUE(job.ok());
  auto create = head().createPlacementGroupRequest();
  auto info = create.initInfo();
  info.setJobId(capnp::Data::Reader(job->data(), JobId::kSize));
  auto resources = info.initBundles(1)[0].initResources(1);
  resources[0].setName("CPU");
  resources[0].setAmount(1);
  auto created = Send(kj::mv(create));  // no node: it stays PENDING
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  {
    auto request = head().waitPlacementGroupRequest();
    request.setGroupId(created->getGroupId());
    auto pending = request.send();
    ASSERT_TRUE(PumpUntil([&] { return head_->Waiters().placement_groups == 1; }));
  }
  EXPECT_TRUE(PumpUntil([&] { return head_->Waiters().placement_groups == 0; }));
}

}  // namespace
}  // namespace airt::head::testing
