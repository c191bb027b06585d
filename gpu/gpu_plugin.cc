#include "gpu/gpu_plugin.h"

#include <dlfcn.h>

#include <utility>

namespace airt {
namespace {

std::string DlError() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown dlopen error";
}

}  // namespace

Result<GpuPlugin> GpuPlugin::Load(const std::string& path) {
  dlerror();  // clear any earlier error
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return Unavailable("cannot load GPU plugin " + path + ": " + DlError());
  }
  auto device_count =
      reinterpret_cast<airt_gpu_device_count_fn>(dlsym(handle, AIRT_GPU_DEVICE_COUNT_SYMBOL));
  auto probe = reinterpret_cast<airt_gpu_probe_fn>(dlsym(handle, AIRT_GPU_PROBE_SYMBOL));
  if (device_count == nullptr || probe == nullptr) {
    const char* missing =
        device_count == nullptr ? AIRT_GPU_DEVICE_COUNT_SYMBOL : AIRT_GPU_PROBE_SYMBOL;
    std::string message = "GPU plugin " + path + " lacks the symbol " + missing + ": " + DlError();
    dlclose(handle);
    return Internal(std::move(message));
  }
  return GpuPlugin(path, handle, device_count, probe);
}

GpuPlugin::GpuPlugin(std::string path, void* handle, airt_gpu_device_count_fn device_count,
                     airt_gpu_probe_fn probe)
    : path_(std::move(path)), handle_(handle), device_count_(device_count), probe_(probe) {}

GpuPlugin::GpuPlugin(GpuPlugin&& other) noexcept
    : path_(std::move(other.path_)),
      handle_(std::exchange(other.handle_, nullptr)),
      device_count_(std::exchange(other.device_count_, nullptr)),
      probe_(std::exchange(other.probe_, nullptr)) {}

GpuPlugin& GpuPlugin::operator=(GpuPlugin&& other) noexcept {
  if (this != &other) {
    Close();
    path_ = std::move(other.path_);
    handle_ = std::exchange(other.handle_, nullptr);
    device_count_ = std::exchange(other.device_count_, nullptr);
    probe_ = std::exchange(other.probe_, nullptr);
  }
  return *this;
}

GpuPlugin::~GpuPlugin() { Close(); }

void GpuPlugin::Close() {
  if (handle_ != nullptr) dlclose(handle_);
  handle_ = nullptr;
  device_count_ = nullptr;
  probe_ = nullptr;
}

int GpuPlugin::DeviceCount() const { return device_count_ != nullptr ? device_count_() : 0; }

Status GpuPlugin::Probe(int device, uint64_t bytes) const {
  if (probe_ == nullptr) return FailedPrecondition("GPU plugin was moved from");
  char error[512] = {};
  const int rc = probe_(device, static_cast<unsigned long long>(bytes), error, sizeof(error));
  std::string message = std::string("GPU probe failed: ") + error;
  switch (rc) {
    case AIRT_GPU_PROBE_OK: return Status::Ok();
    case AIRT_GPU_PROBE_INVALID_ARGUMENT: return InvalidArgument(std::move(message));
    case AIRT_GPU_PROBE_OUT_OF_MEMORY: return ResourceExhausted(std::move(message));
    case AIRT_GPU_PROBE_CUDA_ERROR: return Unavailable(std::move(message));
    case AIRT_GPU_PROBE_MISMATCH: return Internal(std::move(message));
    default: return Internal(message + " (unknown plugin return value " + std::to_string(rc) + ")");
  }
}

}  // namespace airt
