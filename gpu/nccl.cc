// The GPU plugin's NCCL calls (plugin_abi.h "NCCL") and its device-memory helper: libnccl.so.2
// is opened with dlopen at first use, so the plugin loads where NCCL is absent; nccl.h gives the
// types only. CUDA through the static runtime the plugin links.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>

#include "gpu/plugin_abi.h"
#include "gpu/plugin_export.h"


namespace {

using airt::gpu_plugin::SetError;

// The NCCL functions airt calls, resolved from libnccl.so.2 once.
struct Nccl {
  bool ok = false;
  char why[256] = {};
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclReduce) reduce = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
};

const Nccl& Library() {
  static Nccl nccl;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::snprintf(nccl.why, sizeof(nccl.why), "libnccl.so.2 cannot be opened: %s", dlerror());
      return;
    }
    bool all = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr) {
        all = false;
        std::snprintf(nccl.why, sizeof(nccl.why), "libnccl.so.2 lacks %s", name);
      }
    };
    sym(nccl.get_unique_id, "ncclGetUniqueId");
    sym(nccl.comm_init_rank, "ncclCommInitRank");
    sym(nccl.comm_destroy, "ncclCommDestroy");
    sym(nccl.comm_abort, "ncclCommAbort");
    sym(nccl.error_string, "ncclGetErrorString");
    sym(nccl.all_reduce, "ncclAllReduce");
    sym(nccl.broadcast, "ncclBroadcast");
    sym(nccl.all_gather, "ncclAllGather");
    sym(nccl.reduce_scatter, "ncclReduceScatter");
    sym(nccl.reduce, "ncclReduce");
    sym(nccl.send, "ncclSend");
    sym(nccl.recv, "ncclRecv");
    nccl.ok = all;
  });
  return nccl;
}

struct Comm {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  void* scratch = nullptr;  // one float for barriers
};

int NcclFailed(const Nccl& nccl, ncclResult_t r, const char* step, char* error,
               unsigned long error_len) {
  SetError(error, error_len, "%s: %s", step, nccl.error_string(r));
  return AIRT_GPU_PROBE_CUDA_ERROR;
}

int CudaFailed(cudaError_t e, const char* step, char* error, unsigned long error_len) {
  SetError(error, error_len, "%s: %s", step, cudaGetErrorString(e));
  return AIRT_GPU_PROBE_CUDA_ERROR;
}

bool DataTypeOf(int dtype, ncclDataType_t* out) {
  static const ncclDataType_t types[] = {ncclInt8,  ncclUint8,   ncclInt32,  ncclInt64,
                                         ncclFloat16, ncclFloat32, ncclFloat64};
  if (dtype < 0 || dtype > 6) return false;
  *out = types[dtype];
  return true;
}

bool RedOpOf(int op, ncclRedOp_t* out) {
  static const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMin, ncclMax, ncclAvg};
  if (op < 0 || op > 4) return false;
  *out = ops[op];
  return true;
}

}  // namespace

extern "C" AIRT_GPU_EXPORT int airt_nccl_unique_id(char* id, char* error,
                                                   unsigned long error_len) {
  const Nccl& nccl = Library();
  if (!nccl.ok) {
    SetError(error, error_len, "%s", nccl.why);
    return AIRT_GPU_PROBE_CUDA_ERROR;
  }
  static_assert(sizeof(ncclUniqueId) == AIRT_NCCL_UNIQUE_ID_BYTES);
  ncclUniqueId unique;
  if (ncclResult_t r = nccl.get_unique_id(&unique); r != ncclSuccess) {
    return NcclFailed(nccl, r, "ncclGetUniqueId", error, error_len);
  }
  std::memcpy(id, &unique, sizeof(unique));
  return AIRT_GPU_PROBE_OK;
}

extern "C" AIRT_GPU_EXPORT int airt_nccl_comm_init(int world, int rank, const char* id,
                                                   int device, void** comm, char* error,
                                                   unsigned long error_len) {
  const Nccl& nccl = Library();
  if (!nccl.ok) {
    SetError(error, error_len, "%s", nccl.why);
    return AIRT_GPU_PROBE_CUDA_ERROR;
  }
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return CudaFailed(e, "cudaSetDevice", error, error_len);
  }
  auto* c = new Comm();
  c->device = device;
  ncclUniqueId unique;
  std::memcpy(&unique, id, sizeof(unique));
  if (cudaError_t e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    delete c;
    return CudaFailed(e, "cudaStreamCreate", error, error_len);
  }
  if (cudaError_t e = cudaMalloc(&c->scratch, sizeof(float)); e != cudaSuccess) {
    cudaStreamDestroy(c->stream);
    delete c;
    return CudaFailed(e, "cudaMalloc", error, error_len);
  }
  if (ncclResult_t r = nccl.comm_init_rank(&c->comm, world, unique, rank); r != ncclSuccess) {
    cudaFree(c->scratch);
    cudaStreamDestroy(c->stream);
    delete c;
    return NcclFailed(nccl, r, "ncclCommInitRank", error, error_len);
  }
  *comm = c;
  return AIRT_GPU_PROBE_OK;
}

extern "C" AIRT_GPU_EXPORT int airt_nccl_run(void* handle, const airt_nccl_op_t* op, char* error,
                                             unsigned long error_len) {
  const Nccl& nccl = Library();
  auto* c = static_cast<Comm*>(handle);
  ncclDataType_t type;
  ncclRedOp_t red;
  if (c == nullptr || op == nullptr || !DataTypeOf(op->dtype, &type) ||
      !RedOpOf(op->reduce_op, &red)) {
    SetError(error, error_len, "bad NCCL operation (type %d, op %d)", op ? op->dtype : -1,
             op ? op->reduce_op : -1);
    return AIRT_GPU_PROBE_INVALID_ARGUMENT;
  }
  cudaSetDevice(c->device);
  ncclResult_t r = ncclSuccess;
  const size_t n = op->count;
  switch (op->kind) {
    case 0: r = nccl.all_reduce(op->input, op->output, n, type, red, c->comm, c->stream); break;
    case 1:
      r = nccl.broadcast(op->input, op->output, n, type, op->peer, c->comm, c->stream);
      break;
    case 2: r = nccl.all_gather(op->input, op->output, n, type, c->comm, c->stream); break;
    case 3:
      r = nccl.reduce_scatter(op->input, op->output, n, type, red, c->comm, c->stream);
      break;
    case 4:
      r = nccl.reduce(op->input, op->output, n, type, red, op->peer, c->comm, c->stream);
      break;
    case 5: r = nccl.send(op->input, n, type, op->peer, c->comm, c->stream); break;
    case 6: r = nccl.recv(op->output, n, type, op->peer, c->comm, c->stream); break;
    case 7:
      r = nccl.all_reduce(c->scratch, c->scratch, 1, ncclFloat32, ncclSum, c->comm, c->stream);
      break;
    default:
      SetError(error, error_len, "unknown NCCL operation %d", op->kind);
      return AIRT_GPU_PROBE_INVALID_ARGUMENT;
  }
  if (r != ncclSuccess) return NcclFailed(nccl, r, "launching the NCCL operation", error, error_len);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(op->timeout_ms);
  while (true) {
    cudaError_t e = cudaStreamQuery(c->stream);
    if (e == cudaSuccess) return AIRT_GPU_PROBE_OK;
    if (e != cudaErrorNotReady) return CudaFailed(e, "the NCCL operation", error, error_len);
    if (std::chrono::steady_clock::now() >= deadline) {
      nccl.comm_abort(c->comm);
      c->comm = nullptr;
      SetError(error, error_len, "timed out after %lld ms (the communicator was aborted)",
               op->timeout_ms);
      return AIRT_GPU_NCCL_TIMEOUT;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

extern "C" AIRT_GPU_EXPORT void airt_nccl_comm_destroy(void* handle) {
  auto* c = static_cast<Comm*>(handle);
  if (c == nullptr) return;
  const Nccl& nccl = Library();
  cudaSetDevice(c->device);
  if (c->comm != nullptr) nccl.comm_destroy(c->comm);
  cudaFree(c->scratch);
  cudaStreamDestroy(c->stream);
  delete c;
}

extern "C" AIRT_GPU_EXPORT int airt_gpu_memory(int device, int what, void** device_ptr,
                                               void* host, unsigned long long bytes, char* error,
                                               unsigned long error_len) {
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    return CudaFailed(e, "cudaSetDevice", error, error_len);
  }
  cudaError_t e = cudaSuccess;
  switch (what) {
    case 0: e = cudaMalloc(device_ptr, bytes); break;
    case 1: e = cudaFree(*device_ptr); break;
    case 2: e = cudaMemcpy(*device_ptr, host, bytes, cudaMemcpyHostToDevice); break;
    case 3: e = cudaMemcpy(host, *device_ptr, bytes, cudaMemcpyDeviceToHost); break;
    default:
      SetError(error, error_len, "unknown memory request %d", what);
      return AIRT_GPU_PROBE_INVALID_ARGUMENT;
  }
  if (e == cudaErrorMemoryAllocation) {
    SetError(error, error_len, "cudaMalloc of %llu bytes: out of memory", bytes);
    return AIRT_GPU_PROBE_OUT_OF_MEMORY;
  }
  return e == cudaSuccess ? AIRT_GPU_PROBE_OK : CudaFailed(e, "device memory", error, error_len);
}
