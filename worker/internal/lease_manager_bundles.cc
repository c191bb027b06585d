// LeaseManager's placement-group side: bundles prepared, committed and cancelled (docs/cluster.md
// "Placement groups").
#include <algorithm>
#include <optional>
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
  std::vector<uint32_t> again;
  auto held = bundles_.find(group);
  if (held != bundles_.end()) {
    for (const BundleAsk& bundle : bundles) {
      for (const ReservedBundle& b : held->second) {
        if (b.index == bundle.index) again.push_back(bundle.index);
      }
    }
  }
  if (!again.empty()) CancelBundles(group, again);
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
  std::vector<ReservedBundle>& kept = bundles_[group];
  for (ReservedBundle& b : taken) kept.push_back(std::move(b));
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

void LeaseManager::CancelBundles(const PlacementGroupId& group,
                                 const std::vector<uint32_t>& indices) {
  auto it = bundles_.find(group);
  if (it == bundles_.end()) return;
  std::string hex = group.Hex();
  auto chosen = [&](uint32_t index) {
    return indices.empty() || std::find(indices.begin(), indices.end(), index) != indices.end();
  };
  std::vector<WorkerId> in_group;
  for (const auto& [lease_id, lease] : leases_) {
    for (const auto& [name, amount] : lease.allocation.resources.amounts()) {
      bool hit = indices.empty() ? IsBundleResourceOf(name, hex) : false;
      for (uint32_t index : indices) {
        if (name.ends_with("_group_" + std::to_string(index) + "_" + hex)) hit = true;
      }
      if (hit) {
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
  std::vector<ReservedBundle> kept;
  for (ReservedBundle& bundle : it->second) {
    if (!chosen(bundle.index)) {
      kept.push_back(std::move(bundle));
      continue;
    }
    if (!bundle.committed.empty()) {
      Status removed = resources_.RemoveResources(bundle.committed);
      if (!removed.ok()) AIRT_LOG(ERROR) << "removing bundle resources: " << removed.ToString();
    }
    Release(bundle.allocation);
  }
  if (kept.empty()) {
    bundles_.erase(it);
  } else {
    it->second = std::move(kept);
  }
  ScheduleDispatch();
}

std::vector<HeldBundles> LeaseManager::CommittedBundles() const {
  std::vector<HeldBundles> out;
  for (const auto& [group, reserved] : bundles_) {
    HeldBundles held{group, {}};
    for (const ReservedBundle& bundle : reserved) {
      if (!bundle.committed.empty()) held.indices.push_back(bundle.index);
    }
    if (!held.indices.empty()) out.push_back(std::move(held));
  }
  return out;
}

}  // namespace airt::worker

namespace airt::worker {

std::vector<uint32_t> LeaseManager::GpuIdsOf(
    const worker::scheduling::Allocation& allocation) const {
  if (!allocation.gpu_ids.empty()) return allocation.gpu_ids;
  auto loan = bundle_gpu_loans_.find(allocation.id);
  return loan == bundle_gpu_loans_.end() ? std::vector<uint32_t>{} : loan->second.ids;
}

double LeaseManager::GpuAmountOf(const worker::scheduling::Allocation& allocation) const {
  double own = allocation.resources.Get(worker::scheduling::kGpu).ToDouble();
  if (own > 0) return own;
  auto loan = bundle_gpu_loans_.find(allocation.id);
  if (loan == bundle_gpu_loans_.end()) return 0;
  const BundleGpuLoan& l = loan->second;
  return l.amount.ToDouble() * (l.amount.IsWhole() ? static_cast<double>(l.ids.size()) : 1.0);
}

void LeaseManager::LendBundleGpus(const worker::scheduling::Allocation& allocation) {
  using worker::scheduling::Amount;
  if (!allocation.gpu_ids.empty()) return;
  for (auto& [group, reserved] : bundles_) {
    std::string hex = group.Hex();
    Amount wildcard = allocation.resources.Get(BundleResourceName("GPU", -1, hex));
    if (wildcard.IsZero()) continue;
    // The bundle it asks for by index, else (any bundle) the first here with room.
    std::optional<uint32_t> wanted;
    for (const ReservedBundle& bundle : reserved) {
      if (!allocation.resources.Get(BundleResourceName("GPU", bundle.index, hex)).IsZero()) {
        wanted = bundle.index;
      }
    }
    {
      for (ReservedBundle& bundle : reserved) {
        if (bundle.committed.empty() || bundle.allocation.gpu_ids.empty()) continue;
        if (wanted && bundle.index != *wanted) continue;
        BundleGpuLoan loan{group, bundle.index, {}, wildcard.IsWhole() ? Amount::Whole(1) : wildcard};
        int64_t whole = wildcard.units() / Amount::kUnitsPerWhole;
        for (uint32_t id : bundle.allocation.gpu_ids) {
          Amount used = bundle.gpu_used[id];
          bool fits = wildcard.IsWhole() ? used.IsZero() : used + wildcard <= Amount::Whole(1);
          if (!fits) continue;
          loan.ids.push_back(id);
          if (!wildcard.IsWhole() || static_cast<int64_t>(loan.ids.size()) == whole) break;
        }
        bool enough = wildcard.IsWhole() ? static_cast<int64_t>(loan.ids.size()) == whole
                                         : loan.ids.size() == 1;
        if (!enough) continue;
        for (uint32_t id : loan.ids) bundle.gpu_used[id] = bundle.gpu_used[id] + loan.amount;
        bundle_gpu_loans_[allocation.id] = std::move(loan);
        return;
      }
    }
    AIRT_LOG(WARNING) << "a lease in placement group " << hex << " asks for " << wildcard.ToString()
                      << " of its bundles' GPUs, but no bundle here has those ids free: it runs "
                      << "without CUDA_VISIBLE_DEVICES ids";
    return;
  }
}

void LeaseManager::ReturnBundleGpus(uint64_t allocation_id) {
  auto it = bundle_gpu_loans_.find(allocation_id);
  if (it == bundle_gpu_loans_.end()) return;
  BundleGpuLoan loan = std::move(it->second);
  bundle_gpu_loans_.erase(it);
  auto group = bundles_.find(loan.group);
  if (group == bundles_.end()) return;  // cancelled: its bundles are gone
  for (ReservedBundle& bundle : group->second) {
    if (bundle.index != loan.index) continue;
    for (uint32_t id : loan.ids) bundle.gpu_used[id] = bundle.gpu_used[id] - loan.amount;
  }
}

}  // namespace airt::worker
