// LeasePolicy: grant here, spill back, queue, or infeasible, by the request's strategy.
#include <algorithm>
#include <string>
#include <vector>

#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling {
namespace {

using sched::LabelLookup;
using sched::NodeLabelLookup;

// Nodes named in an Infeasible message; the rest are counted.
constexpr size_t kMaxNodesNamed = 16;

bool AcceleratorMatches(const Labels& labels, const ResourceShape& shape) {
  if (shape.accelerator_type().empty()) return true;
  auto it = labels.find(kAcceleratorTypeLabel);
  return it != labels.end() && it->second == shape.accelerator_type();
}

bool HasLabelConstraints(const SchedulingStrategy& s) {
  return !s.label_selector.empty() || !s.hard_labels.empty() || !s.soft_labels.empty();
}

// Whether node `id` with `labels` may run the request at all (its hard constraints).
bool Allowed(const LeaseRequest& request, const NodeId& id, const Labels& labels) {
  if (!AcceleratorMatches(labels, request.shape)) return false;
  const SchedulingStrategy& s = request.strategy;
  if (s.label_selector.empty() && s.hard_labels.empty()) return true;
  std::string hex = id.Hex();
  LabelLookup lookup = NodeLabelLookup(labels, hex);
  if (!LabelsMatch(s.label_selector, lookup)) return false;
  return s.kind != StrategyKind::kNodeLabel || LabelsMatch(s.hard_labels, lookup);
}

// Whether node `id` is one a NodeLabel strategy's soft expressions prefer.
bool Preferred(const LeaseRequest& request, const NodeId& id, const Labels& labels) {
  const SchedulingStrategy& s = request.strategy;
  if (s.kind != StrategyKind::kNodeLabel || s.soft_labels.empty()) return false;
  std::string hex = id.Hex();
  return LabelsMatch(s.soft_labels, NodeLabelLookup(labels, hex));
}

std::string ShortId(const NodeId& id) { return id.Hex().substr(0, 8); }

// The free amounts of the requested resources, GPU, CPU, memory, then the others by name:
// compared lexicographically, the larger is the better spillback target.
std::vector<Amount> SpillScore(const ResourceShape& shape, const ResourceSet& available) {
  std::vector<Amount> score;
  const auto& requested = shape.amounts().amounts();
  for (std::string_view first : {kGpu, kCpu, kMemory}) {
    if (requested.find(first) != requested.end()) score.push_back(available.Get(first));
  }
  for (const auto& [name, amount] : requested) {
    if (name != kGpu && name != kCpu && name != kMemory) score.push_back(available.Get(name));
  }
  return score;
}

// The largest share in use of any resource the shape requests (0 for an empty shape).
double Utilization(const ResourceShape& shape, const ResourceSet& total,
                   const ResourceSet& available) {
  double worst = 0;
  for (const auto& [name, amount] : shape.amounts().amounts()) {
    double capacity = total.Get(name).ToDouble();
    if (capacity <= 0) continue;
    worst = std::max(worst, (capacity - available.Get(name).ToDouble()) / capacity);
  }
  return worst;
}

std::string DescribeNode(std::string_view name, const ResourceSet& total, const Labels& labels,
                         bool with_labels) {
  std::string out = "node " + std::string(name) + " has " + total.ToString();
  if (with_labels) {
    out += " (labels";
    if (labels.empty()) out += " none";
    bool first = true;
    for (const auto& [key, value] : labels) {
      out += (first ? " " : ", ") + key + "=" + value;
      first = false;
    }
    return out + ")";
  }
  auto it = labels.find(kAcceleratorTypeLabel);
  if (it != labels.end()) out += " (" + std::string(kAcceleratorType) + " " + it->second + ")";
  return out;
}

// "{CPU: 1}" and the request's label constraints, for messages.
std::string DescribeRequest(const LeaseRequest& request) {
  std::string out = request.shape.ToString();
  const SchedulingStrategy& s = request.strategy;
  if (!s.label_selector.empty()) out += " with label_selector {" + ToString(s.label_selector) + "}";
  if (s.kind == StrategyKind::kNodeLabel && !s.hard_labels.empty()) {
    out += " with node labels {" + ToString(s.hard_labels) + "}";
  }
  return out;
}

const NodeView* FindNode(const ClusterView& view, const NodeId& id) {
  for (const NodeView& node : view.nodes) {
    if (node.id == id) return &node;
  }
  return nullptr;
}

// A request decided as DEFAULT (a soft affinity's fallback).
LeaseRequest AsDefault(const LeaseRequest& request) {
  LeaseRequest out = request;
  out.strategy.kind = StrategyKind::kDefault;
  return out;
}

}  // namespace

std::string ToString(const LeaseDecision& decision) {
  if (std::holds_alternative<GrantLocally>(decision)) return "grant";
  if (const auto* spill = std::get_if<SpillBack>(&decision)) {
    return "spill back to " + ShortId(spill->node);
  }
  if (const auto* queue = std::get_if<QueueLocally>(&decision)) {
    return std::string(queue->feasible ? "queue (" : "queue, not yet feasible (") + queue->reason +
           ")";
  }
  return "infeasible (" + std::get<Infeasible>(decision).message + ")";
}

LeaseDecision LeasePolicy::Decide(const LeaseRequest& request, const NodeResources& local,
                                  const ClusterView& view, TimePoint now) const {
  const ResourceShape& shape = request.shape;
  if (request.placed) {
    if (local.FitsNow(shape)) return GrantLocally{};
    if (local.CouldEverFit(shape)) {
      return QueueLocally{true, "placed here by the head: waiting for " + shape.ToString() +
                                    " to be free on this node"};
    }
    return Infeasible{"the head placed " + shape.ToString() +
                      " on a node that can never run it: " +
                      DescribeNode(ShortId(options_.local_node) + " (this node)", local.Total(),
                                   local.labels(), false)};
  }
  if (request.strategy.kind == StrategyKind::kNodeAffinity) {
    return DecideAffinity(request, local, view, now);
  }
  return DecideAmong(request, local, view, now);
}

LeaseDecision LeasePolicy::DecideAffinity(const LeaseRequest& request, const NodeResources& local,
                                          const ClusterView& view, TimePoint now) const {
  const ResourceShape& shape = request.shape;
  const SchedulingStrategy& s = request.strategy;
  std::string target = "node " + s.node.Hex() + " (NodeAffinitySchedulingStrategy, " +
                       (s.soft ? "soft" : "hard") + ")";
  if (s.node == options_.local_node) {
    bool allowed = Allowed(request, options_.local_node, local.labels());
    if (allowed && local.FitsNow(shape)) return GrantLocally{};
    if (!allowed || !local.CouldEverFit(shape)) {
      if (s.soft) return DecideAmong(AsDefault(request), local, view, now);
      return Infeasible{DescribeRequest(request) + " can never run on " + target + ": " +
                        DescribeNode(ShortId(options_.local_node) + " (this node)", local.Total(),
                                     local.labels(), HasLabelConstraints(s))};
    }
    if (s.soft && s.spill_on_unavailable && !request.spilled) {
      return DecideAmong(AsDefault(request), local, view, now);
    }
    if (!s.soft && s.fail_on_unavailable) {
      return Infeasible{target + " has no room for " + shape.ToString() +
                        " now, and _fail_on_unavailable is set"};
    }
    return QueueLocally{true, "waiting for " + shape.ToString() + " to be free on " + target};
  }
  const NodeView* node = FindNode(view, s.node);
  bool fits_total = node != nullptr && node->alive && shape.amounts().FitsIn(node->total) &&
                    Allowed(request, node->id, node->labels);
  if (fits_total && !(s.soft && s.spill_on_unavailable && !shape.amounts().FitsIn(node->available))) {
    return SpillBack{s.node};
  }
  if (s.soft) return DecideAmong(AsDefault(request), local, view, now);
  if (node != nullptr && !node->alive) {
    return Infeasible{target + " is dead: " + DescribeRequest(request) + " cannot run there"};
  }
  if (node != nullptr) {
    return Infeasible{DescribeRequest(request) + " can never run on " + target + ": " +
                      DescribeNode(ShortId(node->id), node->total, node->labels,
                                   HasLabelConstraints(s))};
  }
  TimePoint grace_end = request.waiting_since + options_.infeasible_grace;
  if (now < grace_end) {
    return QueueLocally{false, target + " is not in the cluster view yet; waiting for it to join"};
  }
  return Infeasible{target + " does not exist (no alive node has that id)"};
}

LeaseDecision LeasePolicy::DecideAmong(const LeaseRequest& request, const NodeResources& local,
                                       const ClusterView& view, TimePoint now) const {
  const ResourceShape& shape = request.shape;
  const SchedulingStrategy& s = request.strategy;
  bool local_allowed = Allowed(request, options_.local_node, local.labels());
  bool local_fits = local_allowed && local.FitsNow(shape);
  if (local_fits && request.spilled) return GrantLocally{};

  // The alive candidates with the shape free now; the local node is represented by a null view.
  struct Candidate {
    const NodeView* node;  // nullptr: this node
    NodeId id;
    bool preferred;
    double utilization;
  };
  std::vector<Candidate> fits_now;
  bool feasible = local_allowed && local.CouldEverFit(shape);
  if (local_fits) {
    fits_now.push_back(Candidate{nullptr, options_.local_node,
                                 Preferred(request, options_.local_node, local.labels()),
                                 Utilization(shape, local.Total(), local.Available())});
  }
  for (const NodeView& node : view.nodes) {
    if (node.id == options_.local_node || !node.alive || !Allowed(request, node.id, node.labels)) {
      continue;
    }
    if (shape.amounts().FitsIn(node.total)) feasible = true;
    if (!shape.amounts().FitsIn(node.available)) continue;
    fits_now.push_back(Candidate{&node, node.id, Preferred(request, node.id, node.labels),
                                 Utilization(shape, node.total, node.available)});
  }
  // NodeLabel's soft expressions: their nodes alone when any has the shape free.
  if (std::any_of(fits_now.begin(), fits_now.end(), [](const Candidate& c) { return c.preferred; })) {
    std::erase_if(fits_now, [](const Candidate& c) { return !c.preferred; });
  }

  if (!fits_now.empty()) {
    const Candidate* chosen = nullptr;
    if (s.kind == StrategyKind::kSpread) {
      std::sort(fits_now.begin(), fits_now.end(),
                [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
      chosen = &fits_now[spread_next_++ % fits_now.size()];
    } else if (fits_now.front().node == nullptr &&
               fits_now.front().utilization < options_.spread_threshold) {
      chosen = &fits_now.front();  // pack onto this node while it is below the threshold
    } else {
      // The lowest score (utilization, 0 below the threshold), this node first on a tie, then the
      // most free of the requested resources, then the lowest id.
      std::vector<Amount> best_free;
      double best_score = 0;
      for (const Candidate& c : fits_now) {
        double score = c.utilization < options_.spread_threshold ? 0 : c.utilization;
        if (c.node == nullptr) {
          chosen = &c;
          best_score = score;
          continue;
        }
        std::vector<Amount> free = SpillScore(shape, c.node->available);
        bool better = chosen == nullptr || score < best_score ||
                      (score == best_score && chosen->node != nullptr &&
                       (free > best_free || (free == best_free && c.id < chosen->id)));
        if (better) {
          chosen = &c;
          best_score = score;
          best_free = std::move(free);
        }
      }
    }
    if (chosen->node == nullptr) return GrantLocally{};
    return SpillBack{chosen->id};
  }
  if (!feasible) {
    // A shape no node holds but a node type of the autoscaler does is pending demand.
    for (const NodeView& type : view.node_types) {
      if (Allowed(request, NodeId{}, type.labels) && shape.amounts().FitsIn(type.total)) {
        return QueueLocally{true, "waiting for " + DescribeRequest(request) +
                                      ": no node holds it, the autoscaler's node types do"};
      }
    }
  }
  if (feasible) {
    return QueueLocally{true,
                        "waiting for " + DescribeRequest(request) + ": no node has it free now"};
  }
  TimePoint grace_end = request.waiting_since + options_.infeasible_grace;
  if (now < grace_end) {
    return QueueLocally{
        false,
        "no node can run " + DescribeRequest(request) + " yet; waiting for nodes to join for " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::milliseconds>(grace_end - now).count()) +
            " ms more"};
  }

  bool with_labels = HasLabelConstraints(s);
  std::string message = "no node can ever run " + DescribeRequest(request) + ": " +
                        DescribeNode(ShortId(options_.local_node) + " (this node)", local.Total(),
                                     local.labels(), with_labels);
  size_t named = 1;
  size_t unnamed = 0;
  for (const NodeView& node : view.nodes) {
    if (node.id == options_.local_node || !node.alive) continue;
    if (named == kMaxNodesNamed) {
      ++unnamed;
      continue;
    }
    message += ", " + DescribeNode(ShortId(node.id), node.total, node.labels, with_labels);
    ++named;
  }
  if (unnamed > 0) message += ", and " + std::to_string(unnamed) + " more nodes";
  return Infeasible{std::move(message)};
}

}  // namespace airt::worker::scheduling
