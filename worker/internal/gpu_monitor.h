// What a node does with its GPUs' health (DESIGN.md "GPUs"): checks every GPU at start and then
// every interval (idle GPUs fully, busy ones lightly) through a GpuHealthSource; quarantines a
// GPU that fails (LeaseManager::QuarantineGpu: out of the schedulable resources, the workers of
// its leases stopped so that their owners retry the tasks elsewhere); cordons the node when more
// than half of its GPUs are quarantined or the driver stops answering (LeaseManager::SetCordoned);
// re-tests a quarantined GPU on `airt gpu return` and puts it back when it passes; and stops a
// worker holding a fractional GPU whose memory on it exceeds its share by more than the margin.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <kj/async.h>
#include <kj/timer.h>

#include "common/status.h"
#include "worker/internal/gpu_health.h"
#include "worker/internal/lease_manager.h"

namespace airt::worker {

struct GpuMonitorOptions {
  std::vector<uint32_t> gpu_ids;  // the node's, in device order
  std::vector<std::string> gpu_uuids;
  std::vector<uint64_t> gpu_memory;  // bytes per GPU; 0: unknown (no memory watch on it)
  kj::Duration interval = 60 * kj::SECONDS;
  kj::Duration memory_interval = 1 * kj::SECONDS;
  // A worker may hold its share plus the CUDA context (measured at node start) plus this.
  uint64_t context_bytes = 0;
  uint64_t margin_bytes = 0;
};

struct GpuState {
  uint32_t gpu_id = 0;
  std::string uuid;
  bool quarantined = false;
  std::string reason;     // the failed check, while quarantined
  uint64_t since_ms = 0;  // wall clock of the quarantine
  uint64_t checks = 0;    // made so far
};

struct GpuMonitorSnapshot {
  std::vector<GpuState> gpus;
  std::string cordon_reason;  // "": not cordoned
  uint64_t cordoned_since_ms = 0;
};

// Event-loop confined. `source`, `leases` and `timer` must outlive it.
class GpuMonitor final : private kj::TaskSet::ErrorHandler {
 public:
  GpuMonitor(GpuMonitorOptions options, GpuHealthSource& source, LeaseManager& leases,
             kj::Timer& timer, std::function<uint64_t()> wall_ms);

  // The start-time check of every GPU (full), then the periodic checks and the memory watch.
  void Start();
  // Re-tests quarantined GPU `gpu_id` (a full check) and returns it to service if it passes; the
  // cordon is lifted when no longer more than half the GPUs are quarantined and the driver
  // answers. kNotFound: no such GPU; kFailedPrecondition: it is not quarantined, or it failed
  // the check again (the message says why).
  Status Return(uint32_t gpu_id);
  GpuMonitorSnapshot Snapshot() const { return state_; }

 private:
  void Round();
  void WatchMemory();
  // Checks GPU at `index`; quarantines it (and maybe cordons) when it fails. false: the driver
  // does not answer (the node is cordoned and the round stops).
  bool CheckOne(size_t index, GpuCheckDepth depth);
  void Quarantine(size_t index, const std::string& reason);
  // Cordons the node, or lifts its cordon, from the quarantined count and driver_error_.
  void UpdateCordon();
  void taskFailed(kj::Exception&& exception) override;

  GpuMonitorOptions options_;
  GpuHealthSource& source_;
  LeaseManager& leases_;
  kj::Timer& timer_;
  std::function<uint64_t()> wall_ms_;
  GpuMonitorSnapshot state_;
  std::string driver_error_;  // the latest check's, while the driver does not answer
  kj::TaskSet tasks_;
};

}  // namespace airt::worker
