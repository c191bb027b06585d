// GpuPlugin: the GPU plugin library (libairt_gpu_plugin.so, built from probe.cu) opened with
// dlopen, so that airt binaries start on machines without CUDA (DESIGN.md, "GPUs").
//
//   AIRT_ASSIGN_OR_RETURN(GpuPlugin plugin, GpuPlugin::Load(path));
//   for (int d = 0; d < plugin.DeviceCount(); ++d) AIRT_RETURN_IF_ERROR(plugin.Probe(d, 64 << 20));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "gpu/plugin_abi.h"

namespace airt {

// One CUDA device as the plugin describes it.
struct GpuDeviceInfo {
  std::string name;        // the marketing name, "NVIDIA H100 80GB HBM3"
  std::string uuid;        // "GPU-..." or "MIG-..."
  std::string pci_bus_id;  // "0000:3B:00.0"
  uint64_t total_memory = 0;
  bool is_mig = false;
};

// One process holding device memory (NVML).
struct GpuProcessMemory {
  int32_t pid = 0;
  uint64_t bytes = 0;
};

// Owns the dlopen handle; moving transfers it, destruction closes it. Calls are thread-safe as
// far as the CUDA runtime is (each blocks its calling thread).
class GpuPlugin {
 public:
  // Opens the plugin at `path` and resolves its entry points.
  // kUnavailable: it cannot be loaded (missing file, or libcudart absent on this machine); the
  // message names the path and dlerror(). kInternal: it loaded but lacks an entry point, named.
  static Result<GpuPlugin> Load(const std::string& path);

  GpuPlugin(GpuPlugin&& other) noexcept;
  GpuPlugin& operator=(GpuPlugin&& other) noexcept;
  GpuPlugin(const GpuPlugin&) = delete;
  GpuPlugin& operator=(const GpuPlugin&) = delete;
  ~GpuPlugin();

  // CUDA devices visible to this process (after CUDA_VISIBLE_DEVICES); 0 without a driver.
  int DeviceCount() const;

  // The short compute and memory probe of a health check over `bytes` of `device` memory.
  // kInvalidArgument: no such device, or fewer than AIRT_GPU_PROBE_MIN_BYTES.
  // kResourceExhausted: the device could not allocate `bytes`.
  // kUnavailable: a CUDA error; the device is not usable now.
  // kInternal: memory or arithmetic read back wrong; the device is faulty.
  Status Probe(int device, uint64_t bytes) const;

  // The driver API's description of `device`. kInvalidArgument: no such device;
  // kUnavailable: no driver.
  Result<GpuDeviceInfo> DeviceInfo(int device) const;
  // NVML's health counters of `device` (nvml_ok 0 where NVML is absent). XID events are counted
  // since the previous call. kUnavailable: NVML is there and does not answer.
  Result<airt_gpu_health_t> Health(int device) const;
  // The processes holding memory on `device`. kUnavailable: NVML absent or not answering.
  Result<std::vector<GpuProcessMemory>> ProcessMemory(int device) const;
  // Device-to-device copy bandwidth over `bytes`, GB/s; errors as Probe.
  Result<double> Bandwidth(int device, uint64_t bytes) const;

  const std::string& path() const { return path_; }

  // The NCCL entry points (plugin_abi.h "NCCL"), for collective/'s nccl backend; all null when
  // the plugin predates them. Raw C calls: the caller translates their return values.
  struct NcclEntries {
    airt_nccl_unique_id_fn unique_id = nullptr;
    airt_nccl_comm_init_fn comm_init = nullptr;
    airt_nccl_run_fn run = nullptr;
    airt_nccl_comm_destroy_fn comm_destroy = nullptr;
    airt_gpu_memory_fn memory = nullptr;
  };
  const NcclEntries& nccl() const { return nccl_; }

 private:
  struct Entries {
    airt_gpu_device_count_fn device_count = nullptr;
    airt_gpu_probe_fn probe = nullptr;
    airt_gpu_device_info_fn device_info = nullptr;
    airt_gpu_health_fn health = nullptr;
    airt_gpu_process_memory_fn process_memory = nullptr;
    airt_gpu_bandwidth_fn bandwidth = nullptr;
  };
  GpuPlugin(std::string path, void* handle, Entries entries);
  void Close();

  std::string path_;
  void* handle_ = nullptr;
  Entries e_;
  NcclEntries nccl_;
};

}  // namespace airt
