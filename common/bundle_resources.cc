#include "common/bundle_resources.h"

namespace airt {

std::string BundleResourceName(std::string_view name, int64_t index, std::string_view group_hex) {
  std::string out(name);
  out += "_group_";
  if (index >= 0) out += std::to_string(index) + "_";
  out += group_hex;
  return out;
}

std::map<std::string, double> CommittedBundleResources(
    std::string_view group_hex, int64_t index, const std::map<std::string, double>& resources) {
  std::map<std::string, double> out;
  for (const auto& [name, amount] : resources) {
    if (amount <= 0) continue;
    out[BundleResourceName(name, index, group_hex)] += amount;
    out[BundleResourceName(name, -1, group_hex)] += amount;
  }
  out[BundleResourceName("bundle", index, group_hex)] += kBundleUnits;
  out[BundleResourceName("bundle", -1, group_hex)] += kBundleUnits;
  return out;
}

std::map<std::string, double> ResourcesInBundle(std::string_view group_hex, int64_t index,
                                                const std::map<std::string, double>& resources) {
  std::map<std::string, double> out;
  for (const auto& [name, amount] : resources) {
    if (amount <= 0) continue;
    out[BundleResourceName(name, -1, group_hex)] += amount;
    if (index >= 0) out[BundleResourceName(name, index, group_hex)] += amount;
  }
  out[BundleResourceName("bundle", -1, group_hex)] += kBundleSliver;
  if (index >= 0) out[BundleResourceName("bundle", index, group_hex)] += kBundleSliver;
  return out;
}

bool IsBundleResourceOf(std::string_view name, std::string_view group_hex) {
  if (name.size() <= group_hex.size() + 1) return false;
  if (name.substr(name.size() - group_hex.size()) != group_hex) return false;
  if (name[name.size() - group_hex.size() - 1] != '_') return false;
  return name.find("_group_") != std::string_view::npos;
}

}  // namespace airt
