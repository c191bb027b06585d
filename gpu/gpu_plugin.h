// GpuPlugin: the GPU plugin library (libairt_gpu_plugin.so, built from probe.cu) opened with
// dlopen, so that airt binaries start on machines without CUDA (DESIGN.md, "GPUs").
//
//   AIRT_ASSIGN_OR_RETURN(GpuPlugin plugin, GpuPlugin::Load(path));
//   for (int d = 0; d < plugin.DeviceCount(); ++d) AIRT_RETURN_IF_ERROR(plugin.Probe(d, 64 << 20));
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "gpu/plugin_abi.h"

namespace airt {

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

  const std::string& path() const { return path_; }

 private:
  GpuPlugin(std::string path, void* handle, airt_gpu_device_count_fn device_count,
            airt_gpu_probe_fn probe);
  void Close();

  std::string path_;
  void* handle_ = nullptr;
  airt_gpu_device_count_fn device_count_ = nullptr;
  airt_gpu_probe_fn probe_ = nullptr;
};

}  // namespace airt
