// The lease policy's scheduling strategies (DESIGN.md "Scheduling" 3): SPREAD, node affinity,
// node labels and label selectors, and DEFAULT's hybrid threshold, decided over hand-made views.
#include <set>
#include <string>
#include <variant>

#include <gtest/gtest.h>

#include "common/scheduling_strategy.h"
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

LeaseRequest Request(std::string_view shape, sched::SchedulingStrategy strategy = {},
                     TimePoint since = At(0)) {
  LeaseRequest r{.id = 1, .shape = Shape(shape), .waiting_since = since};
  r.strategy = std::move(strategy);
  return r;
}

sched::SchedulingStrategy Affinity(uint8_t node, bool soft, bool spill = false,
                                   bool fail = false) {
  sched::SchedulingStrategy s;
  s.kind = StrategyKind::kNodeAffinity;
  s.node = IdOf(node);
  s.soft = soft;
  s.spill_on_unavailable = spill;
  s.fail_on_unavailable = fail;
  return s;
}

sched::SchedulingStrategy Selector(const std::map<std::string, std::string>& selector) {
  sched::SchedulingStrategy s;
  Result<sched::LabelSelector> parsed = sched::ParseLabelSelector(selector);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  s.label_selector = parsed.ok() ? *parsed : sched::LabelSelector{};
  return s;
}

// "here" for a grant, the spill target's first byte as two hex digits, else the decision.
std::string Where(const LeaseDecision& d) {
  if (std::holds_alternative<GrantLocally>(d)) return "here";
  if (const auto* spill = std::get_if<SpillBack>(&d)) return spill->node.Hex().substr(0, 2);
  return ToString(d);
}

TEST(StrategyPolicy, SpreadTakesTheNodesWithRoomInTurn) {
  NodeResources local = Node("CPU: 4");
  ClusterView view{{View(0x30, "CPU: 4", "CPU: 4"), View(0x20, "CPU: 4", "CPU: 4"),
                    View(0x40, "CPU: 4", "CPU: 0")}};  // 0x40 is full: skipped
  sched::SchedulingStrategy spread;
  spread.kind = StrategyKind::kSpread;
  LeasePolicy policy = Policy();
  std::set<std::string> seen;
  for (int i = 0; i < 3; ++i) seen.insert(Where(policy.Decide(Request("CPU: 1", spread), local, view, At(0))));
  EXPECT_EQ(seen, (std::set<std::string>{"here", "20", "30"}));
}

TEST(StrategyPolicy, SpreadRequestSpilledHereIsGrantedHere) {
  NodeResources local = Node("CPU: 4");
  ClusterView view{{View(0x20, "CPU: 4", "CPU: 4")}};
  sched::SchedulingStrategy spread;
  spread.kind = StrategyKind::kSpread;
  LeasePolicy policy = Policy();
  for (int i = 0; i < 4; ++i) {
    LeaseRequest r = Request("CPU: 1", spread);
    r.spilled = true;
    EXPECT_EQ(Where(policy.Decide(r, local, view, At(0))), "here");
  }
}

TEST(StrategyPolicy, DefaultPacksLocallyUntilTheThresholdThenTakesTheLeastUsedNode) {
  NodeResources local = Node("CPU: 4");
  ClusterView view{{View(0x20, "CPU: 4", "CPU: 4")}};
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1"), local, view, At(0))), "here");
  ASSERT_TRUE(local.Acquire(Shape("CPU: 1")).ok());
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1"), local, view, At(0))), "here");  // 25% used
  ASSERT_TRUE(local.Acquire(Shape("CPU: 1")).ok());
  // Half used: past the threshold, and the other node is idle.
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1"), local, view, At(0))), "20");
  // A spilled request is granted where it fits.
  LeaseRequest spilled = Request("CPU: 1");
  spilled.spilled = true;
  EXPECT_EQ(Where(Policy().Decide(spilled, local, view, At(0))), "here");
}

TEST(StrategyPolicy, HardAffinityGoesToItsNodeEvenWhenItIsBusy) {
  NodeResources local = Node("CPU: 8");
  ClusterView view{{View(0x20, "CPU: 2", "CPU: 0")}};
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1", Affinity(0x20, false)), local, view, At(0))),
            "20");
}

TEST(StrategyPolicy, HardAffinityToThisNodeQueuesHereOrFailsWhenAskedTo) {
  NodeResources local = Node("CPU: 1");
  ASSERT_TRUE(local.Acquire(Shape("CPU: 1")).ok());
  ClusterView view{{View(0x20, "CPU: 8", "CPU: 8")}};
  LeaseDecision d = Policy().Decide(Request("CPU: 1", Affinity(0x10, false)), local, view, At(0));
  ASSERT_TRUE(std::holds_alternative<QueueLocally>(d)) << ToString(d);
  d = Policy().Decide(Request("CPU: 1", Affinity(0x10, false, false, true)), local, view, At(0));
  const auto* infeasible = std::get_if<Infeasible>(&d);
  ASSERT_NE(infeasible, nullptr) << ToString(d);
  EXPECT_NE(infeasible->message.find("_fail_on_unavailable"), std::string::npos);
}

TEST(StrategyPolicy, HardAffinityToADeadNodeIsInfeasibleAtOnceNamingIt) {
  NodeResources local = Node("CPU: 8");
  ClusterView view{{View(0x20, "CPU: 8", "CPU: 8", {}, /*alive=*/false)}};
  LeaseDecision d = Policy().Decide(Request("CPU: 1", Affinity(0x20, false)), local, view, At(0));
  const auto* infeasible = std::get_if<Infeasible>(&d);
  ASSERT_NE(infeasible, nullptr) << ToString(d);
  EXPECT_NE(infeasible->message.find(IdOf(0x20).Hex()), std::string::npos) << infeasible->message;
  EXPECT_NE(infeasible->message.find("dead"), std::string::npos) << infeasible->message;
}

TEST(StrategyPolicy, HardAffinityToAnUnknownNodeWaitsForTheGraceThenFails) {
  NodeResources local = Node("CPU: 8");
  LeaseRequest r = Request("CPU: 1", Affinity(0x77, false), At(0));
  EXPECT_TRUE(std::holds_alternative<QueueLocally>(Policy(10s).Decide(r, local, {}, At(5))));
  LeaseDecision d = Policy(10s).Decide(r, local, {}, At(10));
  const auto* infeasible = std::get_if<Infeasible>(&d);
  ASSERT_NE(infeasible, nullptr) << ToString(d);
  EXPECT_NE(infeasible->message.find(IdOf(0x77).Hex()), std::string::npos);
}

TEST(StrategyPolicy, SoftAffinityFallsBackWhenItsNodeIsDeadOrTooSmall) {
  NodeResources local = Node("CPU: 8");
  ClusterView dead{{View(0x20, "CPU: 8", "CPU: 8", {}, /*alive=*/false)}};
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1", Affinity(0x20, true)), local, dead, At(0))),
            "here");
  ClusterView small{{View(0x20, "CPU: 1", "CPU: 1")}};
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 2", Affinity(0x20, true)), local, small, At(0))),
            "here");
  ClusterView fits{{View(0x20, "CPU: 4", "CPU: 4")}};
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 2", Affinity(0x20, true)), local, fits, At(0))),
            "20");
}

TEST(StrategyPolicy, SoftAffinitySpillsElsewhereWhenItsNodeIsFullOnlyIfAsked) {
  NodeResources local = Node("CPU: 8");
  ClusterView busy{{View(0x20, "CPU: 4", "CPU: 0")}};
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1", Affinity(0x20, true)), local, busy, At(0))),
            "20");
  EXPECT_EQ(
      Where(Policy().Decide(Request("CPU: 1", Affinity(0x20, true, true)), local, busy, At(0))),
      "here");
}

TEST(StrategyPolicy, LabelSelectorPicksAndExcludesNodes) {
  NodeResources local = Node("CPU: 8", {{"zone", "c"}});
  ClusterView view{{View(0x20, "CPU: 8", "CPU: 8", {{"zone", "a"}}),
                    View(0x30, "CPU: 8", "CPU: 8", {{"zone", "b"}, {"ray.io/accelerator-type", "H100"}})}};
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1", Selector({{"zone", "in(a, b)"}})), local, view,
                                  At(0))),
            "20");
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1", Selector({{"zone", "!a"}})), local, view, At(0))),
            "here");
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1", Selector({{"accelerator_type", "H100"}})),
                                  local, view, At(0))),
            "30");
  EXPECT_EQ(Where(Policy().Decide(
                Request("CPU: 1", Selector({{"ray.io/node-id", IdOf(0x20).Hex()}})), local, view,
                At(0))),
            "20");
}

TEST(StrategyPolicy, LabelsNoNodeHasAreInfeasibleNamingTheLabels) {
  NodeResources local = Node("CPU: 8", {{"zone", "c"}});
  ClusterView view{{View(0x20, "CPU: 8", "CPU: 8", {{"zone", "a"}})}};
  LeaseDecision d =
      Policy(0s).Decide(Request("CPU: 1", Selector({{"zone", "z"}})), local, view, At(0));
  const auto* infeasible = std::get_if<Infeasible>(&d);
  ASSERT_NE(infeasible, nullptr) << ToString(d);
  EXPECT_EQ(infeasible->message,
            "no node can ever run {CPU: 1} with label_selector {zone in (z)}: node 10101010 (this "
            "node) has {CPU: 8} (labels zone=c), node 20202020 has {CPU: 8} (labels zone=a)");
}

TEST(StrategyPolicy, NodeLabelSoftExpressionsArePreferredThenFallenBackFrom) {
  NodeResources local = Node("CPU: 8", {{"zone", "a"}});
  ClusterView view{{View(0x20, "CPU: 8", "CPU: 8", {{"zone", "a"}, {"disk", "ssd"}})}};
  sched::SchedulingStrategy s;
  s.kind = StrategyKind::kNodeLabel;
  s.hard_labels = {{"zone", sched::LabelOperator::kIn, {"a"}}};
  s.soft_labels = {{"disk", sched::LabelOperator::kExists, {}}};
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1", s), local, view, At(0))), "20");
  ClusterView full{{View(0x20, "CPU: 8", "CPU: 0", {{"zone", "a"}, {"disk", "ssd"}})}};
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1", s), local, full, At(0))), "here");
  s.hard_labels = {{"disk", sched::LabelOperator::kDoesNotExist, {}}};
  s.soft_labels.clear();
  EXPECT_EQ(Where(Policy().Decide(Request("CPU: 1", s), local, view, At(0))), "here");
}

TEST(LabelSelector, ParsesRaysForms) {
  Result<sched::LabelSelector> parsed =
      sched::ParseLabelSelector({{"a", "x"}, {"b", "!y"}, {"c", "in(p, q)"}, {"d", "!in(r)"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(sched::ToString(*parsed), "a in (x), b not in (y), c in (p, q), d not in (r)");
  EXPECT_FALSE(sched::ParseLabelSelector({{"a", ""}}).ok());
  EXPECT_FALSE(sched::ParseLabelSelector({{"a", "in(x,)"}}).ok());
  EXPECT_FALSE(sched::ParseLabelSelector({{"a", "in(x"}}).ok());
  EXPECT_FALSE(sched::ParseLabelSelector({{"", "x"}}).ok());
}

}  // namespace
}  // namespace airt::worker::scheduling
