// NodeService's placement-group calls: the edge of LeaseManager's bundle reservations.
#include <map>
#include <set>
#include <string>

#include "common/rpc_status.h"
#include "worker/internal/node_service.h"

namespace airt::worker {
namespace {

constexpr size_t kMaxBundles = 4096;

}  // namespace

Result<PlacementGroupId> ParseGroupId(capnp::Data::Reader bytes) {
  Result<PlacementGroupId> id = PlacementGroupId::FromBinary(
      std::string_view(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
  if (!id.ok()) return InvalidArgument("groupId: " + id.status().message());
  return id;
}

Result<std::vector<BundleAsk>> ParseBundles(capnp::List<proto::BundleSpec>::Reader bundles) {
  if (bundles.size() > kMaxBundles) {
    return InvalidArgument("bundles: " + std::to_string(bundles.size()) +
                           " entries, more than the " + std::to_string(kMaxBundles) + " allowed");
  }
  std::vector<BundleAsk> out;
  std::set<uint32_t> seen;
  for (size_t i = 0; i < bundles.size(); ++i) {
    std::string field = "bundles[" + std::to_string(i) + "]";
    uint32_t index = bundles[i].getIndex();
    if (index >= kMaxBundles || !seen.insert(index).second) {
      return InvalidArgument(field + ".index: " + std::to_string(index) +
                             " is out of range or listed twice");
    }
    auto resources = bundles[i].getResources();
    if (resources.size() > kMaxShapeResources) {
      return InvalidArgument(field + ".resources: too many entries");
    }
    std::map<std::string, double> amounts;
    for (auto r : resources) {
      std::string name(r.getName().cStr(), r.getName().size());
      if (name.find('\0') != std::string::npos || !amounts.emplace(name, r.getAmount()).second) {
        return InvalidArgument(field + ".resources: '" + name + "' holds a NUL or is named twice");
      }
    }
    Result<worker::scheduling::ResourceSet> set =
        worker::scheduling::ResourceSet::FromDoubles(amounts);
    if (!set.ok()) return InvalidArgument(field + ".resources: " + set.status().message());
    out.push_back(BundleAsk{index, std::move(*set)});
  }
  return out;
}

kj::Promise<void> NodeService::prepareBundles(PrepareBundlesContext context) {
  Result<LeaseManager*> leases = Leases();
  if (!leases.ok()) return ToKjException(leases.status());
  auto params = context.getParams();
  Result<PlacementGroupId> group = ParseGroupId(params.getGroupId());
  if (!group.ok()) return ToKjException(group.status());
  Result<std::vector<BundleAsk>> bundles = ParseBundles(params.getBundles());
  if (!bundles.ok()) return ToKjException(bundles.status());
  Status prepared = (*leases)->PrepareBundles(*group, *bundles);
  if (!prepared.ok()) return ToKjException(prepared);
  return kj::READY_NOW;
}

kj::Promise<void> NodeService::commitBundles(CommitBundlesContext context) {
  Result<LeaseManager*> leases = Leases();
  if (!leases.ok()) return ToKjException(leases.status());
  Result<PlacementGroupId> group = ParseGroupId(context.getParams().getGroupId());
  if (!group.ok()) return ToKjException(group.status());
  Status committed = (*leases)->CommitBundles(*group);
  if (!committed.ok()) return ToKjException(committed);
  return kj::READY_NOW;
}

kj::Promise<void> NodeService::cancelBundles(CancelBundlesContext context) {
  Result<LeaseManager*> leases = Leases();
  if (!leases.ok()) return ToKjException(leases.status());
  auto params = context.getParams();
  Result<PlacementGroupId> group = ParseGroupId(params.getGroupId());
  if (!group.ok()) return ToKjException(group.status());
  if (params.getIndices().size() > kMaxBundles) {
    return ToKjException(InvalidArgument("indices: more than " + std::to_string(kMaxBundles)));
  }
  std::vector<uint32_t> indices;
  for (uint32_t index : params.getIndices()) indices.push_back(index);
  (*leases)->CancelBundles(*group, indices);
  return kj::READY_NOW;
}

}  // namespace airt::worker
