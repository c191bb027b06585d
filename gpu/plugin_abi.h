/* The C interface of the GPU plugin (libairt_gpu_plugin.so), shared by the plugin and its loader.
 * The plugin is opened with dlopen so that airt binaries start on machines without CUDA; only
 * these functions cross that boundary, so this header stays plain C. */
#ifndef AIRT_GPU_PLUGIN_ABI_H_
#define AIRT_GPU_PLUGIN_ABI_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Return values of airt_gpu_probe. */
enum {
  AIRT_GPU_PROBE_OK = 0,
  AIRT_GPU_PROBE_INVALID_ARGUMENT = 1, /* no such device, or too few bytes to probe */
  AIRT_GPU_PROBE_OUT_OF_MEMORY = 2,    /* the device could not allocate the bytes */
  AIRT_GPU_PROBE_CUDA_ERROR = 3,       /* any other CUDA error: the device is unusable */
  AIRT_GPU_PROBE_MISMATCH = 4,         /* memory or arithmetic read back wrong: a faulty device */
};

/* The fewest bytes airt_gpu_probe accepts. */
#define AIRT_GPU_PROBE_MIN_BYTES 4096ULL

/* Number of CUDA devices visible to this process; 0 on any CUDA error (no driver, no device). */
typedef int (*airt_gpu_device_count_fn)(void); /* NOLINT(modernize-redundant-void-arg): C */
#define AIRT_GPU_DEVICE_COUNT_SYMBOL "airt_gpu_device_count"

/* The short compute and memory probe of a health check: allocates `bytes` on `device`, has a
 * kernel write a pattern over all of it and another compute a saxpy, copies both back and checks
 * them on the host. Returns AIRT_GPU_PROBE_OK, or another AIRT_GPU_PROBE_* value with a
 * NUL-terminated message (truncated to error_len) in `error`. Blocks the calling thread until
 * the device is done; the thread's current device is restored before returning. */
typedef int (*airt_gpu_probe_fn)(int device, unsigned long long bytes, char* error,
                                 unsigned long error_len);
#define AIRT_GPU_PROBE_SYMBOL "airt_gpu_probe"

#ifdef __cplusplus
}
#endif

#endif /* AIRT_GPU_PLUGIN_ABI_H_ */
