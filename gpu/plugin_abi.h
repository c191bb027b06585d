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


/* One device as the CUDA driver API and NVML describe it (airt_gpu_device_info). */
typedef struct airt_gpu_device_info_t {
  char name[96];                   /* the marketing name, "NVIDIA H100 80GB HBM3" */
  char uuid[96];                   /* "GPU-<hex>" or, for a MIG instance, "MIG-<hex>" */
  char pci_bus_id[32];             /* "0000:3B:00.0" */
  unsigned long long total_memory; /* bytes */
  int is_mig;                      /* 1: a MIG instance (a device of its own) */
} airt_gpu_device_info_t;

/* Describes CUDA device `device` as this process sees it (after CUDA_VISIBLE_DEVICES) through
 * the driver API (libcuda.so.1, opened at run time). Returns AIRT_GPU_PROBE_OK, or
 * AIRT_GPU_PROBE_INVALID_ARGUMENT (no such device) / AIRT_GPU_PROBE_CUDA_ERROR (no driver) with
 * a message in `error`. */
typedef int (*airt_gpu_device_info_fn)(int device, airt_gpu_device_info_t* info, char* error,
                                       unsigned long error_len);
#define AIRT_GPU_DEVICE_INFO_SYMBOL "airt_gpu_device_info"

/* Health counters of one device from NVML (libnvidia-ml.so.1, opened at run time). */
typedef struct airt_gpu_health_t {
  int nvml_ok;                          /* 0: NVML absent or the device unknown to it */
  unsigned long long xid_count;         /* critical XID events since the previous call */
  unsigned long long last_xid;          /* the latest of them */
  unsigned long long ecc_uncorrectable; /* volatile uncorrectable ECC errors; 0 without ECC */
  int retired_pages_pending;            /* 1: pages retired, pending a reset */
  int remapped_rows_pending;            /* 1: rows remapped, pending a reset */
  int remapping_failed;                 /* 1: a row remapping failed */
  unsigned long long throttle_reasons;  /* NVML's clocks throttle reasons bit mask */
} airt_gpu_health_t;

/* NVML's throttle reasons that mean the hardware slows itself down. */
#define AIRT_GPU_THROTTLE_HW_SLOWDOWN 0x8ULL
#define AIRT_GPU_THROTTLE_SW_THERMAL 0x20ULL
#define AIRT_GPU_THROTTLE_HW_THERMAL 0x40ULL
#define AIRT_GPU_THROTTLE_HW_POWER_BRAKE 0x80ULL

/* Reads the health counters of CUDA device `device`. AIRT_GPU_PROBE_OK with nvml_ok 0 where
 * NVML is absent; AIRT_GPU_PROBE_CUDA_ERROR when NVML is there but does not answer. */
typedef int (*airt_gpu_health_fn)(int device, airt_gpu_health_t* health, char* error,
                                  unsigned long error_len);
#define AIRT_GPU_HEALTH_SYMBOL "airt_gpu_health"

/* The processes using device `device` and the bytes each holds (NVML): fills up to `max` pairs
 * and returns how many, or -1 with a message in `error` (NVML absent or not answering). */
typedef int (*airt_gpu_process_memory_fn)(int device, int* pids, unsigned long long* bytes,
                                          int max, char* error, unsigned long error_len);
#define AIRT_GPU_PROCESS_MEMORY_SYMBOL "airt_gpu_process_memory"

/* Device-to-device copy bandwidth over `bytes` of `device` memory, in GB/s (bytes read plus
 * bytes written per second), into *gbps. Returns as airt_gpu_probe. */
typedef int (*airt_gpu_bandwidth_fn)(int device, unsigned long long bytes, double* gbps,
                                     char* error, unsigned long error_len);
#define AIRT_GPU_BANDWIDTH_SYMBOL "airt_gpu_bandwidth"

/* ---- NCCL: the "nccl" backend of collective/ (collective/nccl_backend.cc) -------------------
 * The plugin opens libnccl.so.2 at the first of these calls (so it still loads where NCCL is
 * absent). Each returns AIRT_GPU_PROBE_OK, AIRT_GPU_PROBE_INVALID_ARGUMENT, AIRT_GPU_NCCL_TIMEOUT
 * or AIRT_GPU_PROBE_CUDA_ERROR (NCCL or CUDA failed, or NCCL is absent) with a message. */
#define AIRT_GPU_NCCL_TIMEOUT 5
#define AIRT_NCCL_UNIQUE_ID_BYTES 128

/* A new NCCL unique id (rank 0's, handed to the others through the head's KV). */
typedef int (*airt_nccl_unique_id_fn)(char* id, char* error, unsigned long error_len);
#define AIRT_NCCL_UNIQUE_ID_SYMBOL "airt_nccl_unique_id"

/* Joins the communicator of `id` as `rank` of `world` on CUDA device `device`; *comm is the
 * handle the other calls take. */
typedef int (*airt_nccl_comm_init_fn)(int world, int rank, const char* id, int device,
                                      void** comm, char* error, unsigned long error_len);
#define AIRT_NCCL_COMM_INIT_SYMBOL "airt_nccl_comm_init"

/* One operation on device memory. `kind`, `dtype` and `reduce_op` are collective/'s OpKind,
 * DataType and ReduceOp values (allreduce 0, broadcast 1, allgather 2, reducescatter 3, reduce 4,
 * send 5, recv 6, barrier 7; int8, uint8, int32, int64, float16, float32, float64; SUM, PRODUCT,
 * MIN, MAX, AVERAGE). `count`: elements of `output` (of `input` for allgather). `peer`: the root
 * or the other rank. Blocks until done or `timeout_ms` passed (AIRT_GPU_NCCL_TIMEOUT: the
 * communicator was aborted and must be destroyed). */
typedef struct airt_nccl_op_t {
  int kind;
  const void* input;
  void* output;
  unsigned long long count;
  int dtype;
  int reduce_op;
  int peer;
  long long timeout_ms;
} airt_nccl_op_t;
typedef int (*airt_nccl_run_fn)(void* comm, const airt_nccl_op_t* op, char* error,
                                unsigned long error_len);
#define AIRT_NCCL_RUN_SYMBOL "airt_nccl_run"

typedef void (*airt_nccl_comm_destroy_fn)(void* comm);
#define AIRT_NCCL_COMM_DESTROY_SYMBOL "airt_nccl_comm_destroy"

/* Device memory for callers without a CUDA runtime of their own (tests, the Python binding's
 * checks): `what` 0 allocates `bytes` on `device` into *device_ptr, 1 frees *device_ptr, 2 copies
 * `bytes` from `host` to *device_ptr, 3 from *device_ptr to `host`. Returns as airt_gpu_probe. */
typedef int (*airt_gpu_memory_fn)(int device, int what, void** device_ptr, void* host,
                                  unsigned long long bytes, char* error, unsigned long error_len);
#define AIRT_GPU_MEMORY_SYMBOL "airt_gpu_memory"

#ifdef __cplusplus
}
#endif

#endif /* AIRT_GPU_PLUGIN_ABI_H_ */
