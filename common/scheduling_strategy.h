// A scheduling strategy as airt's schedulers decide it (DESIGN.md "Scheduling" 3): the node's
// lease policy (worker/scheduling) for tasks, the head's actor placement for actors. Clients only
// fill it in (Python's .options(scheduling_strategy=..., label_selector=...), the C++ option
// setters) and send it in the lease request or the actor's entry (cluster.capnp
// SchedulingStrategy; common/strategy_wire.h converts). Plain values, no I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"

namespace airt::sched {

// Ray's label operators. NotIn and DoesNotExist also match a node without the key.
enum class LabelOperator : uint8_t { kIn, kNotIn, kExists, kDoesNotExist };

struct LabelExpression {
  std::string key;
  LabelOperator op = LabelOperator::kIn;
  std::vector<std::string> values;  // kIn, kNotIn
  friend bool operator==(const LabelExpression&, const LabelExpression&) = default;
};

// Expressions that must all hold.
using LabelSelector = std::vector<LabelExpression>;

enum class StrategyKind : uint8_t { kDefault, kSpread, kNodeAffinity, kNodeLabel };

struct SchedulingStrategy {
  StrategyKind kind = StrategyKind::kDefault;
  NodeId node;                        // kNodeAffinity
  bool soft = false;                  // kNodeAffinity: fall back when the node is gone or unfit
  bool spill_on_unavailable = false;  // soft kNodeAffinity: also when it has no room now
  bool fail_on_unavailable = false;   // hard kNodeAffinity: fail instead of waiting for room
  LabelSelector hard_labels;          // kNodeLabel
  LabelSelector soft_labels;          // kNodeLabel: preferred among the nodes hard_labels allow
  LabelSelector label_selector;       // any kind (Ray 2.60's label_selector): must match
  friend bool operator==(const SchedulingStrategy&, const SchedulingStrategy&) = default;
};

// Label keys every node has implicitly, as Ray 2.60's default labels: its hex id.
inline constexpr std::string_view kNodeIdLabel = "ray.io/node-id";
// Ray's accelerator label key, and the short key `accelerator_type` that label selectors may use
// for it (a node labelled ray.io/accelerator-type=H100 matches {"accelerator_type": "H100"}).
inline constexpr std::string_view kAcceleratorTypeLabelKey = "ray.io/accelerator-type";
inline constexpr std::string_view kAcceleratorTypeShortKey = "accelerator_type";

// A node's label value for `key`, or nullptr. Looks up kNodeIdLabel as `node`'s hex id and the
// short accelerator key as Ray's when the node has no label of that name itself.
using LabelLookup = std::function<const std::string*(std::string_view key)>;

// Whether a node whose labels `lookup` reads satisfies every expression of `selector`.
bool LabelsMatch(const LabelSelector& selector, const LabelLookup& lookup);
// A lookup over `labels` (key -> value) of node `node`, with the implicit keys above. The
// returned function refers to `labels` and `node_hex`, which must outlive it.
LabelLookup NodeLabelLookup(const std::map<std::string, std::string, std::less<>>& labels,
                            const std::string& node_hex);

// Ray 2.60's label_selector dict: "v" (In {v}), "!v" (NotIn {v}), "in(a,b)", "!in(a,b)".
// kInvalidArgument naming the key for an empty key or value, or a malformed in(...).
Result<LabelSelector> ParseLabelSelector(const std::map<std::string, std::string>& selector);
// Checks an expression list: non-empty keys; In/NotIn with values, Exists/DoesNotExist without.
Status ValidateLabelSelector(const LabelSelector& selector, std::string_view what);

// "zone in (a, b), gpu exists": for messages.
std::string ToString(const LabelSelector& selector);
// "SPREAD", "NodeAffinity(1a2b3c4d, soft)", "NodeLabel(hard: ..., soft: ...)", with
// " label_selector {...}" after it when set; "DEFAULT" for the default.
std::string ToString(const SchedulingStrategy& strategy);

}  // namespace airt::sched
