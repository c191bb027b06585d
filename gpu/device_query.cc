// The GPU plugin's discovery and health counters (see plugin_abi.h for the contract): the CUDA
// driver API (libcuda.so.1) and NVML (libnvidia-ml.so.1), both opened with dlopen at first use
// so that the plugin loads where they are absent. There is no nvml.h or cuda.h dependency: the
// few functions called are declared here with their documented C signatures.
#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "gpu/plugin_abi.h"
#include "gpu/plugin_export.h"


namespace {

using airt::gpu_plugin::SetError;

template <typename F>
F Sym(void* lib, const char* name) {
  return lib == nullptr ? nullptr : reinterpret_cast<F>(dlsym(lib, name));
}

// ---- the CUDA driver API ----------------------------------------------------------------------
using CUresult = int;
using CUdevice = int;
struct CUuuid {
  unsigned char bytes[16];
};

struct Driver {
  void* lib = nullptr;
  CUresult init_result = -1;
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice) = nullptr;
  CUresult (*cuDeviceGetUuid)(CUuuid*, CUdevice) = nullptr;     // the parent GPU's
  CUresult (*cuDeviceGetUuid_v2)(CUuuid*, CUdevice) = nullptr;  // a MIG instance's own
  CUresult (*cuDeviceGetPCIBusId)(char*, int, CUdevice) = nullptr;
};

const Driver& GetDriver() {
  static const Driver driver = [] {
    Driver d;
    d.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (d.lib == nullptr) return d;
    d.cuInit = Sym<decltype(d.cuInit)>(d.lib, "cuInit");
    d.cuDeviceGetCount = Sym<decltype(d.cuDeviceGetCount)>(d.lib, "cuDeviceGetCount");
    d.cuDeviceGet = Sym<decltype(d.cuDeviceGet)>(d.lib, "cuDeviceGet");
    d.cuDeviceGetName = Sym<decltype(d.cuDeviceGetName)>(d.lib, "cuDeviceGetName");
    d.cuDeviceTotalMem = Sym<decltype(d.cuDeviceTotalMem)>(d.lib, "cuDeviceTotalMem_v2");
    d.cuDeviceGetUuid = Sym<decltype(d.cuDeviceGetUuid)>(d.lib, "cuDeviceGetUuid");
    d.cuDeviceGetUuid_v2 = Sym<decltype(d.cuDeviceGetUuid_v2)>(d.lib, "cuDeviceGetUuid_v2");
    d.cuDeviceGetPCIBusId = Sym<decltype(d.cuDeviceGetPCIBusId)>(d.lib, "cuDeviceGetPCIBusId");
    if (d.cuInit != nullptr) d.init_result = d.cuInit(0);
    return d;
  }();
  return driver;
}

std::string FormatUuid(const CUuuid& uuid, const char* prefix) {
  char text[64];
  const unsigned char* b = uuid.bytes;
  std::snprintf(text, sizeof text,
                "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix,
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                b[13], b[14], b[15]);
  return text;
}

// ---- NVML ---------------------------------------------------------------------------------------
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
using nvmlEventSet_t = void*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlNotSupported = 3;
constexpr nvmlReturn_t kNvmlTimeout = 10;
constexpr unsigned long long kNvmlEventXidCritical = 0x8;

struct nvmlProcessInfo_t {  // nvmlProcessInfo_v2_t (used by _v2 and _v3)
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
};
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
};

struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t init_result = -1;
  nvmlEventSet_t events = nullptr;
  const char* (*ErrorString)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*GetHandleByUUID)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*GetHandleByPciBusId)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*GetTotalEccErrors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*GetRetiredPagesPendingStatus)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*GetRemappedRows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*,
                                  unsigned*) = nullptr;
  nvmlReturn_t (*GetThrottleReasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*GetComputeProcesses)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*) = nullptr;
  nvmlReturn_t (*EventSetCreate)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*RegisterEvents)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*EventSetWait)(nvmlEventSet_t, nvmlEventData_t*, unsigned) = nullptr;

  std::mutex mutex;  // guards what follows
  std::map<nvmlDevice_t, bool> registered;
  std::map<nvmlDevice_t, std::pair<unsigned long long, unsigned long long>> xids;  // count, last

  const char* Error(nvmlReturn_t r) const { return ErrorString ? ErrorString(r) : "NVML error"; }
};

Nvml& GetNvml() {
  static Nvml* nvml = [] {
    auto* n = new Nvml;  // lives as long as the process: NVML has no safe teardown order
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (n->lib == nullptr) return n;
    auto init = Sym<nvmlReturn_t (*)()>(n->lib, "nvmlInit_v2");
    n->ErrorString = Sym<decltype(n->ErrorString)>(n->lib, "nvmlErrorString");
    n->GetHandleByUUID = Sym<decltype(n->GetHandleByUUID)>(n->lib, "nvmlDeviceGetHandleByUUID");
    n->GetHandleByPciBusId =
        Sym<decltype(n->GetHandleByPciBusId)>(n->lib, "nvmlDeviceGetHandleByPciBusId_v2");
    n->GetTotalEccErrors =
        Sym<decltype(n->GetTotalEccErrors)>(n->lib, "nvmlDeviceGetTotalEccErrors");
    n->GetRetiredPagesPendingStatus = Sym<decltype(n->GetRetiredPagesPendingStatus)>(
        n->lib, "nvmlDeviceGetRetiredPagesPendingStatus");
    n->GetRemappedRows = Sym<decltype(n->GetRemappedRows)>(n->lib, "nvmlDeviceGetRemappedRows");
    n->GetThrottleReasons = Sym<decltype(n->GetThrottleReasons)>(
        n->lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    n->GetComputeProcesses = Sym<decltype(n->GetComputeProcesses)>(
        n->lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (n->GetComputeProcesses == nullptr) {
      n->GetComputeProcesses = Sym<decltype(n->GetComputeProcesses)>(
          n->lib, "nvmlDeviceGetComputeRunningProcesses_v2");
    }
    n->EventSetCreate = Sym<decltype(n->EventSetCreate)>(n->lib, "nvmlEventSetCreate");
    n->RegisterEvents = Sym<decltype(n->RegisterEvents)>(n->lib, "nvmlDeviceRegisterEvents");
    n->EventSetWait = Sym<decltype(n->EventSetWait)>(n->lib, "nvmlEventSetWait_v2");
    if (init != nullptr) n->init_result = init();
    if (n->init_result == kNvmlSuccess && n->EventSetCreate != nullptr) {
      if (n->EventSetCreate(&n->events) != kNvmlSuccess) n->events = nullptr;
    }
    return n;
  }();
  return *nvml;
}

}  // namespace
extern "C" int airt_gpu_device_info(int device, airt_gpu_device_info_t* info, char* error,
                                    unsigned long error_len);
namespace {

// The NVML handle of CUDA device `device` (by its UUID, which also finds MIG instances, else by
// its PCI bus id). nullptr when NVML is absent or does not know it.
nvmlDevice_t NvmlHandle(int device) {
  Nvml& nvml = GetNvml();
  if (nvml.init_result != kNvmlSuccess) return nullptr;
  airt_gpu_device_info_t info{};
  if (airt_gpu_device_info(device, &info, nullptr, 0) != AIRT_GPU_PROBE_OK) return nullptr;
  nvmlDevice_t handle = nullptr;
  if (nvml.GetHandleByUUID != nullptr && nvml.GetHandleByUUID(info.uuid, &handle) == 0) {
    return handle;
  }
  if (nvml.GetHandleByPciBusId != nullptr &&
      nvml.GetHandleByPciBusId(info.pci_bus_id, &handle) == kNvmlSuccess) {
    return handle;
  }
  return nullptr;
}

// Moves the XID events NVML queued (for every device) into the per-device counts.
void DrainXids(Nvml& nvml) {
  if (nvml.events == nullptr || nvml.EventSetWait == nullptr) return;
  for (int i = 0; i < 1024; ++i) {
    nvmlEventData_t data{};
    nvmlReturn_t r = nvml.EventSetWait(nvml.events, &data, 0);
    if (r != kNvmlSuccess) break;  // kNvmlTimeout: none left
    if ((data.eventType & kNvmlEventXidCritical) == 0) continue;
    auto& [count, last] = nvml.xids[data.device];
    ++count;
    last = data.eventData;
  }
}

}  // namespace

extern "C" AIRT_GPU_EXPORT int airt_gpu_device_info(int device, airt_gpu_device_info_t* info,
                                                    char* error, unsigned long error_len) {
  SetError(error, error_len, "%s", "");
  const Driver& d = GetDriver();
  if (d.lib == nullptr || d.cuDeviceGetCount == nullptr || d.cuDeviceGet == nullptr) {
    SetError(error, error_len, "no CUDA driver (libcuda.so.1 cannot be opened)");
    return AIRT_GPU_PROBE_CUDA_ERROR;
  }
  if (d.init_result != 0) {
    SetError(error, error_len, "cuInit failed with CUDA error %d", d.init_result);
    return AIRT_GPU_PROBE_CUDA_ERROR;
  }
  int count = 0;
  if (d.cuDeviceGetCount(&count) != 0 || device < 0 || device >= count) {
    SetError(error, error_len, "device %d: no such device (%d visible)", device, count);
    return AIRT_GPU_PROBE_INVALID_ARGUMENT;
  }
  CUdevice dev = 0;
  CUresult r = d.cuDeviceGet(&dev, device);
  if (r != 0) {
    SetError(error, error_len, "device %d: cuDeviceGet failed with CUDA error %d", device, r);
    return AIRT_GPU_PROBE_CUDA_ERROR;
  }
  std::memset(info, 0, sizeof *info);
  if (d.cuDeviceGetName != nullptr) d.cuDeviceGetName(info->name, sizeof info->name, dev);
  size_t bytes = 0;
  if (d.cuDeviceTotalMem != nullptr && d.cuDeviceTotalMem(&bytes, dev) == 0) {
    info->total_memory = bytes;
  }
  if (d.cuDeviceGetPCIBusId != nullptr) {
    d.cuDeviceGetPCIBusId(info->pci_bus_id, sizeof info->pci_bus_id, dev);
  }
  CUuuid parent{}, own{};
  bool have_parent = d.cuDeviceGetUuid != nullptr && d.cuDeviceGetUuid(&parent, dev) == 0;
  bool have_own = d.cuDeviceGetUuid_v2 != nullptr && d.cuDeviceGetUuid_v2(&own, dev) == 0;
  // A MIG instance has a UUID of its own (v2) that differs from its GPU's (v1).
  info->is_mig = have_parent && have_own && std::memcmp(parent.bytes, own.bytes, 16) != 0;
  if (have_own || have_parent) {
    std::string uuid = FormatUuid(have_own ? own : parent, info->is_mig ? "MIG" : "GPU");
    std::snprintf(info->uuid, sizeof info->uuid, "%s", uuid.c_str());
  }
  return AIRT_GPU_PROBE_OK;
}

extern "C" AIRT_GPU_EXPORT int airt_gpu_health(int device, airt_gpu_health_t* health, char* error,
                                               unsigned long error_len) {
  SetError(error, error_len, "%s", "");
  std::memset(health, 0, sizeof *health);
  Nvml& nvml = GetNvml();
  if (nvml.lib == nullptr) return AIRT_GPU_PROBE_OK;  // nvml_ok 0: nothing to read
  if (nvml.init_result != kNvmlSuccess) {
    SetError(error, error_len, "device %d: nvmlInit failed: %s", device,
             nvml.Error(nvml.init_result));
    return AIRT_GPU_PROBE_CUDA_ERROR;
  }
  nvmlDevice_t handle = NvmlHandle(device);
  if (handle == nullptr) return AIRT_GPU_PROBE_OK;
  health->nvml_ok = 1;
  std::lock_guard<std::mutex> lock(nvml.mutex);
  if (!nvml.registered[handle] && nvml.events != nullptr && nvml.RegisterEvents != nullptr) {
    nvml.registered[handle] = true;
    nvml.RegisterEvents(handle, kNvmlEventXidCritical, nvml.events);
  }
  DrainXids(nvml);
  auto& [count, last] = nvml.xids[handle];
  health->xid_count = count;
  health->last_xid = last;
  count = 0;
  nvmlReturn_t r = kNvmlSuccess;
  // Uncorrectable (1) errors, volatile (0) counter: since the last driver reload.
  if (nvml.GetTotalEccErrors != nullptr &&
      (r = nvml.GetTotalEccErrors(handle, 1, 0, &health->ecc_uncorrectable)) != kNvmlSuccess &&
      r != kNvmlNotSupported) {
    SetError(error, error_len, "device %d: reading ECC errors: %s", device, nvml.Error(r));
    return AIRT_GPU_PROBE_CUDA_ERROR;
  }
  int pending = 0;
  if (nvml.GetRetiredPagesPendingStatus != nullptr &&
      nvml.GetRetiredPagesPendingStatus(handle, &pending) == kNvmlSuccess) {
    health->retired_pages_pending = pending != 0;
  }
  unsigned corrected = 0, uncorrected = 0, is_pending = 0, failed = 0;
  if (nvml.GetRemappedRows != nullptr &&
      nvml.GetRemappedRows(handle, &corrected, &uncorrected, &is_pending, &failed) ==
          kNvmlSuccess) {
    health->remapped_rows_pending = is_pending != 0;
    health->remapping_failed = failed != 0;
  }
  if (nvml.GetThrottleReasons != nullptr &&
      (r = nvml.GetThrottleReasons(handle, &health->throttle_reasons)) != kNvmlSuccess &&
      r != kNvmlNotSupported) {
    SetError(error, error_len, "device %d: reading throttle reasons: %s", device, nvml.Error(r));
    return AIRT_GPU_PROBE_CUDA_ERROR;
  }
  (void)kNvmlTimeout;
  return AIRT_GPU_PROBE_OK;
}

extern "C" AIRT_GPU_EXPORT int airt_gpu_process_memory(int device, int* pids,
                                                       unsigned long long* bytes, int max,
                                                       char* error, unsigned long error_len) {
  SetError(error, error_len, "%s", "");
  Nvml& nvml = GetNvml();
  if (nvml.init_result != kNvmlSuccess || nvml.GetComputeProcesses == nullptr) {
    SetError(error, error_len, "device %d: NVML is not available to read process memory", device);
    return -1;
  }
  nvmlDevice_t handle = NvmlHandle(device);
  if (handle == nullptr) {
    SetError(error, error_len, "device %d: NVML does not know this device", device);
    return -1;
  }
  nvmlProcessInfo_t infos[256];
  unsigned count = sizeof infos / sizeof infos[0];
  nvmlReturn_t r = nvml.GetComputeProcesses(handle, &count, infos);
  if (r != kNvmlSuccess) {
    SetError(error, error_len, "device %d: listing processes: %s", device, nvml.Error(r));
    return -1;
  }
  int n = 0;
  for (unsigned i = 0; i < count && n < max; ++i, ++n) {
    pids[n] = static_cast<int>(infos[i].pid);
    bytes[n] = infos[i].usedGpuMemory;
  }
  return n;
}
