// The head's actor placement under scheduling strategies (head/internal/actor_placement.h step 0
// and the label filters): node affinity hard and soft, SPREAD by actor count, label selectors and
// NodeLabel's soft preference.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "common/scheduling_strategy.h"
#include "head/internal/actor_placement.h"

namespace airt::head::internal {
namespace {

PlacementNode Node(const std::vector<Resource>& total, std::vector<Label> labels = {}) {
  PlacementNode node;
  node.id = NodeId::FromRandom();
  node.alive = true;
  node.total = total;
  node.available = total;
  node.labels = std::move(labels);
  return node;
}

ActorDemand Wants(const std::vector<Resource>& resources, sched::SchedulingStrategy strategy) {
  ActorDemand demand;
  demand.resources = resources;
  demand.strategy = std::move(strategy);
  return demand;
}

sched::SchedulingStrategy Affinity(const NodeId& node, bool soft, bool spill = false) {
  sched::SchedulingStrategy s;
  s.kind = sched::StrategyKind::kNodeAffinity;
  s.node = node;
  s.soft = soft;
  s.spill_on_unavailable = spill;
  return s;
}

std::optional<NodeId> Placed(const PlacementDecision& decision) {
  if (const auto* on = std::get_if<PlaceOn>(&decision)) return on->node;
  return std::nullopt;
}

TEST(ActorStrategy, HardAffinityPlacesOnItsNodeEvenWhenAnotherIsEmptier) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 8}}), Node({{"CPU", 1}})};
  nodes[1].available = {};  // busy
  EXPECT_EQ(Placed(DecidePlacement(Wants({{"CPU", 1}}, Affinity(nodes[1].id, false)), nodes, {},
                                   true)),
            nodes[1].id);
}

TEST(ActorStrategy, HardAffinityToADeadNodeCannotBePlacedAndNamesIt) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 8}}), Node({{"CPU", 8}})};
  nodes[1].alive = false;
  PlacementDecision d =
      DecidePlacement(Wants({{"CPU", 1}}, Affinity(nodes[1].id, false)), nodes, {}, false);
  const auto* cannot = std::get_if<CannotPlace>(&d);
  ASSERT_NE(cannot, nullptr);
  EXPECT_NE(cannot->message.find(nodes[1].id.Hex()), std::string::npos) << cannot->message;
  EXPECT_NE(cannot->message.find("dead"), std::string::npos) << cannot->message;
}

TEST(ActorStrategy, HardAffinityToAnUnknownNodeWaitsThenCannotBePlaced) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 8}})};
  NodeId unknown = NodeId::FromRandom();
  ActorDemand demand = Wants({}, Affinity(unknown, false));
  EXPECT_TRUE(std::holds_alternative<WaitForNodes>(DecidePlacement(demand, nodes, {}, false)));
  EXPECT_TRUE(std::holds_alternative<CannotPlace>(DecidePlacement(demand, nodes, {}, true)));
}

TEST(ActorStrategy, SoftAffinityFallsBackWhenItsNodeIsDeadOrBusyWithSpill) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 8}}), Node({{"CPU", 8}})};
  nodes[1].alive = false;
  EXPECT_EQ(Placed(DecidePlacement(Wants({{"CPU", 1}}, Affinity(nodes[1].id, true)), nodes, {},
                                   true)),
            nodes[0].id);
  nodes[1].alive = true;
  nodes[1].available = {};
  EXPECT_EQ(Placed(DecidePlacement(Wants({{"CPU", 1}}, Affinity(nodes[1].id, true)), nodes, {},
                                   true)),
            nodes[1].id);
  EXPECT_EQ(Placed(DecidePlacement(Wants({{"CPU", 1}}, Affinity(nodes[1].id, true, true)), nodes,
                                   {}, true)),
            nodes[0].id);
}

TEST(ActorStrategy, SpreadPutsActorsThatAskForNothingOnEveryNode) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 8}}), Node({{"CPU", 8}}), Node({{"CPU", 8}})};
  sched::SchedulingStrategy spread;
  spread.kind = sched::StrategyKind::kSpread;
  std::map<NodeId, int> landed;
  for (int i = 0; i < 3; ++i) {
    std::optional<NodeId> node = Placed(DecidePlacement(Wants({}, spread), nodes, {}, true));
    ASSERT_TRUE(node);
    for (PlacementNode& n : nodes) n.actors += n.id == *node ? 1 : 0;
    ++landed[*node];
  }
  EXPECT_EQ(landed.size(), 3u);
}

TEST(ActorStrategy, LabelSelectorPicksExcludesAndNamesLabelsWhenNoneMatch) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 8}}, {{"zone", "a"}}),
                                      Node({{"CPU", 8}}, {{"zone", "b"}})};
  sched::SchedulingStrategy s;
  s.label_selector = *sched::ParseLabelSelector({{"zone", "!a"}});
  EXPECT_EQ(Placed(DecidePlacement(Wants({{"CPU", 1}}, s), nodes, {}, true)), nodes[1].id);
  s.label_selector = *sched::ParseLabelSelector({{"zone", "in(c,d)"}});
  PlacementDecision d = DecidePlacement(Wants({{"CPU", 1}}, s), nodes, {}, true);
  const auto* cannot = std::get_if<CannotPlace>(&d);
  ASSERT_NE(cannot, nullptr);
  EXPECT_NE(cannot->message.find("label_selector {zone in (c, d)}"), std::string::npos)
      << cannot->message;
  EXPECT_NE(cannot->message.find("(labels zone=b)"), std::string::npos) << cannot->message;
}

TEST(ActorStrategy, NodeLabelSoftPrefersMatchingNodes) {
  std::vector<PlacementNode> nodes = {Node({{"CPU", 8}}), Node({{"CPU", 2}}, {{"disk", "ssd"}})};
  nodes[1].available = {{"CPU", 1}};  // busier, but preferred
  sched::SchedulingStrategy s;
  s.kind = sched::StrategyKind::kNodeLabel;
  s.soft_labels = {{"disk", sched::LabelOperator::kIn, {"ssd"}}};
  EXPECT_EQ(Placed(DecidePlacement(Wants({{"CPU", 1}}, s), nodes, {}, true)), nodes[1].id);
}

}  // namespace
}  // namespace airt::head::internal
