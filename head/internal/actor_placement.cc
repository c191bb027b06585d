#include "head/internal/actor_placement.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>

namespace airt::head::internal {
namespace {

using sched::LabelLookup;
using sched::NodeLabelLookup;
using sched::SchedulingStrategy;
using sched::StrategyKind;

// Amounts are compared in units of 1/10000, as the node's scheduler counts them, so that 0.1 + 0.2
// fits in 0.3 here exactly when it does on the node.
constexpr int64_t kUnitsPerWhole = 10000;
constexpr std::string_view kAcceleratorType = "accelerator_type";
constexpr std::string_view kAcceleratorTypeLabel = "ray.io/accelerator-type";  // Ray's key
// Nodes named in an infeasible message; the rest are counted.
constexpr size_t kMaxNodesNamed = 16;

using Units = std::map<std::string, int64_t, std::less<>>;

int64_t ToUnits(double amount) { return std::llround(amount * kUnitsPerWhole); }

Units ToUnits(const std::vector<Resource>& resources) {
  Units out;
  for (const Resource& r : resources) {
    int64_t units = ToUnits(r.amount);
    if (units > 0) out[r.name] += units;
  }
  return out;
}

int64_t Get(const Units& units, std::string_view name) {
  auto it = units.find(name);
  return it == units.end() ? 0 : it->second;
}

std::string FormatUnits(int64_t units) {
  std::string out = std::to_string(units / kUnitsPerWhole);
  int64_t fraction = units % kUnitsPerWhole;
  if (fraction == 0) return out;
  std::string digits = std::to_string(fraction);
  digits.insert(0, 4 - digits.size(), '0');
  while (digits.back() == '0') digits.pop_back();
  return out + "." + digits;
}

// CPU, GPU, memory, then the others by name: the order the node's ResourceSet::ToString uses.
std::string FormatSet(const Units& units, const std::string& accelerator_type) {
  std::vector<std::string> parts;
  for (std::string_view first : {"CPU", "GPU", "memory"}) {
    if (int64_t n = Get(units, first); n > 0)
      parts.push_back(std::string(first) + ": " + FormatUnits(n));
  }
  for (const auto& [name, n] : units) {
    if (name == "CPU" || name == "GPU" || name == "memory") continue;
    parts.push_back(name + ": " + FormatUnits(n));
  }
  if (!accelerator_type.empty()) {
    parts.push_back(std::string(kAcceleratorType) + ": " + accelerator_type);
  }
  std::string out = "{";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out + "}";
}

std::optional<std::string> LabelOf(const std::vector<Label>& labels, std::string_view key) {
  for (const Label& l : labels) {
    if (l.key == key) return l.value;
  }
  return std::nullopt;
}

bool LabelMatches(const PlacementNode& node, const ActorDemand& demand) {
  if (demand.accelerator_type.empty()) return true;
  return LabelOf(node.labels, kAcceleratorTypeLabel) == demand.accelerator_type;
}

using LabelMap = std::map<std::string, std::string, std::less<>>;

LabelMap ToMap(const std::vector<Label>& labels) {
  LabelMap out;
  for (const Label& l : labels) out[l.key] = l.value;
  return out;
}

// The actor's hard label constraints (label_selector, a NodeLabel strategy's hard expressions).
bool LabelsAllow(const PlacementNode& node, const ActorDemand& demand) {
  const SchedulingStrategy& s = demand.strategy;
  bool node_label = s.kind == StrategyKind::kNodeLabel;
  if (s.label_selector.empty() && (!node_label || s.hard_labels.empty())) return true;
  LabelMap labels = ToMap(node.labels);
  std::string hex = node.id.Hex();
  LabelLookup lookup = NodeLabelLookup(labels, hex);
  return LabelsMatch(s.label_selector, lookup) && (!node_label || LabelsMatch(s.hard_labels, lookup));
}

bool LabelsPrefer(const PlacementNode& node, const ActorDemand& demand) {
  const SchedulingStrategy& s = demand.strategy;
  if (s.kind != StrategyKind::kNodeLabel || s.soft_labels.empty()) return false;
  LabelMap labels = ToMap(node.labels);
  std::string hex = node.id.Hex();
  return LabelsMatch(s.soft_labels, NodeLabelLookup(labels, hex));
}

bool FitsIn(const Units& demand, const Units& capacity) {
  for (const auto& [name, n] : demand) {
    if (n > Get(capacity, name)) return false;
  }
  return true;
}

std::string ShortId(const NodeId& id) { return id.Hex().substr(0, 8); }

std::string DescribeNode(const PlacementNode& node, bool with_labels = false) {
  std::string out = "node " + ShortId(node.id) + " has " + FormatSet(ToUnits(node.total), "");
  if (with_labels) {
    out += " (labels";
    if (node.labels.empty()) out += " none";
    for (size_t i = 0; i < node.labels.size(); ++i) {
      out += (i ? ", " : " ") + node.labels[i].key + "=" + node.labels[i].value;
    }
    return out + ")";
  }
  if (auto type = LabelOf(node.labels, kAcceleratorTypeLabel)) {
    out += " (" + std::string(kAcceleratorType) + " " + *type + ")";
  }
  return out;
}

std::string Infeasible(const ActorDemand& demand, const std::vector<PlacementNode>& nodes,
                       const std::set<NodeId>& avoid) {
  std::string message = "no node can ever run " + DescribeDemand(demand) + ": ";
  const SchedulingStrategy& s = demand.strategy;
  bool with_labels = !s.label_selector.empty() ||
                     (s.kind == StrategyKind::kNodeLabel && !s.hard_labels.empty());
  size_t named = 0, unnamed = 0;
  for (const PlacementNode& node : nodes) {
    if (!node.alive) continue;
    if (named == kMaxNodesNamed) {
      ++unnamed;
      continue;
    }
    message += (named++ ? ", " : "") + DescribeNode(node, with_labels);
  }
  if (named == 0) message += "no node is alive";
  if (unnamed > 0) message += ", and " + std::to_string(unnamed) + " more nodes";
  if (!avoid.empty()) {
    message += "; refused by node";
    for (const NodeId& id : avoid) message += " " + ShortId(id);
  }
  return message;
}

// What is free on `node` now: its heartbeat, but no more than its totals less what the head's
// placed actors hold (the heartbeat may predate them).
Units FreeNow(const PlacementNode& node) {
  Units total = ToUnits(node.total);
  Units reported = ToUnits(node.available);
  Units held = ToUnits(node.held);
  Units free;
  for (const auto& [name, n] : total) {
    int64_t left = std::max<int64_t>(0, n - Get(held, name));
    free[name] = std::min(Get(reported, name), left);
  }
  return free;
}

// The largest share of any requested resource in use once `demand` is placed on the node.
double UtilizationAfter(const Units& demand, const Units& total, const Units& free) {
  double worst = 0;
  for (const auto& [name, n] : demand) {
    int64_t capacity = Get(total, name);
    if (capacity <= 0) continue;
    double used = static_cast<double>(capacity - Get(free, name) + n);
    worst = std::max(worst, used / static_cast<double>(capacity));
  }
  return worst;
}

}  // namespace

std::string DescribeDemand(const ActorDemand& demand) {
  std::string out = FormatSet(ToUnits(demand.resources), demand.accelerator_type);
  const SchedulingStrategy& s = demand.strategy;
  if (!s.label_selector.empty()) out += " with label_selector {" + ToString(s.label_selector) + "}";
  if (s.kind == StrategyKind::kNodeLabel && !s.hard_labels.empty()) {
    out += " with node labels {" + ToString(s.hard_labels) + "}";
  }
  return out;
}

namespace {

// Step 0 of DecidePlacement; nullopt: place it as any other actor.
std::optional<PlacementDecision> DecideAffinity(const ActorDemand& demand,
                                                const std::vector<PlacementNode>& nodes,
                                                const std::set<NodeId>& avoid, bool grace_over) {
  const SchedulingStrategy& s = demand.strategy;
  std::string target = "node " + s.node.Hex() + " (NodeAffinitySchedulingStrategy, " +
                       (s.soft ? "soft" : "hard") + ")";
  Units wanted = ToUnits(demand.resources);
  const PlacementNode* node = nullptr;
  for (const PlacementNode& n : nodes) {
    if (n.id == s.node) node = &n;
  }
  if (node != nullptr && node->alive && avoid.count(node->id) == 0 &&
      LabelMatches(*node, demand) && LabelsAllow(*node, demand) &&
      FitsIn(wanted, ToUnits(node->total))) {
    bool free_now = FitsIn(wanted, FreeNow(*node));
    if (free_now || (!s.soft && !s.fail_on_unavailable) || (s.soft && !s.spill_on_unavailable)) {
      return PlaceOn{node->id};
    }
    if (!s.soft) {
      return CannotPlace{target + " has no room for " + DescribeDemand(demand) +
                         " now, and _fail_on_unavailable is set"};
    }
    return std::nullopt;
  }
  if (s.soft) return std::nullopt;
  if (node == nullptr) {
    if (!grace_over) return WaitForNodes{target + " is not registered yet; waiting for it"};
    return CannotPlace{target + " does not exist (no node has that id)"};
  }
  if (!node->alive) return CannotPlace{target + " is dead: the actor cannot be placed there"};
  if (avoid.count(node->id) != 0) return CannotPlace{target + " refused the actor"};
  return CannotPlace{DescribeDemand(demand) + " can never run on " + target + ": " +
                     DescribeNode(*node, true)};
}

}  // namespace

PlacementDecision DecidePlacement(const ActorDemand& demand,
                                  const std::vector<PlacementNode>& nodes,
                                  const std::set<NodeId>& avoid, bool grace_over) {
  if (demand.strategy.kind == StrategyKind::kNodeAffinity) {
    if (auto decided = DecideAffinity(demand, nodes, avoid, grace_over)) return *decided;
  }
  Units wanted = ToUnits(demand.resources);
  bool spread = demand.strategy.kind == StrategyKind::kSpread;
  // (not preferred, fits now first, then for SPREAD the fewest actors before utilization,
  // registration order): the smallest wins.
  using Score = std::tuple<bool, bool, double, size_t, size_t>;
  std::optional<Score> best_score;
  const PlacementNode* best = nullptr;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const PlacementNode& node = nodes[i];
    if (!node.alive || avoid.count(node.id) != 0 || !LabelMatches(node, demand) ||
        !LabelsAllow(node, demand)) {
      continue;
    }
    Units total = ToUnits(node.total);
    if (!FitsIn(wanted, total)) continue;
    Units free = FreeNow(node);
    double utilization = UtilizationAfter(wanted, total, free);
    Score score{!LabelsPrefer(node, demand), !FitsIn(wanted, free),
                spread ? static_cast<double>(node.actors) : utilization,
                spread ? static_cast<size_t>(utilization * 1e6) : node.actors, i};
    if (!best_score || score < *best_score) {
      best_score = score;
      best = &node;
    }
  }
  if (best != nullptr) return PlaceOn{best->id};
  if (!grace_over) {
    return WaitForNodes{"no node can run " + DescribeDemand(demand) +
                        " yet; waiting for nodes to join"};
  }
  return CannotPlace{Infeasible(demand, nodes, avoid)};
}

std::vector<PlacementNode> PlacementNodes(const std::vector<NodeView>& view,
                                          const std::vector<ActorRecord>& actors,
                                          const ActorId& placing) {
  std::vector<PlacementNode> nodes;
  std::map<NodeId, size_t> index;
  for (const NodeView& v : view) {
    index[v.info.id] = nodes.size();
    // A draining node takes no new actors: placement sees it as gone.
    nodes.push_back(PlacementNode{v.info.id, v.alive && !v.draining, v.info.total,
                                  v.load.available, v.info.labels, {}, 0});
  }
  for (const ActorRecord& actor : actors) {
    if (actor.state == ActorState::kDead || !actor.node || actor.id == placing) continue;
    auto it = index.find(*actor.node);
    if (it == index.end()) continue;
    PlacementNode& node = nodes[it->second];
    ++node.actors;
    node.held.insert(node.held.end(), actor.resources.begin(), actor.resources.end());
  }
  return nodes;
}

}  // namespace airt::head::internal
