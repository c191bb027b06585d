// The names a placement group's bundle resources take on their node, as Ray formats them: a bundle
// of {CPU: 2} with index 0 of group G becomes "CPU_group_0_<G hex>" (usable only by work scheduled
// into bundle 0) and "CPU_group_<G hex>" (by work scheduled into any bundle of G), and every bundle
// adds "bundle_group_<i>_<G hex>" and "bundle_group_<G hex>" (kBundleUnits each), which work that
// asks for no resources takes a sliver of, so that it still runs on its bundle's node. The node,
// the head and the clients all name them through these functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace airt {

// What a bundle adds of "bundle_group_..." per bundle, and what one lease takes of it.
inline constexpr double kBundleUnits = 1000;
inline constexpr double kBundleSliver = 0.001;

// "<name>_group_<index>_<group hex>"; index < 0: "<name>_group_<group hex>".
std::string BundleResourceName(std::string_view name, int64_t index, std::string_view group_hex);

// The resources bundle `index` of `group_hex` adds to its node once committed: each of
// `resources` (zero amounts left out) under its indexed and its wildcard name, and the bundle
// markers.
std::map<std::string, double> CommittedBundleResources(
    std::string_view group_hex, int64_t index, const std::map<std::string, double>& resources);

// What work scheduled into group `group_hex` asks for instead of `resources`: bundle `index`'s
// names (index >= 0) and the wildcard ones, or the wildcard ones only (index < 0: any bundle).
std::map<std::string, double> ResourcesInBundle(std::string_view group_hex, int64_t index,
                                                const std::map<std::string, double>& resources);

// Whether `name` is a bundle resource of group `group_hex` (any index, wildcard or marker).
bool IsBundleResourceOf(std::string_view name, std::string_view group_hex);

}  // namespace airt
