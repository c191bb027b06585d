// The GPU plugin's device detection and health probe (see plugin_abi.h for the contract).
// CUDA errors are translated here, once, into AIRT_GPU_PROBE_* values and a message.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "gpu/plugin_abi.h"
#include "gpu/plugin_export.h"


namespace {

constexpr float kSaxpyA = 2.0f;

// Word i of the memory pattern: distinct per word and per bit position, so a stuck bit, a
// dropped write or an aliased address reads back wrong.
__host__ __device__ inline uint32_t PatternWord(uint64_t i) {
  return static_cast<uint32_t>(i * 2654435761ULL) ^ 0xA5A5A5A5u;
}

// Small integers, exact in float, so the host can compare the saxpy result exactly.
__host__ __device__ inline float SaxpyX(uint64_t i) { return static_cast<float>(i % 1024); }
__host__ __device__ inline float SaxpyY(uint64_t i) { return static_cast<float>(i % 7); }

__global__ void WritePattern(uint32_t* words, uint64_t n) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    words[i] = PatternWord(i);
  }
}

__global__ void FillSaxpyInputs(float* x, float* y, uint64_t n) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    x[i] = SaxpyX(i);
    y[i] = SaxpyY(i);
  }
}

__global__ void Saxpy(float a, const float* x, float* y, uint64_t n) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    y[i] = a * x[i] + y[i];
  }
}

// Reads `n` elements of `device_data` back through a host buffer of at most kChunkBytes (so a big
// probe needs little host memory) and compares element i with expected(i). On return *bad is the
// first mismatching index, with its value in *got, or n when all matched.
constexpr uint64_t kChunkBytes = uint64_t{16} << 20;

template <typename T, typename Expected>
cudaError_t ReadBackAndCompare(const T* device_data, uint64_t n, Expected expected, uint64_t* bad,
                               T* got) {
  *bad = n;
  if (n == 0) return cudaSuccess;
  std::vector<T> host(std::min<uint64_t>(n, kChunkBytes / sizeof(T)));
  for (uint64_t begin = 0; begin < n; begin += host.size()) {
    const uint64_t count = std::min<uint64_t>(host.size(), n - begin);
    cudaError_t err =
        cudaMemcpy(host.data(), device_data + begin, count * sizeof(T), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) return err;
    for (uint64_t i = 0; i < count; ++i) {
      if (host[i] != expected(begin + i)) {
        *bad = begin + i;
        *got = host[i];
        return cudaSuccess;
      }
    }
  }
  return cudaSuccess;
}

using airt::gpu_plugin::SetError;

// Maps a CUDA error to an AIRT_GPU_PROBE_* value and writes "device D: <step>: <cuda message>".
int Fail(cudaError_t err, int device, const char* step, char* error, unsigned long error_len) {
  SetError(error, error_len, "device %d: %s: %s (%s)", device, step, cudaGetErrorString(err),
           cudaGetErrorName(err));
  return err == cudaErrorMemoryAllocation ? AIRT_GPU_PROBE_OUT_OF_MEMORY
                                          : AIRT_GPU_PROBE_CUDA_ERROR;
}

// Frees a device allocation and restores the caller's current device on every return path.
class DeviceScope {
 public:
  DeviceScope() { has_previous_ = cudaGetDevice(&previous_) == cudaSuccess; }
  ~DeviceScope() {
    if (buffer_ != nullptr) cudaFree(buffer_);
    if (has_previous_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  void** buffer() { return &buffer_; }

 private:
  int previous_ = 0;
  bool has_previous_ = false;
  void* buffer_ = nullptr;
};

}  // namespace

extern "C" AIRT_GPU_EXPORT int airt_gpu_device_count(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error for later calls
    return 0;
  }
  return count;
}

extern "C" AIRT_GPU_EXPORT int airt_gpu_probe(int device, unsigned long long bytes, char* error,
                                              unsigned long error_len) {
  SetError(error, error_len, "%s", "");
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Fail(err, device, "cudaGetDeviceCount", error, error_len);
  }
  if (device < 0 || device >= count) {
    SetError(error, error_len, "device %d: no such device (%d visible)", device, count);
    return AIRT_GPU_PROBE_INVALID_ARGUMENT;
  }
  if (bytes < AIRT_GPU_PROBE_MIN_BYTES) {
    SetError(error, error_len, "device %d: probe of %llu bytes is below the minimum of %llu",
             device, bytes, AIRT_GPU_PROBE_MIN_BYTES);
    return AIRT_GPU_PROBE_INVALID_ARGUMENT;
  }

  DeviceScope scope;
  if ((err = cudaSetDevice(device)) != cudaSuccess) {
    return Fail(err, device, "cudaSetDevice", error, error_len);
  }
  if ((err = cudaMalloc(scope.buffer(), bytes)) != cudaSuccess) {
    cudaGetLastError();
    return Fail(err, device, "cudaMalloc", error, error_len);
  }
  constexpr int kThreads = 256;
  constexpr int kBlocks = 1024;  // grid-stride loops cover any size

  // Memory: a pattern over every word of the allocation, all of it read back.
  const uint64_t words = bytes / sizeof(uint32_t);
  auto* device_words = static_cast<uint32_t*>(*scope.buffer());
  WritePattern<<<kBlocks, kThreads>>>(device_words, words);
  if ((err = cudaGetLastError()) != cudaSuccess) {
    return Fail(err, device, "launching the pattern kernel", error, error_len);
  }
  uint64_t bad = 0;
  uint32_t got_word = 0;
  err = ReadBackAndCompare(device_words, words, PatternWord, &bad, &got_word);
  if (err != cudaSuccess) {
    return Fail(err, device, "copying the pattern back", error, error_len);
  }
  if (bad != words) {
    SetError(error, error_len, "device %d: memory word %llu read back 0x%08x, wrote 0x%08x", device,
             static_cast<unsigned long long>(bad), got_word, PatternWord(bad));
    return AIRT_GPU_PROBE_MISMATCH;
  }

  // Compute: y = a*x + y over the same allocation, split into x and y halves.
  const uint64_t n = words / 2;
  float* x = reinterpret_cast<float*>(device_words);
  float* y = x + n;
  FillSaxpyInputs<<<kBlocks, kThreads>>>(x, y, n);
  Saxpy<<<kBlocks, kThreads>>>(kSaxpyA, x, y, n);
  if ((err = cudaGetLastError()) != cudaSuccess) {
    return Fail(err, device, "launching the saxpy kernels", error, error_len);
  }
  auto expected_y = [](uint64_t i) { return kSaxpyA * SaxpyX(i) + SaxpyY(i); };
  float got_y = 0;
  err = ReadBackAndCompare(static_cast<const float*>(y), n, expected_y, &bad, &got_y);
  if (err != cudaSuccess) {
    return Fail(err, device, "copying the saxpy result back", error, error_len);
  }
  if (bad != n) {
    SetError(error, error_len, "device %d: saxpy element %llu is %g, want %g", device,
             static_cast<unsigned long long>(bad), static_cast<double>(got_y),
             static_cast<double>(expected_y(bad)));
    return AIRT_GPU_PROBE_MISMATCH;
  }
  return AIRT_GPU_PROBE_OK;
}

extern "C" AIRT_GPU_EXPORT int airt_gpu_bandwidth(int device, unsigned long long bytes,
                                                  double* gbps, char* error,
                                                  unsigned long error_len) {
  SetError(error, error_len, "%s", "");
  *gbps = 0;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Fail(err, device, "cudaGetDeviceCount", error, error_len);
  }
  if (device < 0 || device >= count || bytes < 2 * AIRT_GPU_PROBE_MIN_BYTES) {
    SetError(error, error_len, "device %d: no such device (%d visible) or %llu bytes too few",
             device, count, bytes);
    return AIRT_GPU_PROBE_INVALID_ARGUMENT;
  }
  DeviceScope scope;
  if ((err = cudaSetDevice(device)) != cudaSuccess) {
    return Fail(err, device, "cudaSetDevice", error, error_len);
  }
  if ((err = cudaMalloc(scope.buffer(), bytes)) != cudaSuccess) {
    cudaGetLastError();
    return Fail(err, device, "cudaMalloc", error, error_len);
  }
  // Copies one half onto the other: each byte copied is read once and written once.
  const uint64_t half = bytes / 2;
  char* base = static_cast<char*>(*scope.buffer());
  cudaEvent_t start = nullptr, stop = nullptr;
  if ((err = cudaEventCreate(&start)) != cudaSuccess ||
      (err = cudaEventCreate(&stop)) != cudaSuccess) {
    if (start != nullptr) cudaEventDestroy(start);
    return Fail(err, device, "cudaEventCreate", error, error_len);
  }
  constexpr int kWarmup = 2;
  constexpr int kRuns = 10;
  for (int i = 0; i < kWarmup && err == cudaSuccess; ++i) {
    err = cudaMemcpy(base + half, base, half, cudaMemcpyDeviceToDevice);
  }
  if (err == cudaSuccess) err = cudaEventRecord(start);
  for (int i = 0; i < kRuns && err == cudaSuccess; ++i) {
    err = cudaMemcpyAsync(base + half, base, half, cudaMemcpyDeviceToDevice);
  }
  if (err == cudaSuccess) err = cudaEventRecord(stop);
  if (err == cudaSuccess) err = cudaEventSynchronize(stop);
  float ms = 0;
  if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (err != cudaSuccess) return Fail(err, device, "timing device copies", error, error_len);
  if (ms > 0) *gbps = 2.0 * static_cast<double>(half) * kRuns / (ms * 1e-3) / 1e9;
  return AIRT_GPU_PROBE_OK;
}
