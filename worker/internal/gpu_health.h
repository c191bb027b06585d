// The checks behind a node's GPU health (DESIGN.md "GPUs"): one interface, GpuHealthSource, with
// the real implementation (PluginGpuHealth: NVML counters, the probe kernel and a bandwidth
// figure through the dlopen'ed plugin) and one that injects failures from a spec given at node
// start (FaultSpecGpuHealth, `airt-node --gpu-fault-spec`, for drills and for tests on machines
// without a GPU). The GpuMonitor (gpu_monitor.h) decides what a failed check does.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "gpu/gpu_plugin.h"

namespace airt::worker {

// How deep a check goes. kLight: the counters only (NVML state, XIDs, ECC, retired or remapped
// rows, throttling): for a GPU that is running work. kFull: also the probe kernel and the
// bandwidth figure: for an idle GPU.
enum class GpuCheckDepth : uint8_t { kLight, kFull };

// What one check of one GPU found. `reason` names the failed check and its figures when
// unhealthy ("XID 79 since the last check", "probe: memory word 12 read back ...").
struct GpuCheckResult {
  bool healthy = true;
  std::string reason;
};

// A node's GPUs, by their position in the node's GPU list (0..N-1, the device index as the node's
// process sees them). Called on the node's event loop thread.
class GpuHealthSource {
 public:
  virtual ~GpuHealthSource() = default;
  // One check of GPU `index`. kUnavailable: the driver does not answer (the node is cordoned);
  // any other error counts as a failed check.
  virtual Result<GpuCheckResult> Check(size_t index, GpuCheckDepth depth) = 0;
  // The bytes of GPU `index` each of `pids` holds (a pid holding none is left out).
  // kUnavailable: they cannot be read now.
  virtual Result<std::map<int32_t, uint64_t>> ProcessMemory(size_t index,
                                                            const std::vector<int32_t>& pids) = 0;
};

// The real checks through the GPU plugin. Figures from the options: a probe of `probe_bytes`,
// a bandwidth test over `bandwidth_bytes` compared with `expected_gbps[index]` (0: not compared)
// times `min_bandwidth_fraction`. Each plugin call runs on a thread of its own and counts as the
// driver not answering (kUnavailable) when it takes longer than `call_timeout_ms`; such a thread
// is left behind, stuck in the driver.
struct PluginGpuHealthOptions {
  uint64_t probe_bytes = uint64_t{64} << 20;
  uint64_t bandwidth_bytes = uint64_t{256} << 20;
  std::vector<double> expected_gbps;
  double min_bandwidth_fraction = 0.5;
  uint32_t call_timeout_ms = 30000;
};
class PluginGpuHealth final : public GpuHealthSource {
 public:
  PluginGpuHealth(std::shared_ptr<GpuPlugin> plugin, PluginGpuHealthOptions options);
  Result<GpuCheckResult> Check(size_t index, GpuCheckDepth depth) override;
  Result<std::map<int32_t, uint64_t>> ProcessMemory(size_t index,
                                                    const std::vector<int32_t>& pids) override;

 private:
  std::shared_ptr<GpuPlugin> plugin_;
  PluginGpuHealthOptions options_;
};

// One injected fault (docs/gpu.md, "Fault spec").
struct GpuFault {
  enum class Kind : uint8_t {
    kXid,           // value: the XID code
    kEcc,           // value: uncorrectable ECC errors
    kRetiredPages,  // retired pages pending
    kRemappedRows,  // remapped rows pending
    kThrottle,      // text: hw-slowdown, hw-thermal or power-brake
    kProbe,         // the probe kernel reads back wrong (full checks only)
    kBandwidth,     // value: the measured GB/s (full checks only); fails below the expected
    kMemory,        // value: bytes every process on the GPU is reported to hold
    kDriverDown,    // the driver stops answering (every GPU)
  };
  Kind kind = Kind::kXid;
  std::optional<uint32_t> gpu_id;  // the GPU id (as `airt status` shows it); none: driver
  uint64_t value = 0;
  std::string text;
  std::optional<GpuCheckDepth> only;  // when=busy (light checks) or when=idle (full checks)
  uint64_t after = 1;                 // from this check of the GPU on (1: the first)
  uint64_t times = 0;                 // for this many checks, then healthy again; 0: for good
};

// "gpu=0:xid=79:when=busy;gpu=1:memory=9G;driver:down:after=3" (docs/gpu.md). kInvalidArgument
// naming the entry and what is wrong; a GPU id the node does not have is one.
Result<std::vector<GpuFault>> ParseGpuFaultSpec(const std::string& spec,
                                                const std::vector<uint32_t>& gpu_ids);

// Injects the spec's faults; a GPU without a fault passing its check is healthy. `expected_gbps`
// is what a bandwidth fault is compared with (0: 1000 GB/s).
class FaultSpecGpuHealth final : public GpuHealthSource {
 public:
  FaultSpecGpuHealth(std::vector<GpuFault> faults, std::vector<uint32_t> gpu_ids,
                     double min_bandwidth_fraction);
  Result<GpuCheckResult> Check(size_t index, GpuCheckDepth depth) override;
  Result<std::map<int32_t, uint64_t>> ProcessMemory(size_t index,
                                                    const std::vector<int32_t>& pids) override;

 private:
  // Whether fault `f` fails check number `check` of its GPU (counting it when it does).
  bool Fires(size_t f, uint64_t check, std::optional<GpuCheckDepth> depth);

  std::vector<GpuFault> faults_;
  std::vector<uint32_t> gpu_ids_;
  double min_bandwidth_fraction_;
  std::map<size_t, uint64_t> checks_;  // checks made so far, per GPU
  std::map<size_t, uint64_t> fired_;   // per fault: the checks it failed
};

}  // namespace airt::worker
