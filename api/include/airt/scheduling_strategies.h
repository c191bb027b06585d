// Scheduling strategies for tasks and actors, with the names of Ray's Python
// ray.util.scheduling_strategies (Ray's C++ API has none):
//
//   airt::Task(Work).SetSchedulingStrategy(airt::SpreadSchedulingStrategy{}).Remote();
//   airt::Task(Work).SetSchedulingStrategy(airt::NodeAffinitySchedulingStrategy{node, true})...;
//   airt::Actor(Make).SetSchedulingStrategy(airt::NodeLabelSchedulingStrategy{
//       {airt::LabelIn("zone", {"a", "b"})}, {airt::LabelExists("ssd")}}).Remote();
//   airt::Task(Work).SetLabelSelector({{"accelerator_type", "H100"}, {"zone", "!c"}}).Remote();
//
// The strategy travels in the lease request (tasks) and the actor's entry (actors) and the
// schedulers decide it: the nodes' lease policy for tasks, the head's actor placement for actors
// (docs/cluster.md "Scheduling strategies"). A hard NodeAffinity to a dead or unknown node, and
// labels no node has, fail the task with InfeasibleError (an actor: its calls with ActorDiedError)
// naming the node or the labels.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace airt {

// Pack onto the submitter's node until half of it is used, then the least used node with room
// (Ray's hybrid policy); for actors, the least loaded node with room.
struct DefaultSchedulingStrategy {};
// Round robin over the nodes with room (tasks); the node with the fewest actors (actors).
struct SpreadSchedulingStrategy {};
// Node `node_id` (hex, as GetRuntimeContext/NodeID prints it) only, or, soft, while it is alive
// and can hold the work (and, with spill_on_unavailable, has room now).
struct NodeAffinitySchedulingStrategy {
  std::string node_id;
  bool soft = false;
  bool spill_on_unavailable = false;  // Ray's _spill_on_unavailable (soft only)
  bool fail_on_unavailable = false;   // Ray's _fail_on_unavailable (hard only)
};

enum class LabelOperator { kIn, kNotIn, kExists, kDoesNotExist };
// One expression over a node label. NotIn and DoesNotExist also hold on a node without the key.
struct LabelMatchExpression {
  std::string key;
  LabelOperator op = LabelOperator::kIn;
  std::vector<std::string> values;
};
inline LabelMatchExpression LabelIn(std::string key, std::vector<std::string> values) {
  return {std::move(key), LabelOperator::kIn, std::move(values)};
}
inline LabelMatchExpression LabelNotIn(std::string key, std::vector<std::string> values) {
  return {std::move(key), LabelOperator::kNotIn, std::move(values)};
}
inline LabelMatchExpression LabelExists(std::string key) {
  return {std::move(key), LabelOperator::kExists, {}};
}
inline LabelMatchExpression LabelDoesNotExist(std::string key) {
  return {std::move(key), LabelOperator::kDoesNotExist, {}};
}
// Ray's NodeLabelSchedulingStrategy: every `hard` expression must hold; among those nodes, ones
// where every `soft` expression holds are preferred.
struct NodeLabelSchedulingStrategy {
  std::vector<LabelMatchExpression> hard;
  std::vector<LabelMatchExpression> soft;
};

using SchedulingStrategy = std::variant<DefaultSchedulingStrategy, SpreadSchedulingStrategy,
                                        NodeAffinitySchedulingStrategy,
                                        NodeLabelSchedulingStrategy>;

// Ray 2.60's label_selector: key -> "value", "!value", "in(a,b)" or "!in(a,b)"; every entry must
// hold. The key "accelerator_type" matches Ray's ray.io/accelerator-type label too, and
// "ray.io/node-id" every node's hex id.
using LabelSelector = std::map<std::string, std::string>;

}  // namespace airt
