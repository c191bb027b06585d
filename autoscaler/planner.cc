#include "autoscaler/planner.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <string_view>

#include "common/scheduling_strategy.h"

namespace airt::autoscaler {
namespace {

constexpr double kEpsilon = 1e-9;

struct Slot {
  size_t node = 0;  // index into the nodes given; SIZE_MAX for a node this plan launches
  std::string type;
  Resources free;
  std::map<std::string, std::string> labels;
  bool used = false;  // the demand placed something on it
};

bool Fits(const Resources& shape, const Resources& free) {
  for (const auto& [name, amount] : shape) {
    if (amount <= 0) continue;
    auto it = free.find(name);
    if (it == free.end() || it->second + kEpsilon < amount) return false;
  }
  return true;
}

// `want` is a Ray label_selector dict ("v", "!v", "in(a,b)", "!in(a,b)"), read by the parser
// tasks' label_selector use (sched::ParseLabelSelector); one it refuses matches nothing.
bool LabelsMatch(const std::map<std::string, std::string>& want,
                 const std::map<std::string, std::string>& have) {
  if (want.empty()) return true;
  Result<sched::LabelSelector> selector = sched::ParseLabelSelector(want);
  if (!selector.ok()) return false;
  return sched::LabelsMatch(*selector, [&have](std::string_view key) -> const std::string* {
    auto it = have.find(std::string(key));
    return it == have.end() ? nullptr : &it->second;
  });
}

void Take(const Resources& shape, Resources& free) {
  for (const auto& [name, amount] : shape) free[name] -= amount;
}

Resources Sum(const std::vector<Resources>& bundles) {
  Resources sum;
  for (const Resources& bundle : bundles) {
    for (const auto& [name, amount] : bundle) sum[name] += amount;
  }
  return sum;
}

// A node type's labels as nodes of it carry them (accelerator_type also under Ray's key).
std::map<std::string, std::string> TypeLabels(const NodeTypeConfig& type) {
  std::map<std::string, std::string> labels = type.labels;
  if (auto it = labels.find("accelerator_type"); it != labels.end()) {
    labels.emplace("ray.io/accelerator-type", it->second);
  }
  return labels;
}

class Planner {
 public:
  Planner(const ClusterConfig& config, const std::vector<NodeNow>& nodes)
      : config_(&config), nodes_(&nodes) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      const NodeNow& node = nodes[i];
      slots_.push_back({i, node.type, node.launching ? node.total : node.available,
                        node.labels, false});
      totals_.push_back({i, node.type, node.total, node.labels, false});
      if (!node.type.empty() && !node.head_node) {
        counts_[node.type]++;
        workers_++;
      }
    }
  }

  void MinWorkers() {
    for (const auto& [name, type] : config_->node_types) {
      while (counts_[name] < type.min_workers && CanAdd(name)) {
        Add(name, "min_workers " + std::to_string(type.min_workers));
      }
    }
  }

  void Shapes(const std::vector<ShapeDemand>& shapes) {
    std::vector<const ShapeDemand*> order;
    for (const ShapeDemand& shape : shapes) order.push_back(&shape);
    std::stable_sort(order.begin(), order.end(), [](const ShapeDemand* a, const ShapeDemand* b) {
      return Weight(a->resources) > Weight(b->resources);
    });
    for (const ShapeDemand* shape : order) {
      for (uint32_t i = 0; i < shape->count; ++i) {
        if (!PlaceOne(slots_, shape->resources, shape->labels, nullptr,
                      "for " + ShapeText(shape->resources) + " (" + shape->source + ")")) {
          break;  // the rest of this shape would fail alike
        }
      }
    }
  }

  void Groups(const std::vector<GroupDemand>& groups) {
    for (const GroupDemand& group : groups) {
      Planner trial = *this;  // whole or nothing
      std::string reason = "for placement group " + group.id.substr(0, 8);
      bool placed = true;
      if (group.strategy == GroupStrategy::kStrictPack) {
        placed = trial.PlaceOne(trial.slots_, Sum(group.bundles), {}, nullptr,
                                reason + " (STRICT_PACK)");
      } else {
        std::set<size_t> used;  // slot indices this group took: STRICT_SPREAD's distinct nodes
        bool spread = group.strategy == GroupStrategy::kStrictSpread;
        for (const Resources& bundle : group.bundles) {
          if (!trial.PlaceOne(trial.slots_, bundle, {}, spread ? &used : nullptr, reason)) {
            placed = false;
            break;
          }
        }
      }
      if (placed) {
        *this = std::move(trial);
      } else {
        // What the trial found out about limits and feasibility still holds.
        for (std::string& note : trial.plan_.infeasible) NoteOnce(plan_.infeasible, note);
        for (std::string& note : trial.plan_.held_by_limits) NoteOnce(plan_.held_by_limits, note);
      }
    }
  }

  void Requested(const std::vector<ShapeDemand>& requested) {
    for (const ShapeDemand& shape : requested) {
      for (uint32_t i = 0; i < shape.count; ++i) {
        if (!PlaceOne(totals_, shape.resources, shape.labels, nullptr,
                      "for " + ShapeText(shape.resources) + " (request_resources)")) {
          break;
        }
      }
    }
  }

  void IdleStops() {
    int64_t timeout = config_->idle_timeout_ms();
    for (size_t i = 0; i < nodes_->size(); ++i) {
      const NodeNow& node = (*nodes_)[i];
      if (node.type.empty() || node.head_node || node.launching || node.idle_ms <= 0) continue;
      if (node.idle_ms < timeout || slots_[i].used || totals_[i].used) continue;
      auto type = config_->node_types.find(node.type);
      uint32_t min = type == config_->node_types.end() ? 0 : type->second.min_workers;
      if (counts_[node.type] <= min) continue;
      counts_[node.type]--;
      workers_--;
      char reason[128];
      std::snprintf(reason, sizeof(reason), "idle for %.1f s (idle_timeout_minutes %g)",
                    node.idle_ms / 1000.0, config_->idle_timeout_minutes);
      plan_.stops.push_back({node.id, node.type, reason});
    }
  }

  Plan Take() { return std::move(plan_); }

 private:
  static double Weight(const Resources& resources) {
    double weight = 0;
    for (const auto& [name, amount] : resources) {
      weight += name == "GPU" ? amount * 1000 : (name == "memory" ? 0 : amount);
    }
    return weight;
  }

  static void NoteOnce(std::vector<std::string>& notes, const std::string& note) {
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
  }

  bool CanAdd(const std::string& type) {
    auto it = config_->node_types.find(type);
    return it != config_->node_types.end() && counts_[type] < it->second.max_workers &&
           workers_ < config_->max_workers;
  }

  void Add(const std::string& type, const std::string& reason) {
    const NodeTypeConfig& config = config_->node_types.at(type);
    counts_[type]++;
    workers_++;
    Resources resources(config.resources.begin(), config.resources.end());
    slots_.push_back({SIZE_MAX, type, resources, TypeLabels(config), false});
    totals_.push_back({SIZE_MAX, type, resources, TypeLabels(config), false});
    bool found = false;
    for (Launch& launch : plan_.launches) {
      if (launch.type != type) continue;
      launch.count++;
      if (launch.reason.find(reason) == std::string::npos) launch.reason += "; " + reason;
      found = true;
    }
    if (!found) plan_.launches.push_back({type, 1, reason});
  }

  // Fits one bundle onto `pool` (a slot not in `avoid`), launching a node when none has room.
  // false, with a note, when no type holds it or the limits stop a launch.
  bool PlaceOne(std::vector<Slot>& pool, const Resources& shape,
                const std::map<std::string, std::string>& labels, std::set<size_t>* avoid,
                const std::string& reason) {
    for (size_t i = 0; i < pool.size(); ++i) {
      if (avoid != nullptr && avoid->count(i) > 0) continue;
      if (Fits(shape, pool[i].free) && LabelsMatch(labels, pool[i].labels)) {
        ::airt::autoscaler::Take(shape, pool[i].free);
        pool[i].used = true;
        if (avoid != nullptr) avoid->insert(i);
        return true;
      }
    }
    // The best type: holds it, and wastes least (no GPUs for a shape without GPUs, then the
    // fewest resources), by name on a tie.
    std::string best, held;
    double best_score = 0;
    for (const auto& [name, type] : config_->node_types) {
      Resources total(type.resources.begin(), type.resources.end());
      if (!Fits(shape, total) || !LabelsMatch(labels, TypeLabels(type))) continue;
      if (!CanAdd(name)) {
        held = name;
        continue;
      }
      double score = Weight(total);
      if (best.empty() || score < best_score) best = name, best_score = score;
    }
    std::string text = ShapeText(shape);
    for (const auto& [key, value] : labels) text += " with " + key + "=" + value;
    if (best.empty()) {
      bool an_existing_node_holds = false;
      for (const NodeNow& node : *nodes_) {
        an_existing_node_holds |= Fits(shape, node.total) && LabelsMatch(labels, node.labels);
      }
      if (!held.empty()) {
        NoteOnce(plan_.held_by_limits,
                 text + ": max_workers reached (node type " + held + " or the cluster's " +
                     std::to_string(config_->max_workers) + ")");
      } else if (!an_existing_node_holds) {
        NoteOnce(plan_.infeasible, text + ": no node type holds it");
      }
      return false;
    }
    Add(best, reason);
    // The new node is the last of both pools; place the bundle on it in `pool`.
    pool.back().used = true;
    ::airt::autoscaler::Take(shape, pool.back().free);
    if (avoid != nullptr) avoid->insert(pool.size() - 1);
    return true;
  }

  const ClusterConfig* config_;
  const std::vector<NodeNow>* nodes_;
  std::vector<Slot> slots_;   // free resources: tasks, actors, groups
  std::vector<Slot> totals_;  // totals: request_resources
  std::map<std::string, uint32_t> counts_;  // worker nodes per type, launching ones included
  uint32_t workers_ = 0;
  Plan plan_;
};

}  // namespace

std::string ShapeText(const Resources& resources) {
  std::string text = "{";
  for (const auto& [name, amount] : resources) {
    if (text.size() > 1) text += ", ";
    char value[32];
    std::snprintf(value, sizeof(value), "%g", amount);
    text += name + ": " + value;
  }
  return text + "}";
}

Plan Decide(const ClusterConfig& config, const std::vector<NodeNow>& nodes, const Demand& demand) {
  Planner planner(config, nodes);
  planner.MinWorkers();
  planner.Groups(demand.groups);
  planner.Shapes(demand.shapes);
  planner.Requested(demand.requested);
  planner.IdleStops();
  return planner.Take();
}

}  // namespace airt::autoscaler
