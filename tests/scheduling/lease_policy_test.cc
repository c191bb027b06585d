#include <string>
#include <variant>

#include <gtest/gtest.h>

#include "tests/scheduling/scheduling_test_util.h"
#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling {
namespace {

using namespace std::chrono_literals;
using testing::At;
using testing::IdOf;
using testing::Node;
using testing::Shape;
using testing::View;

const NodeId kLocal = IdOf(0x10);

LeasePolicy Policy(Duration grace = 10s) {
  return LeasePolicy(LeasePolicyOptions{.local_node = kLocal, .infeasible_grace = grace});
}

LeaseRequest Request(std::string_view shape, TimePoint since = At(0)) {
  return LeaseRequest{.id = 1, .shape = Shape(shape), .waiting_since = since};
}

// The node a decision spills back to, or nullopt.
std::optional<NodeId> SpilledTo(const LeaseDecision& d) {
  if (const auto* spill = std::get_if<SpillBack>(&d)) return spill->node;
  return std::nullopt;
}

TEST(LeasePolicy, GrantsLocallyWhenItFits) {
  NodeResources local = Node("CPU: 4, GPU: 1");
  ClusterView view{{View(0x20, "CPU: 64, GPU: 8", "CPU: 64, GPU: 8")}};
  LeaseDecision d = Policy().Decide(Request("CPU: 1, GPU: 0.5"), local, view, At(0));
  EXPECT_TRUE(std::holds_alternative<GrantLocally>(d)) << ToString(d);
}

TEST(LeasePolicy, EmptyShapeIsGrantedOnAFullNode) {
  NodeResources local = Node("CPU: 1");
  ASSERT_TRUE(local.Acquire(Shape("CPU: 1")).ok());
  LeaseDecision d = Policy().Decide(Request("{}"), local, {}, At(0));
  EXPECT_TRUE(std::holds_alternative<GrantLocally>(d)) << ToString(d);
}

TEST(LeasePolicy, SpillsBackWhenLocalGpusBusy) {
  NodeResources local = Node("CPU: 8, GPU: 2");
  ASSERT_TRUE(local.Acquire(Shape("GPU: 2")).ok());
  ClusterView view{{View(0x20, "CPU: 8, GPU: 2", "CPU: 8"),  // busy too
                    View(0x30, "CPU: 8, GPU: 2", "CPU: 8, GPU: 1")}};
  LeaseDecision d = Policy().Decide(Request("CPU: 1, GPU: 1"), local, view, At(0));
  EXPECT_EQ(SpilledTo(d), IdOf(0x30)) << ToString(d);
  EXPECT_EQ(ToString(d), "spill back to 30303030");
}

TEST(LeasePolicy, SpillsToTheNodeWithMostFreeOfTheRequestedResources) {
  NodeResources local = Node("CPU: 1");
  ClusterView view{{View(0x20, "CPU: 64, GPU: 8", "CPU: 64, GPU: 2"),
                    View(0x30, "CPU: 8, GPU: 8", "CPU: 2, GPU: 5"),
                    View(0x40, "CPU: 8, GPU: 8", "CPU: 8, GPU: 5")}};
  // GPUs first: 0x30 and 0x40 tie on GPU, 0x40 has more CPU.
  EXPECT_EQ(SpilledTo(Policy().Decide(Request("CPU: 2, GPU: 1"), local, view, At(0))), IdOf(0x40));
  // Resources not requested do not count: for CPU alone 0x20 has the most.
  EXPECT_EQ(SpilledTo(Policy().Decide(Request("CPU: 2"), local, view, At(0))), IdOf(0x20));
}

TEST(LeasePolicy, SpillTieBreaksByLowestNodeId) {
  NodeResources local = Node("CPU: 1");
  ClusterView view{{View(0x50, "GPU: 4", "GPU: 4"), View(0x20, "GPU: 4", "GPU: 4"),
                    View(0x30, "GPU: 4", "GPU: 4")}};
  EXPECT_EQ(SpilledTo(Policy().Decide(Request("GPU: 1"), local, view, At(0))), IdOf(0x20));
}

TEST(LeasePolicy, NeverSpillsToADeadNodeOrToItself) {
  NodeResources local = Node("CPU: 1, GPU: 1");
  ASSERT_TRUE(local.Acquire(Shape("GPU: 1")).ok());
  // The view still shows the local GPU free (it is stale); a dead node shows one free too.
  ClusterView view{{View(0x10, "CPU: 1, GPU: 1", "CPU: 1, GPU: 1"),
                    View(0x20, "GPU: 1", "GPU: 1", {}, /*alive=*/false)}};
  LeaseDecision d = Policy().Decide(Request("GPU: 1"), local, view, At(0));
  const auto* queue = std::get_if<QueueLocally>(&d);
  ASSERT_NE(queue, nullptr) << ToString(d);
  EXPECT_TRUE(queue->feasible);  // the local totals fit it
}

TEST(LeasePolicy, QueuesWhenTotalsFitButNothingIsFreeNow) {
  NodeResources local = Node("CPU: 2, GPU: 1");
  ASSERT_TRUE(local.Acquire(Shape("GPU: 1")).ok());
  ClusterView view{{View(0x20, "GPU: 4", "GPU: 0.5")}};
  LeaseDecision d = Policy().Decide(Request("GPU: 1"), local, view, At(100));
  ASSERT_TRUE(std::holds_alternative<QueueLocally>(d)) << ToString(d);
  EXPECT_EQ(ToString(d), "queue (waiting for {GPU: 1}: no node has it free now)");
}

TEST(LeasePolicy, QueuesWhenOnlyAnotherNodesTotalsFit) {
  NodeResources local = Node("CPU: 8");
  ClusterView view{{View(0x20, "CPU: 8, GPU: 8", "CPU: 8")}};
  // Long after any grace period: the remote node's totals make it feasible.
  LeaseDecision d = Policy().Decide(Request("GPU: 8"), local, view, At(1000));
  const auto* queue = std::get_if<QueueLocally>(&d);
  ASSERT_NE(queue, nullptr) << ToString(d);
  EXPECT_TRUE(queue->feasible);
}

TEST(LeasePolicy, QueuesDuringGraceWhenNoNodeCanEverFit) {
  NodeResources local = Node("CPU: 2, GPU: 4");
  LeaseDecision d = Policy(10s).Decide(Request("GPU: 8", At(100)), local, {}, At(109));
  const auto* queue = std::get_if<QueueLocally>(&d);
  ASSERT_NE(queue, nullptr) << ToString(d);
  EXPECT_FALSE(queue->feasible);
  EXPECT_EQ(queue->reason,
            "no node can run {GPU: 8} yet; waiting for nodes to join for 1000 ms more");
}

TEST(LeasePolicy, InfeasibleAfterGraceNamesShapeAndTotals) {
  NodeResources local = Node("CPU: 2, GPU: 4");
  ClusterView view{{View(0x10, "CPU: 2, GPU: 4", "CPU: 2, GPU: 4"),  // the local node: once
                    View(0xab, "CPU: 8, GPU: 2", "CPU: 8, GPU: 2", {{"ray.io/accelerator-type", "A10"}}),
                    View(0x20, "CPU: 96, GPU: 8", "CPU: 96, GPU: 8", {}, /*alive=*/false)}};
  LeaseDecision d = Policy(10s).Decide(Request("GPU: 8", At(100)), local, view, At(110));
  const auto* infeasible = std::get_if<Infeasible>(&d);
  ASSERT_NE(infeasible, nullptr) << ToString(d);
  EXPECT_EQ(infeasible->message,
            "no node can ever run {GPU: 8}: node 10101010 (this node) has {CPU: 2, GPU: 4}, "
            "node abababab has {CPU: 8, GPU: 2} (accelerator_type A10)");
}

TEST(LeasePolicy, ARequestTheHeadPlacedHereQueuesHereInsteadOfSpillingBack) {
  NodeResources local = Node("CPU: 2");
  ASSERT_TRUE(local.Acquire(Shape("CPU: 2")).ok());
  ClusterView view{{View(0x20, "CPU: 8", "CPU: 8")}};  // room there: an unplaced one would go
  LeaseRequest placed = Request("CPU: 1");
  placed.placed = true;
  LeaseDecision d = Policy().Decide(placed, local, view, At(0));
  const auto* queue = std::get_if<QueueLocally>(&d);
  ASSERT_NE(queue, nullptr) << ToString(d);
  EXPECT_TRUE(queue->feasible);
  EXPECT_EQ(queue->reason, "placed here by the head: waiting for {CPU: 1} to be free on this node");
  EXPECT_EQ(SpilledTo(Policy().Decide(Request("CPU: 1"), local, view, At(0))), IdOf(0x20));
}

TEST(LeasePolicy, ARequestTheHeadPlacedOnANodeThatCanNeverHoldItIsInfeasibleAtOnce) {
  NodeResources local = Node("CPU: 2");
  ClusterView view{{View(0x20, "CPU: 8, GPU: 1", "CPU: 8, GPU: 1")}};
  LeaseRequest placed = Request("GPU: 1", At(0));
  placed.placed = true;
  // Within any grace period: the head has waited for joining nodes already.
  LeaseDecision d = Policy(10s).Decide(placed, local, view, At(0));
  const auto* infeasible = std::get_if<Infeasible>(&d);
  ASSERT_NE(infeasible, nullptr) << ToString(d);
  EXPECT_EQ(infeasible->message,
            "the head placed {GPU: 1} on a node that can never run it: node 10101010 (this "
            "node) has {CPU: 2}");
}

TEST(LeasePolicy, DeadNodesTotalsDoNotMakeAShapeFeasible) {
  NodeResources local = Node("CPU: 2");
  ClusterView view{{View(0x20, "GPU: 8", "GPU: 8", {}, /*alive=*/false)}};
  LeaseDecision d = Policy(10s).Decide(Request("GPU: 1", At(0)), local, view, At(10));
  EXPECT_TRUE(std::holds_alternative<Infeasible>(d)) << ToString(d);
}

TEST(LeasePolicy, AcceleratorTypeOnlyMatchesLabelledNodes) {
  NodeResources local = Node("CPU: 8, GPU: 8");  // unlabelled, all free
  ClusterView view{{View(0x20, "GPU: 8", "GPU: 8", {{"ray.io/accelerator-type", "H100"}}),
                    View(0x30, "GPU: 2", "GPU: 1", {{"ray.io/accelerator-type", "A10"}})}};
  LeaseDecision d = Policy().Decide(Request("GPU: 1, accelerator_type: A10"), local, view, At(0));
  EXPECT_EQ(SpilledTo(d), IdOf(0x30)) << ToString(d);
  // A labelled local node grants it.
  NodeResources a10 = Node("GPU: 1", {{"ray.io/accelerator-type", "A10"}});
  d = Policy().Decide(Request("GPU: 1, accelerator_type: A10"), a10, view, At(0));
  EXPECT_TRUE(std::holds_alternative<GrantLocally>(d)) << ToString(d);
}

TEST(LeasePolicy, AcceleratorTypeNoNodeHasIsInfeasibleAfterGrace) {
  NodeResources local = Node("CPU: 8, GPU: 8", {{"ray.io/accelerator-type", "A10"}});
  ClusterView view{{View(0x20, "GPU: 8", "GPU: 8")}};
  LeaseRequest request = Request("GPU: 1, accelerator_type: H100", At(0));
  EXPECT_TRUE(
      std::holds_alternative<QueueLocally>(Policy(10s).Decide(request, local, view, At(5))));
  LeaseDecision d = Policy(10s).Decide(request, local, view, At(10));
  const auto* infeasible = std::get_if<Infeasible>(&d);
  ASSERT_NE(infeasible, nullptr) << ToString(d);
  EXPECT_EQ(infeasible->message,
            "no node can ever run {GPU: 1, accelerator_type: H100}: node 10101010 (this node) has "
            "{CPU: 8, GPU: 8} (accelerator_type A10), node 20202020 has {GPU: 8}");
}

TEST(LeasePolicy, InfeasibleMessageNamesSixteenNodesAndCountsTheRest) {
  NodeResources local = Node("CPU: 1");
  ClusterView view;
  for (uint8_t i = 0; i < 20; ++i) view.nodes.push_back(View(0x40 + i, "CPU: 1", "CPU: 1"));
  LeaseDecision d = Policy(0s).Decide(Request("GPU: 1"), local, view, At(0));
  const auto* infeasible = std::get_if<Infeasible>(&d);
  ASSERT_NE(infeasible, nullptr) << ToString(d);
  EXPECT_NE(infeasible->message.find("node 4e4e4e4e has {CPU: 1}, and 5 more nodes"),
            std::string::npos)
      << infeasible->message;
}

TEST(LeasePolicy, FractionalGpuSpillsToANodeWithAShareFree) {
  NodeResources local = Node("GPU: 1");
  ASSERT_TRUE(local.Acquire(Shape("GPU: 0.75")).ok());
  ClusterView view{{View(0x20, "GPU: 1", "GPU: 0.25"), View(0x30, "GPU: 1", "GPU: 0.5")}};
  // The local GPU fits a quarter more but is 75% used, past the hybrid threshold: the least used
  // node with a share free takes it (Ray's hybrid policy).
  EXPECT_EQ(SpilledTo(Policy().Decide(Request("GPU: 0.25"), local, view, At(0))), IdOf(0x30));
  LeaseRequest spilled = Request("GPU: 0.25");
  spilled.spilled = true;  // sent here by another node: granted where it fits
  EXPECT_TRUE(std::holds_alternative<GrantLocally>(Policy().Decide(spilled, local, view, At(0))));
  EXPECT_EQ(SpilledTo(Policy().Decide(Request("GPU: 0.5"), local, view, At(0))), IdOf(0x30));
}

}  // namespace
}  // namespace airt::worker::scheduling
