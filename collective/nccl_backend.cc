// The NCCL backend: the GPU plugin's NCCL calls (gpu/plugin_abi.h), opened with dlopen like every
// GPU path, so that airt_collective loads on machines without CUDA. NCCL's return values are
// turned into Status here.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "collective/communicator.h"
#include "gpu/gpu_plugin.h"

namespace airt::collective {
namespace {

constexpr char kPluginFile[] = "libairt_gpu_plugin.so";

Status FromPlugin(int rc, const char* error, const std::string& step) {
  std::string message = "nccl: " + step + ": " + error;
  switch (rc) {
    case AIRT_GPU_PROBE_OK: return Status::Ok();
    case AIRT_GPU_PROBE_INVALID_ARGUMENT: return InvalidArgument(message);
    case AIRT_GPU_PROBE_OUT_OF_MEMORY: return ResourceExhausted(message);
    case AIRT_GPU_NCCL_TIMEOUT: return DeadlineExceeded(message);
    default: return Unavailable(message);
  }
}

class NcclBackend final : public Backend {
 public:
  NcclBackend(GpuPlugin plugin, void* comm) : plugin_(std::move(plugin)), comm_(comm) {}
  ~NcclBackend() override { plugin_.nccl().comm_destroy(comm_); }

  Status Run(const Operation& op) override {
    airt_nccl_op_t o{};
    o.kind = static_cast<int>(op.kind);
    o.input = op.input.data;
    o.output = op.output.data;
    o.count = op.kind == OpKind::kAllgather ? op.input.count : op.output.count;
    o.dtype = static_cast<int>(op.input.type);
    o.reduce_op = static_cast<int>(op.op);
    o.peer = op.peer;
    o.timeout_ms = op.timeout.count();
    char error[512] = {};
    return FromPlugin(plugin_.nccl().run(comm_, &o, error, sizeof(error)), error,
                      OpName(op.kind));
  }

 private:
  GpuPlugin plugin_;
  void* comm_;
};

}  // namespace

std::string GpuPluginPath() {
  if (const char* env = std::getenv("AIRT_GPU_PLUGIN"); env && *env) return env;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&GpuPluginPath), &info) == 0 || !info.dli_fname) return "";
  std::filesystem::path here = std::filesystem::path(info.dli_fname).parent_path();
  for (const auto& p : {here / kPluginFile, here.parent_path() / "gpu" / kPluginFile,
                        here.parent_path() / "lib" / kPluginFile}) {
    if (std::filesystem::exists(p)) return p.string();
  }
  return "";
}

Result<std::unique_ptr<Backend>> ConnectNccl(const GroupOptions& options, RendezvousKv& kv,
                                             const std::string& prefix, const std::string&) {
  std::string path = GpuPluginPath();
  if (path.empty()) {
    return Unimplemented("the nccl backend needs the GPU plugin (libairt_gpu_plugin.so, built "
                         "with AIRT_WITH_CUDA), which is not beside airt's libraries; set "
                         "AIRT_GPU_PLUGIN to its path");
  }
  AIRT_ASSIGN_OR_RETURN(GpuPlugin plugin, GpuPlugin::Load(path));
  if (!plugin.nccl().run) {
    return Unimplemented("the GPU plugin " + path + " has no NCCL entry points (an older build)");
  }
  if (plugin.DeviceCount() == 0) {
    return FailedPrecondition("the nccl backend needs a CUDA device; this process sees none "
                              "(CUDA_VISIBLE_DEVICES, or no driver)");
  }
  char id[AIRT_NCCL_UNIQUE_ID_BYTES] = {};
  char error[512] = {};
  const std::string key = prefix + "unique_id";
  if (options.rank == 0) {
    AIRT_RETURN_IF_ERROR(
        FromPlugin(plugin.nccl().unique_id(id, error, sizeof(error)), error, "ncclGetUniqueId"));
    AIRT_RETURN_IF_ERROR(kv.Put(key, std::string(id, sizeof(id))));
  } else {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout_ms);
    auto pause = std::chrono::milliseconds(1);
    while (true) {
      AIRT_ASSIGN_OR_RETURN(std::optional<std::string> got, kv.Get(key));
      if (got && got->size() == sizeof(id)) {
        std::memcpy(id, got->data(), sizeof(id));
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        return DeadlineExceeded("rank 0 did not publish the NCCL unique id within " +
                                std::to_string(options.timeout_ms) + " ms (ranks 0 did not join)");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
  }
  void* comm = nullptr;
  AIRT_RETURN_IF_ERROR(FromPlugin(plugin.nccl().comm_init(options.world_size, options.rank, id,
                                                          /*device=*/0, &comm, error,
                                                          sizeof(error)),
                                  error, "ncclCommInitRank"));
  return std::unique_ptr<Backend>(new NcclBackend(std::move(plugin), comm));
}

}  // namespace airt::collective
