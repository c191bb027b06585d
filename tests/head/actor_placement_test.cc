// The head's actor placement policy (head/internal/actor_placement.h) over hand-made views of
// several nodes: which nodes are candidates, which of them wins, and when an actor waits or is
// infeasible.
#include "head/internal/actor_placement.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace airt::head::internal {
namespace {

// A node whose heartbeat shows its totals all free.
PlacementNode Node(const std::vector<Resource>& total, const std::string& accelerator = "") {
  PlacementNode node;
  node.id = NodeId::FromRandom();
  node.alive = true;
  node.total = total;
  node.available = total;
  if (!accelerator.empty()) node.labels.push_back({"ray.io/accelerator-type", accelerator});
  return node;
}

ActorDemand Wants(const std::vector<Resource>& resources, const std::string& accelerator = "") {
  return ActorDemand{resources, accelerator};
}

// The node chosen, or a test failure and a nil id.
NodeId Chosen(const PlacementDecision& decision) {
  const auto* on = std::get_if<PlaceOn>(&decision);
  EXPECT_NE(on, nullptr) << "not placed";
  return on == nullptr ? NodeId() : on->node;
}

// Places each demand in turn, recording it as the directory would (held by its node), and
// returns how many landed on each node.
std::map<NodeId, int> PlaceAll(std::vector<PlacementNode>& nodes,
                               const std::vector<ActorDemand>& demands) {
  std::map<NodeId, int> landed;
  for (const ActorDemand& demand : demands) {
    NodeId node = Chosen(DecidePlacement(demand, nodes, {}, true));
    for (PlacementNode& n : nodes) {
      if (n.id != node) continue;
      n.held.insert(n.held.end(), demand.resources.begin(), demand.resources.end());
      ++n.actors;
    }
    ++landed[node];
  }
  return landed;
}

TEST(ActorPlacement, SpreadsOneCpuActorsTwoAndTwoOverTwoNodesOfTwoCpus) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 2}}), Node({{"CPU", 2}})};
  ActorDemand cpu = Wants({{"CPU", 1}});
  std::map<NodeId, int> landed = PlaceAll(nodes, {cpu, cpu, cpu, cpu});
  EXPECT_EQ(landed[nodes[0].id], 2);
  EXPECT_EQ(landed[nodes[1].id], 2);
}

TEST(ActorPlacement, SpreadsActorsAskingForNothingByHowManyEachNodeHas) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 8}}), Node({{"CPU", 1}}), Node({{"CPU", 4}})};
  ActorDemand nothing = Wants({});
  std::map<NodeId, int> landed =
      PlaceAll(nodes, {nothing, nothing, nothing, nothing, nothing, nothing});
  for (const PlacementNode& node : nodes) EXPECT_EQ(landed[node.id], 2);
}

TEST(ActorPlacement, PrefersTheLeastUtilizedNodeAfterPlacing) {
  // Both fit; after placing, the big node is 1/8 used and the small one 1/2.
  std::vector<PlacementNode> nodes = {Node({{"CPU", 2}}), Node({{"CPU", 8}})};
  EXPECT_EQ(Chosen(DecidePlacement(Wants({{"CPU", 1}}), nodes, {}, true)), nodes[1].id);
}

TEST(ActorPlacement, ANodeWithTheResourceFreeNowBeatsAnIdleLookingButBusyOne) {
  // The first node's heartbeat shows its CPUs taken (by tasks); the second is smaller but free.
  std::vector<PlacementNode> nodes = {Node({{"CPU", 16}}), Node({{"CPU", 2}})};
  nodes[0].available = {{"CPU", 0}};
  EXPECT_EQ(Chosen(DecidePlacement(Wants({{"CPU", 1}}), nodes, {}, true)), nodes[1].id);
}

TEST(ActorPlacement, ActorsPlacedBeforeTheNextHeartbeatCountAsHeld) {
  // The heartbeat still shows both CPUs free, but an actor placed there holds 2 already.
  std::vector<PlacementNode> nodes = {Node({{"CPU", 2}}), Node({{"CPU", 1}})};
  nodes[0].held = {{"CPU", 2}};
  nodes[0].actors = 1;
  EXPECT_EQ(Chosen(DecidePlacement(Wants({{"CPU", 1}}), nodes, {}, true)), nodes[1].id);
}

TEST(ActorPlacement, WhenNoNodeHasItFreeTheLeastLoadedThatFitsStillGetsIt) {
  // Nothing is free anywhere; over its totals the second node is the less loaded (5/4 against
  // 3/2 once placed), and the third can never hold it. The actor's lease waits on the second.
  std::vector<PlacementNode> nodes = {Node({{"CPU", 2}}), Node({{"CPU", 4}}), Node({{"GPU", 8}})};
  for (PlacementNode& node : nodes) node.available = {};
  EXPECT_EQ(Chosen(DecidePlacement(Wants({{"CPU", 1}}), nodes, {}, true)), nodes[1].id);
}

TEST(ActorPlacement, OnlyTheNodeWithTheCustomResourceIsACandidate) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 8}}), Node({{"CPU", 1}, {"special", 1}})};
  EXPECT_EQ(Chosen(DecidePlacement(Wants({{"special", 1}}), nodes, {}, true)), nodes[1].id);
  // However busy it is.
  nodes[1].available = {{"CPU", 1}, {"special", 0}};
  EXPECT_EQ(Chosen(DecidePlacement(Wants({{"special", 1}}), nodes, {}, true)), nodes[1].id);
}

TEST(ActorPlacement, AnAcceleratorTypeOnlyMatchesNodesWithThatLabel) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 8}, {"GPU", 8}}, "A10"),
                                      Node({{"CPU", 8}, {"GPU", 1}}, "H100"),
                                      Node({{"CPU", 8}, {"GPU", 8}})};
  EXPECT_EQ(Chosen(DecidePlacement(Wants({{"GPU", 1}}, "H100"), nodes, {}, true)), nodes[1].id);
  EXPECT_EQ(Chosen(DecidePlacement(Wants({{"GPU", 0.5}}, "A10"), nodes, {}, true)), nodes[0].id);
}

TEST(ActorPlacement, DeadAndRefusingNodesAreLeftOut) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 8}}), Node({{"CPU", 8}}), Node({{"CPU", 1}})};
  nodes[0].alive = false;
  EXPECT_EQ(Chosen(DecidePlacement(Wants({{"CPU", 1}}), nodes, {nodes[1].id}, true)), nodes[2].id);
}

TEST(ActorPlacement, WaitsForNodesDuringTheGracePeriodThenIsInfeasible) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 2}}), Node({{"CPU", 4}}, "A10")};
  nodes.push_back(Node({{"CPU", 64}}));
  nodes.back().alive = false;  // a dead node's totals make nothing feasible
  ActorDemand big = Wants({{"CPU", 8}, {"special", 0.5}});
  PlacementDecision early = DecidePlacement(big, nodes, {}, /*grace_over=*/false);
  ASSERT_TRUE(std::holds_alternative<WaitForNodes>(early));
  EXPECT_NE(std::get<WaitForNodes>(early).reason.find("{CPU: 8, special: 0.5}"), std::string::npos);

  PlacementDecision late = DecidePlacement(big, nodes, {}, /*grace_over=*/true);
  ASSERT_TRUE(std::holds_alternative<CannotPlace>(late));
  const std::string& message = std::get<CannotPlace>(late).message;
  std::string first = nodes[0].id.Hex().substr(0, 8), second = nodes[1].id.Hex().substr(0, 8);
  EXPECT_EQ(message, "no node can ever run {CPU: 8, special: 0.5}: node " + first +
                         " has {CPU: 2}, node " + second + " has {CPU: 4} (accelerator_type A10)");
}

TEST(ActorPlacement, InfeasibleNamesTheNodesThatRefused) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 2}})};
  PlacementDecision decision = DecidePlacement(Wants({{"CPU", 1}}), nodes, {nodes[0].id}, true);
  ASSERT_TRUE(std::holds_alternative<CannotPlace>(decision));
  EXPECT_NE(std::get<CannotPlace>(decision).message.find("refused by node " +
                                                         nodes[0].id.Hex().substr(0, 8)),
            std::string::npos);
}

TEST(ActorPlacement, DescribeDemandOrdersLikeTheNodesScheduler) {
  EXPECT_EQ(
      DescribeDemand(Wants(
          {{"zeta", 1}, {"memory", 1024}, {"GPU", 0.25}, {"CPU", 0}, {"alpha", 0.0001}}, "A10")),
      "{GPU: 0.25, memory: 1024, alpha: 0.0001, zeta: 1, accelerator_type: A10}");
  EXPECT_EQ(DescribeDemand(Wants({})), "{}");
}

TEST(ActorPlacement, PlacementNodesSumWhatLiveActorsHoldButNotDeadOnesOrTheOnePlaced) {
  NodeView a, b;
  a.info.id = NodeId::FromRandom();
  a.info.total = {{"CPU", 4}};
  a.alive = true;
  b.info.id = NodeId::FromRandom();
  b.info.total = {{"CPU", 4}};
  b.alive = true;
  JobId job = JobId::FromRandom();
  auto actor = [&](const NodeId& node, double cpus, ActorState state) {
    ActorRecord r;
    r.id = ActorId::Of(job);
    r.job = job;
    r.state = state;
    r.resources = {{"CPU", cpus}};
    r.node = node;
    return r;
  };
  ActorRecord placing = actor(a.info.id, 1, ActorState::kRestarting);
  ActorRecord unplaced = actor(a.info.id, 1, ActorState::kPending);
  unplaced.node.reset();
  std::vector<ActorRecord> actors = {actor(a.info.id, 1, ActorState::kAlive),
                                     actor(a.info.id, 0.5, ActorState::kPending),
                                     actor(a.info.id, 2, ActorState::kDead),
                                     actor(b.info.id, 1, ActorState::kRestarting),
                                     placing,
                                     unplaced};
  std::vector<PlacementNode> nodes = PlacementNodes({a, b}, actors, placing.id);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].actors, 2u);
  double held = 0;
  for (const Resource& r : nodes[0].held) held += r.amount;
  EXPECT_EQ(held, 1.5);
  EXPECT_EQ(nodes[1].actors, 1u);
}

}  // namespace
}  // namespace airt::head::internal
