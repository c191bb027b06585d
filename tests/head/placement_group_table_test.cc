// The head's placement-group table (head/internal/placement_group_table.h) over an in-memory
// MetadataStore: what it keeps per node as groups change (the bundle resources and reserved units
// of the CREATED and RESCHEDULING groups) equals a recount over List() after every change, and
// after a restarted head's Load.
#include "head/internal/placement_group_table.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/bundle_resources.h"
#include "head/internal/placement_group_policy.h"
#include "head/internal/job_table.h"
#include "tests/head/head_doubles.h"

namespace airt::head::internal {
namespace {

using ResourceSums = std::map<NodeId, std::map<std::string, double>>;
using UnitSums = std::map<NodeId, BundleUnits>;

// What the placed bundles of every CREATED or RESCHEDULING group of `groups` hold on their nodes,
// counted afresh.
void Recount(const std::vector<PlacementGroupRecord>& groups, ResourceSums& resources,
             UnitSums& units) {
  for (const PlacementGroupRecord& group : groups) {
    if (group.state != GroupState::kCreated && group.state != GroupState::kRescheduling) continue;
    for (size_t i = 0; i < group.bundle_nodes.size(); ++i) {
      const NodeId& node = group.bundle_nodes[i];
      if (node.IsNil()) continue;
      std::map<std::string, double> amounts;
      for (const Resource& r : group.bundles[i]) amounts[r.name] += r.amount;
      for (const auto& [name, amount] :
           CommittedBundleResources(group.id.Hex(), static_cast<int64_t>(i), amounts)) {
        resources[node][name] += amount;
      }
      for (const auto& [name, n] : ToBundleUnits(group.bundles[i])) units[node][name] += n;
    }
  }
}

// The table's sums equal the recount: the same nodes and names, the same amounts.
void ExpectSumsMatchRecount(const PlacementGroupTable& table, const std::string& after) {
  SCOPED_TRACE("after " + after);
  ResourceSums resources;
  UnitSums units;
  Recount(table.List(), resources, units);
  const auto& kept = table.bundle_resources();
  ASSERT_EQ(kept.size(), resources.size()) << "nodes with bundle resources";
  for (const auto& [node, names] : resources) {
    auto it = kept.find(node);
    ASSERT_NE(it, kept.end()) << "node " << node.Hex();
    ASSERT_EQ(it->second.size(), names.size()) << "names on node " << node.Hex();
    for (const auto& [name, amount] : names) {
      auto found = it->second.find(name);
      ASSERT_NE(found, it->second.end()) << name;
      EXPECT_NEAR(found->second, amount, 1e-9) << name;
    }
  }
  const auto& reserved = table.reserved_units();
  ASSERT_EQ(reserved.size(), units.size()) << "nodes with reserved units";
  for (const auto& [node, names] : units) {
    auto it = reserved.find(node);
    ASSERT_NE(it, reserved.end()) << "node " << node.Hex();
    EXPECT_EQ(it->second, names) << "units on node " << node.Hex();
  }
}

PlacementGroupRecord Group(std::vector<std::vector<Resource>> bundles) {
  PlacementGroupRecord group;
  group.job = JobIdOf(1);
  group.strategy = PlacementStrategy::kPack;
  group.bundles = std::move(bundles);
  return group;
}

class PlacementGroupTableTest : public ::testing::Test {
 protected:
  PlacementGroupId Create(std::vector<std::vector<Resource>> bundles) {
    Result<PlacementGroupId> id = commit_(table_.Create(Group(std::move(bundles))));
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : PlacementGroupId::Nil();
  }
  GroupState StateOf(const PlacementGroupId& id) const { return table_.Get(id)->state; }

  InMemoryMetadataStore store_;
  testing::Committer commit_{store_};
  PlacementGroupTable table_{store_};
  NodeId n1_ = NodeId::FromRandom(), n2_ = NodeId::FromRandom(), n3_ = NodeId::FromRandom();
};

TEST_F(PlacementGroupTableTest, PerNodeSumsFollowEveryChangeAndALoad) {
  PlacementGroupId a = Create({{{"CPU", 0.1}, {"custom", 0.001}}, {{"CPU", 0.2}}});
  PlacementGroupId b = Create({{{"GPU", 1}}});
  PlacementGroupId c = Create({{{"CPU", 0.3}}, {{"CPU", 0.7}, {"memory", 1024}}, {{"CPU", 1}}});
  ExpectSumsMatchRecount(table_, "creating three groups");
  EXPECT_TRUE(table_.bundle_resources().empty()) << "no group holds anything yet";

  // Both bundles of a on one node: their wildcard names add up there.
  ASSERT_TRUE(commit_(table_.MarkPlaced(a, {{0, n1_}, {1, n1_}})).ok());
  EXPECT_EQ(StateOf(a), GroupState::kCreated);
  ExpectSumsMatchRecount(table_, "a CREATED");
  EXPECT_FALSE(table_.bundle_resources().empty());

  ASSERT_TRUE(commit_(table_.MarkPlaced(c, {{0, n1_}, {1, n2_}})).ok());
  EXPECT_EQ(StateOf(c), GroupState::kRescheduling) << "one bundle still without a node";
  ExpectSumsMatchRecount(table_, "c two of three bundles placed");
  ASSERT_TRUE(commit_(table_.MarkPlaced(c, {{2, n2_}})).ok());
  EXPECT_EQ(StateOf(c), GroupState::kCreated);
  ExpectSumsMatchRecount(table_, "c CREATED");

  // n2 dies: c's bundles there lose their node, then one comes back on n3 and one on n1.
  ASSERT_TRUE(commit_(table_.MarkLost(
                          c, [&](size_t, const NodeId& node) { return node == n2_; },
                          "its node died"))
                  .ok());
  EXPECT_EQ(StateOf(c), GroupState::kRescheduling);
  ExpectSumsMatchRecount(table_, "c RESCHEDULING");
  EXPECT_EQ(table_.bundle_resources().count(n2_), 0u) << "nothing is held on n2 any more";
  ASSERT_TRUE(commit_(table_.MarkPlaced(c, {{1, n3_}})).ok());
  ExpectSumsMatchRecount(table_, "c bundle 1 moved to n3");
  ASSERT_TRUE(commit_(table_.MarkPlaced(c, {{2, n1_}})).ok());
  EXPECT_EQ(StateOf(c), GroupState::kCreated);
  ExpectSumsMatchRecount(table_, "c bundle 2 moved to n1");

  ASSERT_TRUE(commit_(table_.MarkPlaced(b, {{0, n3_}})).ok());
  ExpectSumsMatchRecount(table_, "b CREATED");
  ASSERT_TRUE(commit_(table_.MarkRemoved(a)).ok());
  ExpectSumsMatchRecount(table_, "a REMOVED");
  PlacementGroupId pending = Create({{{"CPU", 64}}});
  ASSERT_TRUE(commit_(table_.MarkRemoved(pending)).ok());
  ExpectSumsMatchRecount(table_, "a PENDING group REMOVED");

  // A restarted head reads the rows back: the same sums, from its Load alone.
  PlacementGroupTable restarted(store_);
  ASSERT_TRUE(restarted.Load().ok());
  ExpectSumsMatchRecount(restarted, "Load");
  EXPECT_EQ(restarted.bundle_resources().size(), table_.bundle_resources().size());
  EXPECT_EQ(restarted.reserved_units(), table_.reserved_units());
  ASSERT_TRUE(commit_(restarted.MarkLost(
                          c, [&](size_t, const NodeId& node) { return node == n1_; },
                          "not held there"))
                  .ok());
  ExpectSumsMatchRecount(restarted, "c RESCHEDULING after the Load");

  ASSERT_TRUE(commit_(table_.MarkRemoved(b)).ok());
  ASSERT_TRUE(commit_(table_.MarkRemoved(c)).ok());
  ExpectSumsMatchRecount(table_, "every group REMOVED");
  EXPECT_TRUE(table_.bundle_resources().empty()) << "rounding leaves no name behind";
  EXPECT_TRUE(table_.reserved_units().empty());
}

}  // namespace
}  // namespace airt::head::internal
