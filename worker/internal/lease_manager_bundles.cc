// LeaseManager's placement-group side: bundles prepared, committed and cancelled (docs/cluster.md
// "Placement groups").
#include <utility>

#include "common/bundle_resources.h"
#include "common/logging.h"
#include "worker/internal/lease_manager.h"

namespace airt::worker {
namespace {

std::map<std::string, double> ToDoubles(const worker::scheduling::ResourceSet& set) {
  std::map<std::string, double> out;
  for (const auto& [name, amount] : set.amounts()) out[name] = amount.ToDouble();
  return out;
}

}  // namespace

Status LeaseManager::PrepareBundles(const PlacementGroupId& group,
                                    const std::vector<BundleAsk>& bundles) {
  if (bundles_.count(group) != 0) CancelBundles(group);
  std::vector<ReservedBundle> taken;
  auto give_back = [&] {
    for (ReservedBundle& b : taken) Release(b.allocation);
  };
  for (const BundleAsk& bundle : bundles) {
    Result<worker::scheduling::ResourceShape> shape =
        worker::scheduling::ResourceShape::Make(bundle.resources);
    if (!shape.ok()) {
      give_back();
      return shape.status();
    }
    Result<worker::scheduling::Allocation> allocation = resources_.Acquire(*shape);
    if (!allocation.ok()) {
      give_back();
      std::string why = "bundle " + std::to_string(bundle.index) + " " +
                        bundle.resources.ToString() + " of placement group " + group.Hex() +
                        " does not fit on node " + options_.local_node.Hex().substr(0, 8) + ": " +
                        allocation.status().message();
      AIRT_LOG(INFO) << "refused to prepare " << why;
      if (allocation.status().code() == Code::kFailedPrecondition) return InvalidArgument(why);
      return ResourceExhausted(why);
    }
    taken.push_back(ReservedBundle{bundle.index, std::move(*allocation), {}});
  }
  AIRT_LOG(DEBUG) << "prepared " << taken.size() << " bundles of placement group " << group.Hex();
  bundles_[group] = std::move(taken);
  return Status::Ok();
}

Status LeaseManager::CommitBundles(const PlacementGroupId& group) {
  auto it = bundles_.find(group);
  if (it == bundles_.end()) {
    return FailedPrecondition("placement group " + group.Hex() +
                              " has no bundle prepared on this node");
  }
  std::string hex = group.Hex();
  for (ReservedBundle& bundle : it->second) {
    if (!bundle.committed.empty()) continue;
    AIRT_ASSIGN_OR_RETURN(
        worker::scheduling::ResourceSet formatted,
        worker::scheduling::ResourceSet::FromDoubles(
            CommittedBundleResources(hex, bundle.index, ToDoubles(bundle.allocation.resources))));
    AIRT_RETURN_IF_ERROR(resources_.AddResources(formatted));
    bundle.committed = std::move(formatted);
  }
  AIRT_LOG(DEBUG) << "committed the bundles of placement group " << hex;
  ScheduleDispatch();
  return Status::Ok();
}

void LeaseManager::CancelBundles(const PlacementGroupId& group) {
  auto it = bundles_.find(group);
  if (it == bundles_.end()) return;
  std::string hex = group.Hex();
  std::vector<WorkerId> in_group;
  for (const auto& [lease_id, lease] : leases_) {
    for (const auto& [name, amount] : lease.allocation.resources.amounts()) {
      if (IsBundleResourceOf(name, hex)) {
        in_group.push_back(lease.worker);
        break;
      }
    }
  }
  for (const WorkerId& worker : in_group) {
    AIRT_LOG(INFO) << "placement group " << hex << " is removed: stopping its worker "
                   << worker.Hex().substr(0, 8);
    KillWorker(worker);
  }
  for (ReservedBundle& bundle : it->second) {
    if (!bundle.committed.empty()) {
      Status removed = resources_.RemoveResources(bundle.committed);
      if (!removed.ok()) AIRT_LOG(ERROR) << "removing bundle resources: " << removed.ToString();
    }
    Release(bundle.allocation);
  }
  bundles_.erase(it);
  ScheduleDispatch();
}

}  // namespace airt::worker
