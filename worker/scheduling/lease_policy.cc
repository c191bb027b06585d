// LeasePolicy: grant here, spill back, queue, or infeasible.
#include <string>
#include <vector>

#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling {
namespace {

// Nodes named in an Infeasible message; the rest are counted.
constexpr size_t kMaxNodesNamed = 16;

bool LabelMatches(const Labels& labels, const ResourceShape& shape) {
  if (shape.accelerator_type().empty()) return true;
  auto it = labels.find(kAcceleratorTypeLabel);
  return it != labels.end() && it->second == shape.accelerator_type();
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

std::string DescribeNode(std::string_view name, const ResourceSet& total, const Labels& labels) {
  std::string out = "node " + std::string(name) + " has " + total.ToString();
  auto it = labels.find(kAcceleratorTypeLabel);
  if (it != labels.end()) out += " (" + std::string(kAcceleratorType) + " " + it->second + ")";
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
  if (local.FitsNow(shape)) return GrantLocally{};
  if (request.placed) {
    if (local.CouldEverFit(shape)) {
      return QueueLocally{true, "placed here by the head: waiting for " + shape.ToString() +
                                    " to be free on this node"};
    }
    return Infeasible{
        "the head placed " + shape.ToString() + " on a node that can never run it: " +
        DescribeNode(ShortId(options_.local_node) + " (this node)", local.Total(), local.labels())};
  }

  const NodeView* best = nullptr;
  std::vector<Amount> best_score;
  bool feasible = local.CouldEverFit(shape);
  for (const NodeView& node : view.nodes) {
    if (node.id == options_.local_node || !node.alive || !LabelMatches(node.labels, shape)) {
      continue;
    }
    if (shape.amounts().FitsIn(node.total)) feasible = true;
    if (!shape.amounts().FitsIn(node.available)) continue;
    std::vector<Amount> score = SpillScore(shape, node.available);
    if (best == nullptr || score > best_score || (score == best_score && node.id < best->id)) {
      best = &node;
      best_score = std::move(score);
    }
  }
  if (best != nullptr) return SpillBack{best->id};
  if (!feasible) {
    for (const NodeView& type : view.node_types) {
      if (LabelMatches(type.labels, shape) && shape.amounts().FitsIn(type.total)) {
        return QueueLocally{true, "waiting for " + shape.ToString() +
                                      ": no node holds it, the autoscaler's node types do"};
      }
    }
  }
  if (feasible) {
    return QueueLocally{true, "waiting for " + shape.ToString() + ": no node has it free now"};
  }
  TimePoint grace_end = request.waiting_since + options_.infeasible_grace;
  if (now < grace_end) {
    return QueueLocally{
        false,
        "no node can run " + shape.ToString() + " yet; waiting for nodes to join for " +
            std::to_string(
                std::chrono::duration_cast<std::chrono::milliseconds>(grace_end - now).count()) +
            " ms more"};
  }

  std::string message =
      "no node can ever run " + shape.ToString() + ": " +
      DescribeNode(ShortId(options_.local_node) + " (this node)", local.Total(), local.labels());
  size_t named = 1;
  size_t unnamed = 0;
  for (const NodeView& node : view.nodes) {
    if (node.id == options_.local_node || !node.alive) continue;
    if (named == kMaxNodesNamed) {
      ++unnamed;
      continue;
    }
    message += ", " + DescribeNode(ShortId(node.id), node.total, node.labels);
    ++named;
  }
  if (unnamed > 0) message += ", and " + std::to_string(unnamed) + " more nodes";
  return Infeasible{std::move(message)};
}

}  // namespace airt::worker::scheduling
