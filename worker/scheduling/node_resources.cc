// NodeResources: a node's totals, labels and GPU ids, and the allocations it handed out.
#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "worker/scheduling/internal/gpu_id_pool.h"
#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling {
namespace {

constexpr int64_t kMaxGpuIds = 1024;

bool LabelMatches(const Labels& labels, const ResourceShape& shape) {
  if (shape.accelerator_type().empty()) return true;
  auto it = labels.find(kAcceleratorTypeLabel);
  return it != labels.end() && it->second == shape.accelerator_type();
}

std::string LabelOf(const Labels& labels) {
  auto it = labels.find(kAcceleratorTypeLabel);
  return it == labels.end() ? "none" : it->second;
}

}  // namespace

std::string Allocation::CudaVisibleDevices() const {
  std::string list;
  for (GpuId gpu : gpu_ids) list += (list.empty() ? "" : ",") + std::to_string(gpu);
  return list;
}

NodeResources::NodeResources() : gpus_(std::make_unique<internal::GpuIdPool>()) {}
NodeResources::NodeResources(const NodeResources& other)
    : totals_(other.totals_),
      available_(other.available_),
      labels_(other.labels_),
      gpus_(std::make_unique<internal::GpuIdPool>(*other.gpus_)),
      held_(other.held_),
      next_allocation_id_(other.next_allocation_id_) {}
NodeResources& NodeResources::operator=(const NodeResources& other) {
  if (this != &other) *this = NodeResources(other);
  return *this;
}
NodeResources::NodeResources(NodeResources&&) noexcept = default;
NodeResources& NodeResources::operator=(NodeResources&&) noexcept = default;
NodeResources::~NodeResources() = default;

Result<NodeResources> NodeResources::Create(ResourceSet totals, std::vector<GpuId> gpu_ids,
                                            Labels labels) {
  auto fail = [&](const std::string& why) {
    return InvalidArgument("invalid node resources " + totals.ToString() + ": " + why);
  };
  Amount gpu = totals.Get(kGpu);
  if (!gpu.IsWhole()) return fail("GPU is " + gpu.ToString() + ", a node has whole GPUs");
  int64_t num_gpus = gpu.units() / Amount::kUnitsPerWhole;
  if (num_gpus > kMaxGpuIds || static_cast<int64_t>(gpu_ids.size()) > kMaxGpuIds) {
    return fail("more than " + std::to_string(kMaxGpuIds) + " GPUs");
  }
  if (gpu_ids.empty()) {
    for (GpuId i = 0; i < num_gpus; ++i) gpu_ids.push_back(i);
  } else if (num_gpus != 0 && num_gpus != static_cast<int64_t>(gpu_ids.size())) {
    return fail("GPU is " + gpu.ToString() + " but " + std::to_string(gpu_ids.size()) +
                " GPU ids are given");
  }
  std::set<GpuId> distinct;
  for (GpuId id : gpu_ids) {
    if (!distinct.insert(id).second) return fail("GPU id " + std::to_string(id) + " is twice");
  }
  for (const auto& [name, value] : labels) {
    if (name.empty()) return fail("a label name is empty");
  }
  NodeResources node;
  node.totals_ = std::move(totals);
  node.totals_.SetUnchecked(kGpu, Amount());
  node.available_ = node.totals_;
  node.labels_ = std::move(labels);
  *node.gpus_ = internal::GpuIdPool(std::move(gpu_ids));
  return node;
}

bool NodeResources::FitsNow(const ResourceShape& shape) const {
  if (!LabelMatches(labels_, shape)) return false;
  for (const auto& [name, amount] : shape.amounts().amounts()) {
    if (name != kGpu && amount > available_.Get(name)) return false;
  }
  return gpus_->CanAssign(shape.amounts().Get(kGpu));
}

bool NodeResources::CouldEverFit(const ResourceShape& shape) const {
  return LabelMatches(labels_, shape) && shape.amounts().FitsIn(Total());
}

Result<Allocation> NodeResources::Acquire(const ResourceShape& shape) {
  if (!LabelMatches(labels_, shape)) {
    return FailedPrecondition(shape.ToString() + " can never run on this node: its " +
                              std::string(kAcceleratorType) + " is " + LabelOf(labels_));
  }
  if (!CouldEverFit(shape)) {
    return FailedPrecondition(shape.ToString() + " can never run on this node: its totals are " +
                              Total().ToString());
  }
  if (!FitsNow(shape)) {
    return ResourceExhausted("cannot acquire " + shape.ToString() + " now: available " +
                             Available().ToString() + " of " + Total().ToString());
  }
  Allocation allocation;
  allocation.id = next_allocation_id_++;
  allocation.resources = shape.amounts();
  ResourceSet non_gpu = shape.amounts();
  non_gpu.SetUnchecked(kGpu, Amount());
  Status taken = available_.Subtract(non_gpu);
  if (!taken.ok()) return Internal("FitsNow said yes, yet: " + taken.message());
  Result<std::vector<GpuId>> ids = gpus_->Assign(shape.amounts().Get(kGpu));
  if (!ids.ok()) {
    available_.Add(non_gpu);
    return Internal("FitsNow said yes, yet: " + ids.status().message());
  }
  allocation.gpu_ids = std::move(*ids);
  held_.emplace(allocation.id, allocation);
  return allocation;
}

Status NodeResources::Release(const Allocation& allocation) {
  auto it = held_.find(allocation.id);
  if (it == held_.end()) {
    return NotFound("allocation " + std::to_string(allocation.id) + " of " +
                    allocation.resources.ToString() +
                    " is not held on this node (released twice?)");
  }
  const Allocation& held = it->second;
  if (held.resources != allocation.resources || held.gpu_ids != allocation.gpu_ids) {
    return InvalidArgument("allocation " + std::to_string(allocation.id) + " was " +
                           held.resources.ToString() + " on GPU ids [" + held.CudaVisibleDevices() +
                           "], not " + allocation.resources.ToString() + " on [" +
                           allocation.CudaVisibleDevices() + "]");
  }
  AIRT_RETURN_IF_ERROR(gpus_->Release(held.gpu_ids, held.resources.Get(kGpu)));
  ResourceSet others = held.resources;
  others.SetUnchecked(kGpu, Amount());
  others.SetUnchecked(kCpu, Amount());
  available_.Add(others);
  // A bundle's resources removed while this held some of them do not come back.
  for (const auto& [name, amount] : others.amounts()) {
    if (available_.Get(name) > totals_.Get(name)) available_.SetUnchecked(name, totals_.Get(name));
  }
  // Lent CPUs are in the pool already.
  if (lent_.erase(allocation.id) == 0) ReturnCpus(held.resources.Get(kCpu));
  held_.erase(it);
  return Status::Ok();
}

Status NodeResources::LendCpus(uint64_t id, bool lent) {
  auto it = held_.find(id);
  if (it == held_.end()) return NotFound("allocation " + std::to_string(id) + " is not held");
  Amount cpus = it->second.resources.Get(kCpu);
  if (lent) {
    if (lent_.insert(id).second) ReturnCpus(cpus);
    return Status::Ok();
  }
  if (lent_.erase(id) == 0) return Status::Ok();
  Amount available = available_.Get(kCpu);
  Amount taken = std::min(available, cpus);
  available_.SetUnchecked(kCpu, available - taken);
  cpu_debt_ = cpu_debt_ + (cpus - taken);
  return Status::Ok();
}

void NodeResources::ReturnCpus(Amount cpus) {
  Amount repaid = std::min(cpu_debt_, cpus);
  cpu_debt_ = cpu_debt_ - repaid;
  available_.SetUnchecked(kCpu, available_.Get(kCpu) + (cpus - repaid));
}

namespace {
Status CheckExtra(const ResourceSet& extra) {
  for (std::string_view name : {kCpu, kGpu, kMemory}) {
    if (!extra.Get(name).IsZero()) {
      return InvalidArgument("bundle resources " + extra.ToString() + " name " +
                             std::string(name) + ", which a bundle cannot add to a node");
    }
  }
  return Status::Ok();
}
}  // namespace

Status NodeResources::AddResources(const ResourceSet& extra) {
  AIRT_RETURN_IF_ERROR(CheckExtra(extra));
  totals_.Add(extra);
  available_.Add(extra);
  return Status::Ok();
}

Status NodeResources::RemoveResources(const ResourceSet& extra) {
  AIRT_RETURN_IF_ERROR(CheckExtra(extra));
  for (const auto& [name, amount] : extra.amounts()) {
    Amount total = totals_.Get(name);
    totals_.SetUnchecked(name, total - std::min(total, amount));
    Amount free = available_.Get(name);
    available_.SetUnchecked(name, free - std::min(free, amount));
  }
  return Status::Ok();
}

Status NodeResources::QuarantineGpu(GpuId gpu_id) { return gpus_->Quarantine(gpu_id); }
Status NodeResources::RestoreGpu(GpuId gpu_id) { return gpus_->Restore(gpu_id); }

ResourceSet NodeResources::Total() const {
  ResourceSet total = totals_;
  total.SetUnchecked(kGpu, gpus_->Schedulable());
  return total;
}

ResourceSet NodeResources::Available() const {
  ResourceSet available = available_;
  available.SetUnchecked(kGpu, gpus_->Available());
  return available;
}

NodeResourcesSnapshot NodeResources::Snapshot() const {
  NodeResourcesSnapshot snapshot;
  snapshot.total = Total();
  snapshot.available = Available();
  snapshot.labels = labels_;
  for (const auto& s : gpus_->ids()) {
    if (!s.used.IsZero()) snapshot.gpus_in_use.push_back(GpuIdUsage{s.id, s.used});
    if (s.quarantined) snapshot.quarantined_gpus.push_back(s.id);
  }
  snapshot.num_allocations = held_.size();
  return snapshot;
}

}  // namespace airt::worker::scheduling
