// The public scheduling strategies (airt/scheduling_strategies.h) as the core worker sends them
// (common/scheduling_strategy.h): checked here, decided by the schedulers.
#include <string>
#include <variant>

#include "airt/exceptions.h"
#include "airt/scheduling_strategies.h"
#include "api/internal/driver_state.h"
#include "common/scheduling_strategy.h"

namespace airt::internal {
namespace {

sched::LabelSelector Expressions(const std::vector<LabelMatchExpression>& in,
                                 const std::string& what) {
  sched::LabelSelector out;
  for (const LabelMatchExpression& e : in) {
    out.push_back({e.key, static_cast<sched::LabelOperator>(e.op), e.values});
  }
  Status valid = sched::ValidateLabelSelector(out, what);
  if (!valid.ok()) throw InvalidArgumentError(valid.message());
  return out;
}

}  // namespace

sched::SchedulingStrategy CoreStrategy(const SchedulingStrategy& strategy,
                                       const LabelSelector& label_selector) {
  sched::SchedulingStrategy out;
  if (std::holds_alternative<SpreadSchedulingStrategy>(strategy)) {
    out.kind = sched::StrategyKind::kSpread;
  } else if (const auto* affinity = std::get_if<NodeAffinitySchedulingStrategy>(&strategy)) {
    Result<NodeId> node = NodeId::FromHex(affinity->node_id);
    if (!node.ok()) {
      throw InvalidArgumentError("NodeAffinitySchedulingStrategy: node_id '" + affinity->node_id +
                                 "' is not a node's hex id: " + node.status().message());
    }
    out.kind = sched::StrategyKind::kNodeAffinity;
    out.node = *node;
    out.soft = affinity->soft;
    out.spill_on_unavailable = affinity->spill_on_unavailable;
    out.fail_on_unavailable = affinity->fail_on_unavailable;
  } else if (const auto* labels = std::get_if<NodeLabelSchedulingStrategy>(&strategy)) {
    if (labels->hard.empty() && labels->soft.empty()) {
      throw InvalidArgumentError(
          "NodeLabelSchedulingStrategy: hard and soft are both empty; give at least one");
    }
    out.kind = sched::StrategyKind::kNodeLabel;
    out.hard_labels = Expressions(labels->hard, "NodeLabelSchedulingStrategy hard");
    out.soft_labels = Expressions(labels->soft, "NodeLabelSchedulingStrategy soft");
  }
  Result<sched::LabelSelector> selector = sched::ParseLabelSelector(label_selector);
  if (!selector.ok()) throw InvalidArgumentError(selector.status().message());
  out.label_selector = std::move(*selector);
  return out;
}

}  // namespace airt::internal
