// airt-node's command line, and the resources it resolves to with what the host offers.
//   airt-node --head-address 10.0.0.1:6379 --num-gpus 4 --resources '{"TPU": 2}'
//             --labels ray.io/accelerator-type=A10,zone=us-east-1a --object-store-memory 2G
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "gpu/accelerator_type.h"  // kAcceleratorTypeLabel: `accelerator_type` means it too
#include "gpu/gpu_plugin.h"

namespace airt::worker {

// The names Ray gives a node's built-in resources.
inline constexpr char kCpu[] = "CPU";
inline constexpr char kGpu[] = "GPU";
inline constexpr char kMemory[] = "memory";                          // bytes for tasks
inline constexpr char kObjectStoreMemory[] = "object_store_memory";  // bytes of the store
inline constexpr char kNodeResourcePrefix[] = "node:";               // "node:<address>": 1
inline constexpr char kAcceleratorType[] = "accelerator_type";       // a label, never a resource

// A named amount, as the head sees it.
struct ResourceAmount {
  std::string name;
  double amount = 0;
  friend bool operator==(const ResourceAmount&, const ResourceAmount&) = default;
};

// What the machine offers when the flags do not say. DetectHost() (host.h) fills it from the
// machine; tests fill it by hand.
struct HostFacts {
  uint64_t cpu_count = 1;        // hardware threads this process may run on
  uint64_t physical_memory = 0;  // bytes
  // The GPUs the plugin at the given path sees ("": the default places), in CUDA's order (after
  // CUDA_VISIBLE_DEVICES; MIG instances are devices of their own); none when it is absent or
  // finds none. Called once, always (--num-gpus caps the count; names give the accelerator
  // type, memories the fractional shares). Null: none.
  std::function<std::vector<GpuDeviceInfo>(const std::string& plugin_path)> detect_gpus;
  // CUDA_VISIBLE_DEVICES when set. A list of indices makes the GPU ids those indices, as Ray; a
  // list of UUIDs (GPU-..., MIG-...) makes them 0..N-1, each worker seeing its devices' UUIDs.
  std::optional<std::string> cuda_visible_devices;
  // The interpreter Python workers run when neither --python-executable nor $AIRT_PYTHON names
  // one. Called only then. Null, or an error (logged as a warning): no Python workers.
  std::function<Result<std::string>()> default_python;
};

// Everything airt-node runs with.
struct NodeConfig {
  std::string head_address;  // HOST:PORT
  std::string node_address = "127.0.0.1";
  uint16_t port = 0;           // the node's Cap'n Proto service; 0: any
  uint16_t transfer_port = 0;  // the object transfer service; 0: any
  std::string temp_dir = "/tmp/airt";
  uint64_t object_store_memory = 0;  // bytes
  // Bytes the store may hold in fallback files (objects its memory cannot hold) at once; 0: no
  // fallback; all ones: what the disk of the node's folder holds.
  uint64_t object_store_fallback_limit = ~uint64_t{0};
  // CPU, GPU, memory, object_store_memory, node:<address>, then custom resources in the order
  // given. Zero amounts are left out, as Ray does.
  std::vector<ResourceAmount> total;
  std::vector<std::pair<std::string, std::string>> labels;  // in the order given
  std::vector<uint32_t> gpu_ids;                            // one per GPU
  // Per GPU, in gpu_ids' order: what a worker's CUDA_VISIBLE_DEVICES names it by (the index, or
  // the UUID CUDA_VISIBLE_DEVICES gave), its UUID ("" when declared), its memory in bytes
  // (detected, else --gpu-memory; 0: unknown, and fractional shares get no memory limit).
  std::vector<std::string> gpu_visible_names;
  std::vector<std::string> gpu_uuids;
  std::vector<uint64_t> gpu_memory;
  // GPU health (gpu_health.h).
  std::string gpu_plugin;                   // --gpu-plugin; "": the default places
  std::string gpu_fault_spec;               // --gpu-fault-spec; "": the real checks
  uint32_t gpu_health_interval_ms = 60000;  // full checks of idle GPUs, light ones of busy GPUs
  uint32_t gpu_memory_check_ms = 1000;      // how often fractional workers' memory is read
  uint64_t gpu_memory_margin = 0;           // bytes a share may be exceeded by beyond the context
  double gpu_min_bandwidth_fraction = 0.5;  // of the device type's expected copy bandwidth
  // The memory monitor (memory_monitor.h): how often it samples (0: off), the fraction of the
  // host's memory in use above which it stops a worker, and (tests only) a file it reads the
  // usage from instead of the host ("USED TOTAL" bytes).
  uint32_t memory_monitor_interval_ms = 250;
  double memory_usage_threshold = 0.95;
  std::string memory_usage_file;
  uint32_t head_call_timeout_ms = 5000;                     // a registerNode or heartbeat call
  uint32_t head_retry_max_ms = 5000;                        // the longest wait between retries
  uint32_t head_reconnect_timeout_s = 60;  // the node exits when the head is unreachable this long
  // Leases and workers.
  std::string worker_binary;  // "": airt-worker found beside the node's binary (host.h)
  // Runs `-m airt._private.worker`: --python-executable, else $AIRT_PYTHON, else
  // host.default_python;
  // "": no Python workers.
  std::string python_executable;
  // Given to C++ workers as --code-search-path: where their remote functions' libraries are.
  std::string worker_code_search_path;
  uint32_t infeasible_grace_ms = 10000;  // how long a shape no node can run waits for one
  uint32_t worker_register_timeout_ms = 30000;
  uint32_t idle_worker_timeout_ms = 60000;   // an idle worker is stopped after this
  uint32_t worker_stop_grace_ms = 2000;      // SIGTERM, then SIGKILL after this
  // The longest backoff between cluster view subscriptions (waitClusterChange), and the polling
  // interval against a head without it.
  uint32_t cluster_view_interval_ms = 1000;
  // SIGUSR1 is a preemption notice (Slurm's sbatch --signal=B:USR1@S): the node drains itself,
  // leaving within this, the drain's reason `preemption_reason` (docs/cluster.md "Draining a
  // node"; the Slurm provider gives its notice's lead and "preempted by Slurm").
  uint32_t preemption_grace_ms = 30000;
  std::string preemption_reason = "preemption notice (SIGUSR1)";
};

// Parses argv (Ray's `ray start` flags where they exist) and fills the gaps from `host`:
//   --num-cpus   default host.cpu_count
//   --num-gpus   default the devices host.detect_gpus(--gpu-plugin) finds; N GPUs get ids 0..N-1,
//                or the first N indices of CUDA_VISIBLE_DEVICES when it lists indices
//   --labels     key=value,... (or a flat JSON object); accelerator_type=T is stored under
//                ray.io/accelerator-type; default ray.io/accelerator-type=<detected type> when
//                GPUs are detected. A node with an accelerator type also offers the resource
//                accelerator_type:<T>: 1, as Ray.
//   --gpu-memory bytes of each declared GPU when detection does not say
//   --gpu-fault-spec, --gpu-health-interval-ms, --gpu-memory-check-ms, --gpu-memory-margin,
//   --gpu-min-bandwidth-fraction: see NodeConfig and docs/gpu.md
//   --memory-monitor-interval-ms (0: off), --memory-usage-threshold, --memory-usage-file (tests):
//   see NodeConfig and docs/cluster.md
//   --memory     default 70% of physical memory less the object store
//   --object-store-memory  default 1 GiB, at most 30% of physical memory
//   --object-store-fallback-limit  default $AIRT_OBJECT_STORE_FALLBACK_LIMIT, else the disk's room
//   --worker-binary, --worker-code-search-path, --infeasible-grace-ms,
//   --worker-register-timeout-ms, --idle-worker-timeout-ms, --worker-stop-grace-ms,
//   --cluster-view-interval-ms: see NodeConfig
// kInvalidArgument naming the flag for a missing, unknown or bad one ("--resources: expected a
// string key at column 14, got '}'"). kCancelled for --help, the message then being the usage.
Result<NodeConfig> ParseNodeConfig(int argc, char** argv, const HostFacts& host);

}  // namespace airt::worker
