#include "worker/internal/gpu_monitor.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <utility>

#include "common/logging.h"

namespace airt::worker {
namespace {

std::string Bytes(uint64_t bytes) {
  char text[32];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  } else {
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  }
  return text;
}

}  // namespace

GpuMonitor::GpuMonitor(GpuMonitorOptions options, GpuHealthSource& source, LeaseManager& leases,
                       kj::Timer& timer, std::function<uint64_t()> wall_ms)
    : options_(std::move(options)),
      source_(source),
      leases_(leases),
      timer_(timer),
      wall_ms_(std::move(wall_ms)),
      tasks_(*this) {
  for (size_t i = 0; i < options_.gpu_ids.size(); ++i) {
    GpuState gpu;
    gpu.gpu_id = options_.gpu_ids[i];
    gpu.uuid = i < options_.gpu_uuids.size() ? options_.gpu_uuids[i] : "";
    state_.gpus.push_back(gpu);
  }
}

void GpuMonitor::Start() {
  if (state_.gpus.empty()) return;
  for (size_t i = 0; i < state_.gpus.size(); ++i) {
    if (!CheckOne(i, GpuCheckDepth::kFull)) break;
  }
  tasks_.add(timer_.afterDelay(options_.interval).then([this] { Round(); }));
  tasks_.add(timer_.afterDelay(options_.memory_interval).then([this] { WatchMemory(); }));
}

void GpuMonitor::Round() {
  std::set<uint32_t> busy;
  for (const auto& usage : leases_.Snapshot().resources.gpus_in_use) busy.insert(usage.id);
  for (size_t i = 0; i < state_.gpus.size(); ++i) {
    if (state_.gpus[i].quarantined) continue;
    GpuCheckDepth depth =
        busy.count(state_.gpus[i].gpu_id) ? GpuCheckDepth::kLight : GpuCheckDepth::kFull;
    if (!CheckOne(i, depth)) break;
  }
  tasks_.add(timer_.afterDelay(options_.interval).then([this] { Round(); }));
}

bool GpuMonitor::CheckOne(size_t index, GpuCheckDepth depth) {
  GpuState& gpu = state_.gpus[index];
  ++gpu.checks;
  Result<GpuCheckResult> result = source_.Check(index, depth);
  if (!result.ok() && result.status().code() == Code::kUnavailable) {
    driver_error_ = result.status().message();
    UpdateCordon();
    return false;
  }
  if (!driver_error_.empty()) {
    driver_error_.clear();  // the driver answers again
    UpdateCordon();
  }
  if (result.ok() && result->healthy) return true;
  Quarantine(index, result.ok() ? result->reason : result.status().ToString());
  return true;
}

void GpuMonitor::Quarantine(size_t index, const std::string& reason) {
  GpuState& gpu = state_.gpus[index];
  gpu.quarantined = true;
  gpu.reason = reason;
  gpu.since_ms = wall_ms_();
  AIRT_LOG(WARNING) << "GPU " << gpu.gpu_id << (gpu.uuid.empty() ? "" : " (" + gpu.uuid + ")")
                    << " is quarantined: " << reason;
  Status taken = leases_.QuarantineGpu(gpu.gpu_id, "GPU " + std::to_string(gpu.gpu_id) +
                                                       " failed its health check: " + reason);
  if (!taken.ok()) AIRT_LOG(ERROR) << "quarantining GPU " << gpu.gpu_id << ": " << taken.ToString();
  UpdateCordon();
}

void GpuMonitor::UpdateCordon() {
  size_t quarantined = 0;
  for (const GpuState& gpu : state_.gpus) quarantined += gpu.quarantined ? 1 : 0;
  std::string reason;
  if (!driver_error_.empty()) {
    reason = "the GPU driver does not answer: " + driver_error_;
  } else if (quarantined * 2 > state_.gpus.size()) {
    reason = std::to_string(quarantined) + " of " + std::to_string(state_.gpus.size()) +
             " GPUs are quarantined";
  }
  if (reason == state_.cordon_reason) return;
  bool was = !state_.cordon_reason.empty();
  state_.cordon_reason = reason;
  if (!reason.empty()) {
    if (!was) state_.cordoned_since_ms = wall_ms_();
    AIRT_LOG(WARNING) << "the node is cordoned (no new leases): " << reason;
    leases_.SetCordoned(true);
  } else {
    state_.cordoned_since_ms = 0;
    AIRT_LOG(INFO) << "the node's cordon is lifted";
    leases_.SetCordoned(false);
  }
}

Status GpuMonitor::Return(uint32_t gpu_id) {
  auto it = std::find_if(state_.gpus.begin(), state_.gpus.end(),
                         [&](const GpuState& g) { return g.gpu_id == gpu_id; });
  if (it == state_.gpus.end()) return NotFound("this node has no GPU " + std::to_string(gpu_id));
  if (!it->quarantined) {
    return FailedPrecondition("GPU " + std::to_string(gpu_id) + " is not quarantined");
  }
  size_t index = static_cast<size_t>(it - state_.gpus.begin());
  ++it->checks;
  Result<GpuCheckResult> result = source_.Check(index, GpuCheckDepth::kFull);
  if (!result.ok() && result.status().code() == Code::kUnavailable) {
    driver_error_ = result.status().message();
    UpdateCordon();
  }
  if (!result.ok()) {
    return FailedPrecondition("GPU " + std::to_string(gpu_id) +
                              " stays quarantined: " + result.status().ToString());
  }
  if (!result->healthy) {
    it->reason = result->reason;
    return FailedPrecondition("GPU " + std::to_string(gpu_id) +
                              " failed its check again and stays quarantined: " + result->reason);
  }
  AIRT_RETURN_IF_ERROR(leases_.RestoreGpu(gpu_id));
  it->quarantined = false;
  it->reason.clear();
  it->since_ms = 0;
  AIRT_LOG(INFO) << "GPU " << gpu_id << " passed its check and is back in service";
  driver_error_.clear();
  UpdateCordon();
  return Status::Ok();
}

void GpuMonitor::WatchMemory() {
  for (const GpuLease& lease : leases_.GpuLeases()) {
    if (lease.gpu_amount >= 1 || lease.gpu_ids.size() != 1 || lease.pid <= 0) continue;
    auto at = std::find(options_.gpu_ids.begin(), options_.gpu_ids.end(), lease.gpu_ids[0]);
    if (at == options_.gpu_ids.end()) continue;
    size_t index = static_cast<size_t>(at - options_.gpu_ids.begin());
    uint64_t memory = index < options_.gpu_memory.size() ? options_.gpu_memory[index] : 0;
    if (memory == 0) continue;
    Result<std::map<int32_t, uint64_t>> used = source_.ProcessMemory(index, {lease.pid});
    if (!used.ok()) {
      AIRT_LOG(DEBUG) << "reading GPU memory: " << used.status().ToString();
      continue;
    }
    auto found = used->find(lease.pid);
    if (found == used->end()) continue;
    uint64_t share = static_cast<uint64_t>(lease.gpu_amount * static_cast<double>(memory));
    uint64_t limit = share + options_.context_bytes + options_.margin_bytes;
    if (found->second <= limit) continue;
    char fraction[16];
    std::snprintf(fraction, sizeof fraction, "%g", lease.gpu_amount);
    std::string why = "the worker used " + Bytes(found->second) + " of GPU " +
                      std::to_string(lease.gpu_ids[0]) +
                      (state_.gpus[index].uuid.empty() ? "" : " (" + state_.gpus[index].uuid + ")") +
                      ", more than its share of " + fraction + " GPU = " + Bytes(share) +
                      " (AIRT_GPU_MEMORY_LIMIT_BYTES) plus " +
                      Bytes(options_.context_bytes + options_.margin_bytes) +
                      " of context and margin; the node stopped it";
    AIRT_LOG(WARNING) << "worker " << lease.worker.Hex().substr(0, 8) << " (pid " << lease.pid
                      << "): " << why;
    leases_.StopWorker(lease.worker, why);
  }
  tasks_.add(timer_.afterDelay(options_.memory_interval).then([this] { WatchMemory(); }));
}

void GpuMonitor::taskFailed(kj::Exception&& exception) {
  AIRT_LOG(ERROR) << "GPU monitor: " << exception.getDescription().cStr();
}

}  // namespace airt::worker
