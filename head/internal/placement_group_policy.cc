#include "head/internal/placement_group_policy.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "head/internal/actor_placement.h"

namespace airt::head::internal {
namespace {

constexpr int64_t kUnitsPerWhole = 10000;

int64_t Get(const BundleUnits& units, std::string_view name) {
  auto it = units.find(name);
  return it == units.end() ? 0 : it->second;
}

bool Fits(const BundleUnits& demand, const BundleUnits& capacity) {
  for (const auto& [name, n] : demand) {
    if (n > Get(capacity, name)) return false;
  }
  return true;
}

void Take(BundleUnits& from, const BundleUnits& demand) {
  for (const auto& [name, n] : demand) from[name] -= n;
}

// The largest share of any resource of `demand` in use on the node after placing it.
double UtilizationAfter(const BundleUnits& demand, const BundleNode& node, const BundleUnits& free) {
  double worst = 0;
  for (const auto& [name, n] : demand) {
    int64_t capacity = Get(node.total, name);
    if (capacity <= 0) continue;
    double used = static_cast<double>(capacity - Get(free, name) + n);
    worst = std::max(worst, used / static_cast<double>(capacity));
  }
  return worst;
}

// Among the nodes whose free fits `demand` (and `allowed` says yes), the one left fullest
// (`fullest`) or emptiest; nullopt when none fits.
template <typename Allowed>
std::optional<size_t> Choose(const BundleUnits& demand, const std::vector<BundleNode>& nodes,
                             const std::vector<BundleUnits>& free, bool fullest, Allowed allowed) {
  std::optional<size_t> best;
  double best_score = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!allowed(i) || !Fits(demand, free[i])) continue;
    double score = UtilizationAfter(demand, nodes[i], free[i]);
    if (!fullest) score = -score;
    if (!best || score > best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

// Kuhn's augmenting paths: can bundle b take a node, moving others along?
bool Augment(size_t b, const std::vector<std::vector<bool>>& fits, std::vector<int>& node_of,
             std::vector<int>& bundle_on, std::vector<bool>& seen) {
  for (size_t n = 0; n < fits[b].size(); ++n) {
    if (!fits[b][n] || seen[n]) continue;
    seen[n] = true;
    if (bundle_on[n] < 0 || Augment(bundle_on[n], fits, node_of, bundle_on, seen)) {
      bundle_on[n] = static_cast<int>(b);
      node_of[b] = static_cast<int>(n);
      return true;
    }
  }
  return false;
}

}  // namespace

BundleUnits ToBundleUnits(const std::vector<Resource>& resources) {
  BundleUnits out;
  for (const Resource& r : resources) {
    int64_t units = std::llround(r.amount * kUnitsPerWhole);
    if (units > 0) out[r.name] += units;
  }
  return out;
}

std::string DescribeBundle(const std::vector<Resource>& bundle) {
  return DescribeDemand(ActorDemand{bundle, ""});
}

BundleDecision DecideBundles(PlacementStrategy strategy,
                             const std::vector<std::vector<Resource>>& bundles,
                             const std::vector<BundleNode>& nodes,
                             const std::vector<sched::LabelSelector>& selectors) {
  // matches[b][n]: bundle b's selector allows node n.
  std::vector<std::vector<bool>> matches(bundles.size(), std::vector<bool>(nodes.size(), true));
  for (size_t b = 0; b < bundles.size() && b < selectors.size(); ++b) {
    for (size_t n = 0; n < nodes.size(); ++n) {
      std::string hex = nodes[n].id.Hex();
      matches[b][n] = sched::LabelsMatch(selectors[b], sched::NodeLabelLookup(nodes[n].labels, hex));
    }
  }
  auto selector_of = [&](size_t b) {
    return b < selectors.size() && !selectors[b].empty()
               ? " with bundle_label_selector {" + sched::ToString(selectors[b]) + "}"
               : std::string();
  };
  auto all_match = [&](size_t n) {
    for (size_t b = 0; b < bundles.size(); ++b) {
      if (!matches[b][n]) return false;
    }
    return true;
  };
  std::vector<BundleUnits> demand;
  BundleUnits sum;
  std::map<std::string, double> sum_amounts;
  for (const auto& b : bundles) {
    demand.push_back(ToBundleUnits(b));
    for (const auto& [name, n] : demand.back()) sum[name] += n;
    for (const Resource& r : b) sum_amounts[r.name] += r.amount;
  }
  std::vector<Resource> sum_resources;
  for (const auto& [name, amount] : sum_amounts) sum_resources.push_back({name, amount});
  // Never: a bundle (STRICT_PACK: their sum) bigger than every node's totals.
  auto fits_some_total = [&](const BundleUnits& d, const std::function<bool(size_t)>& allowed) {
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (allowed(n) && Fits(d, nodes[n].total)) return true;
    }
    return false;
  };
  if (strategy == PlacementStrategy::kStrictPack && !fits_some_total(sum, all_match)) {
    return BundlesWait{"STRICT_PACK: the bundles' sum " + DescribeBundle(sum_resources) +
                           " is bigger than every alive node's totals",
                       true};
  }
  for (size_t i = 0; i < bundles.size(); ++i) {
    if (!fits_some_total(demand[i], [&](size_t n) { return bool(matches[i][n]); })) {
      std::string reason = "bundle " + std::to_string(i) + " " + DescribeBundle(bundles[i]);
      if (selector_of(i).empty()) {
        reason += " is bigger than every alive node's totals";
      } else {
        reason += selector_of(i) + " fits no alive node whose labels match:";
        for (const BundleNode& n : nodes) {
          reason += " node " + n.id.Hex().substr(0, 8) + " (labels";
          if (n.labels.empty()) reason += " none";
          bool first = true;
          for (const auto& [key, value] : n.labels) {
            reason += (first ? " " : ", ") + key + "=" + value;
            first = false;
          }
          reason += ")";
        }
      }
      return BundlesWait{reason, true};
    }
  }
  std::vector<BundleUnits> free;
  for (const BundleNode& n : nodes) free.push_back(n.free);

  if (strategy == PlacementStrategy::kStrictPack || strategy == PlacementStrategy::kPack) {
    if (std::optional<size_t> one = Choose(sum, nodes, free, /*fullest=*/true, all_match)) {
      return BundlesOn{std::vector<NodeId>(bundles.size(), nodes[*one].id)};
    }
    if (strategy == PlacementStrategy::kStrictPack) {
      return BundlesWait{"STRICT_PACK: no node has all the bundles free now", false};
    }
  }
  if (strategy == PlacementStrategy::kStrictSpread) {
    if (bundles.size() > nodes.size()) {
      return BundlesWait{"STRICT_SPREAD: " + std::to_string(bundles.size()) +
                             " bundles need as many nodes; " + std::to_string(nodes.size()) +
                             " are alive",
                         false};
    }
    std::vector<std::vector<bool>> fits(bundles.size(), std::vector<bool>(nodes.size()));
    for (size_t b = 0; b < bundles.size(); ++b) {
      for (size_t n = 0; n < nodes.size(); ++n) {
        fits[b][n] = matches[b][n] && Fits(demand[b], free[n]);
      }
    }
    std::vector<int> node_of(bundles.size(), -1), bundle_on(nodes.size(), -1);
    for (size_t b = 0; b < bundles.size(); ++b) {
      std::vector<bool> seen(nodes.size(), false);
      if (!Augment(b, fits, node_of, bundle_on, seen)) {
        return BundlesWait{"STRICT_SPREAD: no node of its own has bundle " + std::to_string(b) +
                               " " + DescribeBundle(bundles[b]) + " free now",
                           false};
      }
    }
    BundlesOn on;
    for (int n : node_of) on.nodes.push_back(nodes[n].id);
    return on;
  }
  // PACK (not on one node) and SPREAD: bundle by bundle.
  BundlesOn on;
  std::vector<size_t> uses(nodes.size(), 0);
  for (size_t b = 0; b < bundles.size(); ++b) {
    std::optional<size_t> chosen;
    if (strategy == PlacementStrategy::kPack) {
      chosen = Choose(demand[b], nodes, free, true,
                      [&](size_t i) { return uses[i] > 0 && matches[b][i]; });
      if (!chosen) {
        chosen = Choose(demand[b], nodes, free, true, [&](size_t i) { return bool(matches[b][i]); });
      }
    } else {
      chosen = Choose(demand[b], nodes, free, false,
                      [&](size_t i) { return uses[i] == 0 && matches[b][i]; });
      if (!chosen) {
        size_t fewest = SIZE_MAX;
        for (size_t i = 0; i < nodes.size(); ++i) {
          if (matches[b][i] && Fits(demand[b], free[i]) && uses[i] < fewest) {
            fewest = uses[i];
            chosen = i;
          }
        }
      }
    }
    if (!chosen) {
      return BundlesWait{std::string(StrategyName(strategy)) + ": bundle " + std::to_string(b) +
                             " " + DescribeBundle(bundles[b]) + " fits no node's free resources now",
                         false};
    }
    Take(free[*chosen], demand[b]);
    ++uses[*chosen];
    on.nodes.push_back(nodes[*chosen].id);
  }
  return on;
}

}  // namespace airt::head::internal
