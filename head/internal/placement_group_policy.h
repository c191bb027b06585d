// Where the bundles of a placement group go (Ray's strategies), decided from the head's view of the
// alive nodes. Pure and deterministic: tests drive it with several nodes directly.
//  - STRICT_PACK: every bundle on one node (the node that fits them all and is left fullest).
//  - PACK: on one node when one fits them all; else bundle by bundle, on a node used already
//    when it has room, else on the fitting node left fullest.
//  - STRICT_SPREAD: each bundle on a node of its own (an exact matching of bundles to nodes).
//  - SPREAD: bundle by bundle on a node not used yet when one fits (the least loaded), else on the
//    fitting node used least.
// Free is what a node can give now (the head's estimate: heartbeat, less reservations since).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "common/ids.h"
#include "head/internal/placement_group_table.h"

namespace airt::head::internal {

// Amounts in units of 1/10000, as the node's scheduler counts them.
using BundleUnits = std::map<std::string, int64_t, std::less<>>;
BundleUnits ToBundleUnits(const std::vector<Resource>& resources);

struct BundleNode {
  NodeId id;
  BundleUnits total;
  BundleUnits free;
  std::map<std::string, std::string, std::less<>> labels;  // for bundle_label_selector
};

struct BundlesOn {
  std::vector<NodeId> nodes;  // by bundle index
};
// No placement now; `infeasible` when no set of these nodes could hold it even empty (a bundle,
// or STRICT_PACK's sum, bigger than every node's totals).
struct BundlesWait {
  std::string reason;
  bool infeasible = false;
};
using BundleDecision = std::variant<BundlesOn, BundlesWait>;

// `nodes`: the alive ones, in registration order (the order breaks ties). `selectors[i]` (when
// there) limits bundle i to the nodes whose labels match it (Ray's bundle_label_selector); a
// bundle no alive node's labels and totals allow is infeasible, its reason naming the selector.
BundleDecision DecideBundles(PlacementStrategy strategy,
                             const std::vector<std::vector<Resource>>& bundles,
                             const std::vector<BundleNode>& nodes,
                             const std::vector<sched::LabelSelector>& selectors = {});

// "{CPU: 1, GPU: 1}" with the node scheduler's naming order.
std::string DescribeBundle(const std::vector<Resource>& bundle);

}  // namespace airt::head::internal
