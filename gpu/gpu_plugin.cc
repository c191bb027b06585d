#include "gpu/gpu_plugin.h"

#include <dlfcn.h>

#include <type_traits>
#include <utility>

namespace airt {
namespace {

std::string DlError() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown dlopen error";
}

// Maps an AIRT_GPU_PROBE_* value to a Status (as GpuPlugin::Probe documents).
Status FromProbeCode(int rc, const char* what, const char* error) {
  std::string message = std::string(what) + " failed: " + error;
  switch (rc) {
    case AIRT_GPU_PROBE_OK: return Status::Ok();
    case AIRT_GPU_PROBE_INVALID_ARGUMENT: return InvalidArgument(std::move(message));
    case AIRT_GPU_PROBE_OUT_OF_MEMORY: return ResourceExhausted(std::move(message));
    case AIRT_GPU_PROBE_CUDA_ERROR: return Unavailable(std::move(message));
    case AIRT_GPU_PROBE_MISMATCH: return Internal(std::move(message));
    default: return Internal(message + " (unknown plugin return value " + std::to_string(rc) + ")");
  }
}

}  // namespace

Result<GpuPlugin> GpuPlugin::Load(const std::string& path) {
  dlerror();  // clear any earlier error
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return Unavailable("cannot load GPU plugin " + path + ": " + DlError());
  }
  Entries e;
  const char* missing = nullptr;
  auto resolve = [&](auto* slot, const char* symbol) {
    *slot = reinterpret_cast<std::remove_pointer_t<decltype(slot)>>(dlsym(handle, symbol));
    if (*slot == nullptr && missing == nullptr) missing = symbol;
  };
  resolve(&e.device_count, AIRT_GPU_DEVICE_COUNT_SYMBOL);
  resolve(&e.probe, AIRT_GPU_PROBE_SYMBOL);
  resolve(&e.device_info, AIRT_GPU_DEVICE_INFO_SYMBOL);
  resolve(&e.health, AIRT_GPU_HEALTH_SYMBOL);
  resolve(&e.process_memory, AIRT_GPU_PROCESS_MEMORY_SYMBOL);
  resolve(&e.bandwidth, AIRT_GPU_BANDWIDTH_SYMBOL);
  if (missing != nullptr) {
    std::string message = "GPU plugin " + path + " lacks the symbol " + missing + ": " + DlError();
    dlclose(handle);
    return Internal(std::move(message));
  }
  GpuPlugin plugin(path, handle, e);
  NcclEntries& n = plugin.nccl_;
  n.unique_id = reinterpret_cast<airt_nccl_unique_id_fn>(dlsym(handle, AIRT_NCCL_UNIQUE_ID_SYMBOL));
  n.comm_init = reinterpret_cast<airt_nccl_comm_init_fn>(dlsym(handle, AIRT_NCCL_COMM_INIT_SYMBOL));
  n.run = reinterpret_cast<airt_nccl_run_fn>(dlsym(handle, AIRT_NCCL_RUN_SYMBOL));
  n.comm_destroy =
      reinterpret_cast<airt_nccl_comm_destroy_fn>(dlsym(handle, AIRT_NCCL_COMM_DESTROY_SYMBOL));
  n.memory = reinterpret_cast<airt_gpu_memory_fn>(dlsym(handle, AIRT_GPU_MEMORY_SYMBOL));
  if (!n.unique_id || !n.comm_init || !n.run || !n.comm_destroy || !n.memory) n = NcclEntries{};
  return plugin;
}

GpuPlugin::GpuPlugin(std::string path, void* handle, Entries entries)
    : path_(std::move(path)), handle_(handle), e_(entries) {}

GpuPlugin::GpuPlugin(GpuPlugin&& other) noexcept
    : path_(std::move(other.path_)),
      handle_(std::exchange(other.handle_, nullptr)),
      e_(std::exchange(other.e_, Entries{})),
      nccl_(std::exchange(other.nccl_, NcclEntries{})) {}

GpuPlugin& GpuPlugin::operator=(GpuPlugin&& other) noexcept {
  if (this != &other) {
    Close();
    path_ = std::move(other.path_);
    handle_ = std::exchange(other.handle_, nullptr);
    e_ = std::exchange(other.e_, Entries{});
    nccl_ = std::exchange(other.nccl_, NcclEntries{});
  }
  return *this;
}

GpuPlugin::~GpuPlugin() { Close(); }

void GpuPlugin::Close() {
  if (handle_ != nullptr) dlclose(handle_);
  handle_ = nullptr;
  e_ = Entries{};
  nccl_ = NcclEntries{};
}

int GpuPlugin::DeviceCount() const { return e_.device_count != nullptr ? e_.device_count() : 0; }

Status GpuPlugin::Probe(int device, uint64_t bytes) const {
  if (e_.probe == nullptr) return FailedPrecondition("GPU plugin was moved from");
  char error[512] = {};
  const int rc = e_.probe(device, static_cast<unsigned long long>(bytes), error, sizeof(error));
  return FromProbeCode(rc, "GPU probe", error);
}

Result<GpuDeviceInfo> GpuPlugin::DeviceInfo(int device) const {
  if (e_.device_info == nullptr) return FailedPrecondition("GPU plugin was moved from");
  char error[512] = {};
  airt_gpu_device_info_t raw{};
  AIRT_RETURN_IF_ERROR(FromProbeCode(e_.device_info(device, &raw, error, sizeof error),
                                     "reading the GPU's description", error));
  return GpuDeviceInfo{raw.name, raw.uuid, raw.pci_bus_id, raw.total_memory, raw.is_mig != 0};
}

Result<airt_gpu_health_t> GpuPlugin::Health(int device) const {
  if (e_.health == nullptr) return FailedPrecondition("GPU plugin was moved from");
  char error[512] = {};
  airt_gpu_health_t health{};
  AIRT_RETURN_IF_ERROR(FromProbeCode(e_.health(device, &health, error, sizeof error),
                                     "reading the GPU's health (NVML)", error));
  return health;
}

Result<std::vector<GpuProcessMemory>> GpuPlugin::ProcessMemory(int device) const {
  if (e_.process_memory == nullptr) return FailedPrecondition("GPU plugin was moved from");
  char error[512] = {};
  int pids[256];
  unsigned long long bytes[256];
  int n = e_.process_memory(device, pids, bytes, 256, error, sizeof error);
  if (n < 0) return Unavailable(std::string("reading per-process GPU memory: ") + error);
  std::vector<GpuProcessMemory> out;
  for (int i = 0; i < n; ++i) out.push_back({pids[i], bytes[i]});
  return out;
}

Result<double> GpuPlugin::Bandwidth(int device, uint64_t bytes) const {
  if (e_.bandwidth == nullptr) return FailedPrecondition("GPU plugin was moved from");
  char error[512] = {};
  double gbps = 0;
  AIRT_RETURN_IF_ERROR(FromProbeCode(e_.bandwidth(device, bytes, &gbps, error, sizeof error),
                                     "GPU bandwidth probe", error));
  return gbps;
}

}  // namespace airt
