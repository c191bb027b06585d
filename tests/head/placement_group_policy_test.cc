// Where a placement group's bundles go (head/internal/placement_group_policy.h), over hand-made
// views of several nodes: each of Ray's strategies, waiting, and the never-fitting report.
#include "head/internal/placement_group_policy.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace airt::head::internal {
namespace {

BundleNode Node(double cpus, double free_cpus, std::string zone = "") {
  BundleNode node{NodeId::FromRandom(), ToBundleUnits({{"CPU", cpus}}),
                  ToBundleUnits({{"CPU", free_cpus}}), {}};
  if (!zone.empty()) node.labels["zone"] = zone;
  return node;
}

sched::LabelSelector Zone(const std::string& value) {
  return *sched::ParseLabelSelector({{"zone", value}});
}

std::vector<std::vector<Resource>> Bundles(int n, double cpus) {
  return std::vector<std::vector<Resource>>(n, std::vector<Resource>{{"CPU", cpus}});
}

std::vector<NodeId> On(const BundleDecision& decision) {
  const auto* on = std::get_if<BundlesOn>(&decision);
  EXPECT_NE(on, nullptr) << std::get<BundlesWait>(decision).reason;
  return on == nullptr ? std::vector<NodeId>() : on->nodes;
}

// The wait, or a test failure and a default one.
BundlesWait Waits(const BundleDecision& decision) {
  const auto* wait = std::get_if<BundlesWait>(&decision);
  EXPECT_NE(wait, nullptr) << "placed";
  return wait == nullptr ? BundlesWait{"placed", false} : *wait;
}

size_t Distinct(const std::vector<NodeId>& nodes) {
  return std::set<NodeId>(nodes.begin(), nodes.end()).size();
}

TEST(PlacementGroupPolicy, StrictPackPutsEveryBundleOnTheNodeLeftFullest) {
  std::vector<BundleNode> nodes = {Node(8, 8), Node(8, 3), Node(8, 1)};
  std::vector<NodeId> on = On(DecideBundles(PlacementStrategy::kStrictPack, Bundles(2, 1), nodes));
  EXPECT_EQ(on, (std::vector<NodeId>{nodes[1].id, nodes[1].id}));
  std::vector<BundleNode> busy = {Node(8, 5), Node(8, 3)};
  BundlesWait wait = Waits(DecideBundles(PlacementStrategy::kStrictPack, Bundles(3, 2), busy));
  EXPECT_FALSE(wait.infeasible) << "either node holds 6 CPUs once free";
}

TEST(PlacementGroupPolicy, PackSplitsOnlyWhenNoNodeHoldsAll) {
  std::vector<BundleNode> nodes = {Node(2, 2), Node(2, 2)};
  EXPECT_EQ(Distinct(On(DecideBundles(PlacementStrategy::kPack, Bundles(2, 1), nodes))), 1u);
  EXPECT_EQ(Distinct(On(DecideBundles(PlacementStrategy::kPack, Bundles(4, 1), nodes))), 2u);
}

TEST(PlacementGroupPolicy, StrictSpreadFindsAMatchingWhereGreedyWouldFail) {
  // Bundle 0 fits either node, bundle 1 only node 0: the matching moves bundle 0 to node 1.
  std::vector<BundleNode> nodes = {Node(4, 4), Node(4, 1)};
  std::vector<std::vector<Resource>> bundles = {{{"CPU", 1}}, {{"CPU", 3}}};
  std::vector<NodeId> on = On(DecideBundles(PlacementStrategy::kStrictSpread, bundles, nodes));
  EXPECT_EQ(on, (std::vector<NodeId>{nodes[1].id, nodes[0].id}));
  BundlesWait wait = Waits(DecideBundles(PlacementStrategy::kStrictSpread, Bundles(3, 1), nodes));
  EXPECT_FALSE(wait.infeasible) << "a third node may join";
}

TEST(PlacementGroupPolicy, SpreadUsesAsManyNodesAsItCanThenDoublesUp) {
  std::vector<BundleNode> nodes = {Node(4, 4), Node(4, 4), Node(4, 4)};
  EXPECT_EQ(Distinct(On(DecideBundles(PlacementStrategy::kSpread, Bundles(3, 1), nodes))), 3u);
  EXPECT_EQ(Distinct(On(DecideBundles(PlacementStrategy::kSpread, Bundles(5, 1), nodes))), 3u);
}

TEST(PlacementGroupPolicy, ABundleBiggerThanEveryNodeIsReportedInfeasible) {
  std::vector<BundleNode> nodes = {Node(2, 2), Node(4, 0)};
  std::vector<std::vector<Resource>> bundles = {{{"CPU", 1}}, {{"CPU", 8}}};
  for (PlacementStrategy s : {PlacementStrategy::kPack, PlacementStrategy::kSpread,
                              PlacementStrategy::kStrictPack, PlacementStrategy::kStrictSpread}) {
    BundlesWait wait = Waits(DecideBundles(s, bundles, nodes));
    EXPECT_TRUE(wait.infeasible) << StrategyName(s);
    std::string named = s == PlacementStrategy::kStrictPack ? "{CPU: 9}" : "{CPU: 8}";
    EXPECT_NE(wait.reason.find(named), std::string::npos) << wait.reason;
  }
  // Busy now, but it fits node 1 once that node's CPUs are free: it waits.
  EXPECT_FALSE(Waits(DecideBundles(PlacementStrategy::kPack, Bundles(1, 3), nodes)).infeasible);
}

TEST(PlacementGroupPolicy, BundleLabelSelectorsKeepEachBundleOnMatchingNodes) {
  std::vector<BundleNode> nodes = {Node(4, 4, "a"), Node(4, 4, "b"), Node(4, 4, "c")};
  for (PlacementStrategy strategy : {PlacementStrategy::kPack, PlacementStrategy::kSpread,
                                     PlacementStrategy::kStrictSpread}) {
    std::vector<NodeId> on = On(DecideBundles(strategy, Bundles(2, 1), nodes,
                                              {Zone("b"), Zone("!in(a,b)")}));
    ASSERT_EQ(on.size(), 2u);
    EXPECT_EQ(on[0], nodes[1].id) << StrategyName(strategy);
    EXPECT_EQ(on[1], nodes[2].id) << StrategyName(strategy);
  }
  // STRICT_PACK: one node that every bundle's selector allows.
  std::vector<NodeId> packed =
      On(DecideBundles(PlacementStrategy::kStrictPack, Bundles(2, 1), nodes, {Zone("in(b,c)"), Zone("c")}));
  EXPECT_EQ(packed, (std::vector<NodeId>{nodes[2].id, nodes[2].id}));
}

TEST(PlacementGroupPolicy, ABundleNoNodesLabelsAllowIsInfeasibleNamingTheSelector) {
  std::vector<BundleNode> nodes = {Node(4, 4, "a"), Node(4, 4)};
  BundlesWait wait = Waits(DecideBundles(PlacementStrategy::kPack, Bundles(2, 1), nodes,
                                         {{}, Zone("mars")}));
  EXPECT_TRUE(wait.infeasible);
  EXPECT_NE(wait.reason.find("bundle 1 {CPU: 1} with bundle_label_selector {zone in (mars)}"),
            std::string::npos)
      << wait.reason;
  EXPECT_NE(wait.reason.find("(labels zone=a)"), std::string::npos) << wait.reason;
  EXPECT_NE(wait.reason.find("(labels none)"), std::string::npos) << wait.reason;
}

}  // namespace
}  // namespace airt::head::internal
