// The autoscaler's decisions over hand-made clusters: bin-packing onto node types, the limits,
// min_workers, whole placement groups, request_resources, infeasible shapes, idle scale-down.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autoscaler/planner.h"

namespace airt::autoscaler {
namespace {

using ::testing::HasSubstr;

ClusterConfig Config(uint32_t max_workers = 10) {
  ClusterConfig config;
  config.cluster_name = "test";
  config.max_workers = max_workers;
  config.idle_timeout_minutes = 0.5;  // 30 s
  config.provider.type = "local";
  config.node_types["cpu_node"] = {"cpu_node", {{"CPU", 2}}, {}, 0, 4, {}};
  config.node_types["gpu_node"] = {"gpu_node", {{"CPU", 4}, {"GPU", 1}}, {{"accelerator_type", "H100"}},
                                   0, 2, {}};
  config.head_node_type = "cpu_node";
  return config;
}

// The node `airt up` started beside the head: not the autoscaler's, never stopped.
NodeNow HeadNode(Resources free = {{"CPU", 0}}) {
  NodeNow node;
  node.id = "head";
  node.total = {{"CPU", 2}};
  node.available = free;
  node.head_node = true;
  return node;
}

NodeNow Worker(std::string id, std::string type, Resources total, int64_t idle_ms = 0) {
  NodeNow node;
  node.id = std::move(id);
  node.type = std::move(type);
  node.total = total;
  node.available = total;
  node.idle_ms = idle_ms;
  return node;
}

uint32_t Launched(const Plan& plan, const std::string& type) {
  uint32_t n = 0;
  for (const Launch& launch : plan.launches) n += launch.type == type ? launch.count : 0;
  return n;
}

TEST(Planner, LaunchesTheGpuTypeForAGpuTaskOnACpuOnlyCluster) {
  Demand demand;
  demand.shapes.push_back({{{"GPU", 1}}, {}, 1, "tasks"});
  Plan plan = Decide(Config(), {HeadNode()}, demand);
  EXPECT_EQ(Launched(plan, "gpu_node"), 1u);
  EXPECT_EQ(Launched(plan, "cpu_node"), 0u);
  ASSERT_EQ(plan.launches.size(), 1u);
  EXPECT_THAT(plan.launches[0].reason, HasSubstr("{GPU: 1} (tasks)"));
  EXPECT_TRUE(plan.infeasible.empty());
}

TEST(Planner, PicksTheTypeWastingLeastForACpuTask) {
  Demand demand;
  demand.shapes.push_back({{{"CPU", 1}}, {}, 3, "tasks"});
  Plan plan = Decide(Config(), {HeadNode()}, demand);
  EXPECT_EQ(Launched(plan, "cpu_node"), 2u);  // two per node: three need two nodes
  EXPECT_EQ(Launched(plan, "gpu_node"), 0u);
}

TEST(Planner, PacksOntoFreeResourcesAndLaunchingNodesFirst) {
  Demand demand;
  demand.shapes.push_back({{{"CPU", 1}}, {}, 3, "tasks"});
  NodeNow launching = Worker("cpu_node-1", "cpu_node", {{"CPU", 2}});
  launching.launching = true;
  Plan plan = Decide(Config(), {HeadNode({{"CPU", 1}}), launching}, demand);
  EXPECT_TRUE(plan.launches.empty());  // one on the head's node, two on the one launching
}

TEST(Planner, NeverExceedsATypesMaxWorkers) {
  Demand demand;
  demand.shapes.push_back({{{"GPU", 1}}, {}, 5, "tasks"});
  Plan plan = Decide(Config(), {HeadNode()}, demand);
  EXPECT_EQ(Launched(plan, "gpu_node"), 2u);
  ASSERT_EQ(plan.held_by_limits.size(), 1u);
  EXPECT_THAT(plan.held_by_limits[0], HasSubstr("max_workers"));
}

TEST(Planner, NeverExceedsTheClustersMaxWorkersCountingRunningNodes) {
  Demand demand;
  demand.shapes.push_back({{{"CPU", 2}}, {}, 10, "tasks"});
  NodeNow busy = Worker("n1", "cpu_node", {{"CPU", 2}});
  busy.available = {{"CPU", 0}};
  Plan plan = Decide(Config(/*max_workers=*/3), {HeadNode(), busy}, demand);
  EXPECT_EQ(Launched(plan, "cpu_node"), 2u);  // 1 running + 2 = the cluster's 3
  EXPECT_FALSE(plan.held_by_limits.empty());
}

TEST(Planner, KeepsMinWorkersOfEachType) {
  ClusterConfig config = Config();
  config.node_types["cpu_node"].min_workers = 2;
  Plan plan = Decide(config, {HeadNode(), Worker("n1", "cpu_node", {{"CPU", 2}}, 1)}, {});
  EXPECT_EQ(Launched(plan, "cpu_node"), 1u);
  EXPECT_THAT(plan.launches[0].reason, HasSubstr("min_workers 2"));
}

TEST(Planner, AShapeNoTypeHoldsIsInfeasibleAndLaunchesNothing) {
  Demand demand;
  demand.shapes.push_back({{{"GPU", 8}}, {}, 1, "tasks"});
  demand.shapes.push_back({{{"TPU", 1}}, {}, 2, "actors"});
  Plan plan = Decide(Config(), {HeadNode()}, demand);
  EXPECT_TRUE(plan.launches.empty());
  ASSERT_EQ(plan.infeasible.size(), 2u);
  EXPECT_THAT(plan.infeasible[0], HasSubstr("{GPU: 8}"));
  EXPECT_THAT(plan.infeasible[1], HasSubstr("{TPU: 1}"));
}

TEST(Planner, AcceleratorTypeMustMatchTheTypesLabel) {
  Demand demand;
  demand.shapes.push_back({{{"GPU", 1}}, {{"ray.io/accelerator-type", "H100"}}, 1, "tasks"});
  demand.shapes.push_back({{{"GPU", 1}}, {{"ray.io/accelerator-type", "A10"}}, 1, "tasks"});
  Plan plan = Decide(Config(), {HeadNode()}, demand);
  EXPECT_EQ(Launched(plan, "gpu_node"), 1u);
  ASSERT_EQ(plan.infeasible.size(), 1u);
  EXPECT_THAT(plan.infeasible[0], HasSubstr("A10"));
}

TEST(Planner, AStrictSpreadGroupOfFourAsksForFourNodesAtOnce) {
  Demand demand;
  demand.groups.push_back(
      {"0123456789ab", GroupStrategy::kStrictSpread, {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}}});
  Plan plan = Decide(Config(), {HeadNode()}, demand);
  EXPECT_EQ(Launched(plan, "cpu_node"), 4u);
  EXPECT_THAT(plan.launches[0].reason, HasSubstr("placement group 01234567"));
}

TEST(Planner, AStrictPackGroupGoesOnOneNode) {
  Demand demand;
  demand.groups.push_back({"g", GroupStrategy::kStrictPack, {{{"CPU", 2}}, {{"GPU", 1}}}});
  Plan plan = Decide(Config(), {HeadNode()}, demand);
  EXPECT_EQ(Launched(plan, "gpu_node"), 1u);
  EXPECT_EQ(Launched(plan, "cpu_node"), 0u);
}

TEST(Planner, AGroupTheLimitsCannotHoldWholeLaunchesNothing) {
  Demand demand;  // five STRICT_SPREAD bundles, four cpu_nodes at most, no room elsewhere
  demand.groups.push_back({"g", GroupStrategy::kStrictSpread,
                           {{{"CPU", 2}}, {{"CPU", 2}}, {{"CPU", 2}}, {{"CPU", 2}}, {{"CPU", 2}}}});
  ClusterConfig config = Config();
  config.node_types.erase("gpu_node");
  Plan plan = Decide(config, {HeadNode()}, demand);
  EXPECT_TRUE(plan.launches.empty());
  EXPECT_FALSE(plan.held_by_limits.empty());
}

TEST(Planner, RequestResourcesBinPacksOntoTotalsNotFreeResources) {
  Demand demand;
  demand.requested.push_back({{{"CPU", 2}}, {}, 3, "request_resources"});
  NodeNow busy = Worker("n1", "cpu_node", {{"CPU", 2}});
  busy.available = {{"CPU", 0}};  // busy, but its total counts
  Plan plan = Decide(Config(), {HeadNode(), busy}, demand);
  EXPECT_EQ(Launched(plan, "cpu_node"), 1u);  // the head's node, n1, and one more
}

TEST(Planner, RequestResourcesSelectorsTakeRaysInNotInAndNotForms) {
  ClusterConfig config = Config();
  config.node_types["a10_node"] = {"a10_node", {{"CPU", 4}, {"GPU", 1}},
                                   {{"accelerator_type", "A10"}}, 0, 2, {}};
  auto plan_for = [&](std::string key, std::string selector) {
    Demand demand;
    demand.requested.push_back({{{"GPU", 1}}, {{key, selector}}, 1, "request_resources"});
    return Decide(config, {HeadNode()}, demand);
  };
  Plan in = plan_for("accelerator_type", "in(A10,L4)");
  EXPECT_EQ(Launched(in, "a10_node"), 1u);
  EXPECT_EQ(Launched(in, "gpu_node"), 0u);
  Plan not_in = plan_for("accelerator_type", "!in(A10,L4)");
  EXPECT_EQ(Launched(not_in, "gpu_node"), 1u);
  EXPECT_EQ(Launched(not_in, "a10_node"), 0u);
  Plan not_value = plan_for("accelerator_type", "!H100");
  EXPECT_EQ(Launched(not_value, "a10_node"), 1u);
  EXPECT_EQ(Launched(not_value, "gpu_node"), 0u);
  Plan absent = plan_for("zone", "!us-east-1a");  // no type has the key: !value matches
  EXPECT_EQ(absent.launches.size(), 1u);
  Plan none = plan_for("accelerator_type", "in(TPU)");
  EXPECT_TRUE(none.launches.empty());
  EXPECT_FALSE(none.infeasible.empty());
}

TEST(Planner, StopsNodesIdlePastTheTimeoutDownToMinWorkers) {
  ClusterConfig config = Config();
  config.node_types["cpu_node"].min_workers = 2;
  std::vector<NodeNow> nodes = {HeadNode(), Worker("a", "cpu_node", {{"CPU", 2}}, 40'000),
                                Worker("b", "cpu_node", {{"CPU", 2}}, 40'000),
                                Worker("c", "cpu_node", {{"CPU", 2}}, 10'000),
                                Worker("g", "gpu_node", {{"CPU", 4}, {"GPU", 1}}, 31'000)};
  Plan plan = Decide(config, nodes, {});
  std::vector<std::string> stopped;
  for (const Stop& stop : plan.stops) stopped.push_back(stop.id);
  // c is idle for less than the timeout; of a and b, one stays for min_workers 2.
  EXPECT_THAT(stopped, ::testing::UnorderedElementsAre("a", "g"));
  EXPECT_THAT(plan.stops[0].reason, HasSubstr("idle for 40.0 s"));
  EXPECT_TRUE(plan.launches.empty());
}

TEST(Planner, NeverStopsTheHeadsNodeOrANodeTheDemandNeeds) {
  Demand demand;
  demand.shapes.push_back({{{"GPU", 1}}, {}, 1, "tasks"});  // will spill to g
  NodeNow head = HeadNode({{"CPU", 2}});
  head.idle_ms = 100'000;
  std::vector<NodeNow> nodes = {head, Worker("g", "gpu_node", {{"CPU", 4}, {"GPU", 1}}, 40'000)};
  Plan plan = Decide(Config(), nodes, demand);
  EXPECT_TRUE(plan.stops.empty());
  EXPECT_TRUE(plan.launches.empty());
}

}  // namespace
}  // namespace airt::autoscaler
