#include "worker/internal/node_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "common/flags.h"
#include "common/flat_json.h"
#include "common/logging.h"
#include "gpu/accelerator_type.h"

namespace airt::worker {
namespace {

constexpr double kMaxAmount = 1e14;         // as worker::scheduling::Amount::kMaxWhole
constexpr double kSmallestAmount = 0.0001;  // Ray's resource granularity
constexpr uint64_t kDefaultStoreBytes = 1ull << 30;

Status FlagError(std::string_view flag, const std::string& message) {
  return InvalidArgument("--" + std::string(flag) + ": " + message);
}

Result<uint64_t> ParseCount(std::string_view flag, const std::string& text) {
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return FlagError(flag, "'" + text + "' is not a non-negative integer");
  }
  return n;
}

Result<uint16_t> ParsePort(std::string_view flag, uint64_t port) {
  if (port > 65535) return FlagError(flag, std::to_string(port) + " is not a port (0-65535)");
  return static_cast<uint16_t>(port);
}

Result<uint64_t> ParseBytesFlag(std::string_view flag, const std::string& text) {
  Result<uint64_t> bytes = ParseByteSize(text);
  if (!bytes.ok()) {
    return FlagError(flag, bytes.status().message() + " (bytes, or a number with K, M, G or T)");
  }
  return *bytes;
}

// HOST:PORT with a non-empty host (an IPv6 host in brackets) and a port 1-65535.
Status CheckHeadAddress(const std::string& address) {
  auto bad = [&] {
    return FlagError("head-address", "'" + address + "' is not HOST:PORT (e.g. 10.0.0.1:6379)");
  };
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return bad();
  std::string_view host(address.data(), colon);
  if (host.front() == '[' ? host.back() != ']' || host.size() < 3
                          : host.find(':') != std::string_view::npos) {
    return bad();
  }
  uint64_t port = 0;
  std::string_view digits(address.data() + colon + 1, address.size() - colon - 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || port == 0 ||
      port > 65535) {
    return bad();
  }
  return Status::Ok();
}

std::string FormatAmount(double amount) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", amount);
  return text;
}

// Scheduling's rules for a name: not empty, no whitespace, control characters or ",{}".
bool PlainName(std::string_view name) {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    if (c <= 0x20 || c == 0x7F || c == ',' || c == '{' || c == '}') return false;
  }
  return true;
}

Status AddCustomResources(const std::string& json, std::vector<ResourceAmount>* total) {
  if (json.empty()) return Status::Ok();
  Result<std::vector<FlatJsonMember>> members = ParseFlatJson(json);
  if (!members.ok()) return FlagError("resources", members.status().message());
  for (FlatJsonMember& m : *members) {
    const std::string q = "'" + m.key + "'";
    if (m.key == kCpu || m.key == kGpu || m.key == kMemory || m.key == kObjectStoreMemory) {
      const char* instead = m.key == kCpu      ? "--num-cpus"
                            : m.key == kGpu    ? "--num-gpus"
                            : m.key == kMemory ? "--memory"
                                               : "--object-store-memory";
      std::string message = q + " is a built-in resource: use ";
      message += instead;
      message += " instead";
      return FlagError("resources", message);
    }
    if (m.key == kAcceleratorType) {
      return FlagError("resources", q + " is a label: use --labels '{\"accelerator_type\": ...}'");
    }
    if (m.key.rfind(kNodeResourcePrefix, 0) == 0) {
      return FlagError("resources", q + " is reserved: the node adds node:<address> itself");
    }
    if (!PlainName(m.key)) {
      return FlagError("resources", "resource name " + q +
                                        " must be non-empty, without spaces, control characters "
                                        "or ,{}");
    }
    const double* amount = std::get_if<double>(&m.value);
    if (amount == nullptr) {
      return FlagError("resources", "the amount of " + q + " must be a number, got the string \"" +
                                        std::get<std::string>(m.value) + "\"");
    }
    if (*amount < 0 || *amount > kMaxAmount || (*amount > 0 && *amount < kSmallestAmount)) {
      return FlagError("resources", "the amount of " + q + " must be 0, or between 0.0001 and " +
                                        "1e14, got " + FormatAmount(*amount));
    }
    if (*amount > 0) total->push_back({std::move(m.key), *amount});
  }
  return Status::Ok();
}

// A plain accelerator name, as worker::scheduling::ResourceShape wants it: letters, digits, "-_.:".
bool AcceleratorName(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.' || c == ':';
    if (!ok) return false;
  }
  return true;
}

// `key=value,key=value` (Ray's `ray start --labels`) or a flat JSON object of strings.
Result<std::vector<std::pair<std::string, std::string>>> LabelPairs(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> pairs;
  std::string_view rest = text;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (rest.empty()) return pairs;
  if (rest.front() == '{') {
    Result<std::vector<FlatJsonMember>> members = ParseFlatJson(text);
    if (!members.ok()) return FlagError("labels", members.status().message());
    for (FlatJsonMember& m : *members) {
      std::string* value = std::get_if<std::string>(&m.value);
      if (value == nullptr) {
        return FlagError("labels", "the value of '" + m.key + "' must be a string, e.g. \"A10\"");
      }
      pairs.emplace_back(std::move(m.key), std::move(*value));
    }
    return pairs;
  }
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return FlagError("labels", "'" + std::string(item) +
                                     "' is not key=value (e.g. ray.io/accelerator-type=A10,zone=a)");
    }
    pairs.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return pairs;
}

Result<std::vector<std::pair<std::string, std::string>>> ParseLabels(const std::string& text) {
  AIRT_ASSIGN_OR_RETURN(auto pairs, LabelPairs(text));
  std::vector<std::pair<std::string, std::string>> labels;
  for (auto& [key, value] : pairs) {
    if (!PlainName(key)) {
      return FlagError("labels", "label key '" + key +
                                     "' must be non-empty, without spaces, control characters "
                                     "or ,{}");
    }
    if (key == kAcceleratorType) key = kAcceleratorTypeLabel;  // the short form of Ray's key
    if (key == kAcceleratorTypeLabel && !AcceleratorName(value)) {
      return FlagError("labels", std::string(kAcceleratorTypeLabel) + " '" + value +
                                     "' must be letters, digits and -_.: (e.g. A10, H100)");
    }
    for (const auto& [seen, unused] : labels) {
      if (seen == key) return FlagError("labels", "label '" + key + "' is given twice");
    }
    labels.emplace_back(std::move(key), std::move(value));
  }
  return labels;
}

bool IsIndexList(std::string_view text) {
  for (char c : text) {
    if (!(c == ',' || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

// The GPUs a node offers: `count` of them, ids 0..count-1, or the first `count` indices of
// CUDA_VISIBLE_DEVICES when it lists indices (as Ray); a list of UUIDs names the devices, ids
// 0..count-1. Fills the config's gpu_ids and gpu_visible_names.
Status AssignGpuIds(uint64_t count, bool explicit_count, const std::optional<std::string>& visible,
                    NodeConfig* config) {
  std::vector<std::string> listed;
  if (visible.has_value()) {
    std::string_view rest = *visible;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      bool uuid = item.starts_with("GPU-") || item.starts_with("MIG-");
      uint32_t id = 0;
      auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
      bool index = !item.empty() && ec == std::errc() && end == item.data() + item.size();
      if (!uuid && !index) {
        return InvalidArgument("CUDA_VISIBLE_DEVICES='" + *visible +
                               "' is not a list of device indices (e.g. 0,1) or UUIDs "
                               "(GPU-..., MIG-...)");
      }
      listed.emplace_back(item);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    if (count > listed.size()) {
      if (explicit_count) {
        return FlagError("num-gpus", std::to_string(count) + " GPUs asked for, but " +
                                         "CUDA_VISIBLE_DEVICES='" + *visible + "' lists " +
                                         std::to_string(listed.size()));
      }
      count = listed.size();
    }
  }
  bool indices = visible.has_value() && IsIndexList(*visible);
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t id = static_cast<uint32_t>(i);
    if (indices) std::from_chars(listed[i].data(), listed[i].data() + listed[i].size(), id);
    config->gpu_ids.push_back(id);
    config->gpu_visible_names.push_back(visible.has_value() ? listed[i] : std::to_string(id));
  }
  return Status::Ok();
}

struct RawFlags {
  std::string head_address, node_address = "127.0.0.1", temp_dir = "/tmp/airt";
  std::string num_cpus, num_gpus, memory, object_store_memory, resources, labels, gpu_plugin;
  std::string object_store_fallback_limit;
  uint64_t port = 0, transfer_port = 0, head_timeout_ms = 5000, head_retry_max_ms = 5000;
  std::string worker_binary, worker_code_search_path, python_executable;
  uint64_t infeasible_grace_ms = 10000, worker_register_timeout_ms = 30000;
  uint64_t idle_worker_timeout_ms = 60000, worker_stop_grace_ms = 2000;
  uint64_t cluster_view_interval_ms = 1000, preemption_grace_ms = 30000;
  std::string head_reconnect_timeout_s, preemption_reason = "preemption notice (SIGUSR1)";
  std::string gpu_memory, gpu_fault_spec, gpu_memory_margin, gpu_min_bandwidth_fraction;
  uint64_t gpu_health_interval_ms = 60000, gpu_memory_check_ms = 1000;
  uint64_t memory_monitor_interval_ms = 250;
  std::string memory_usage_threshold, memory_usage_file;
};

// A fraction flag: a number from `min` (exclusive when `open`) to 1.
Result<double> ParseFraction(std::string_view flag, const std::string& text, bool open) {
  char* end = nullptr;
  double f = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(open ? f > 0 : f >= 0) || !(f <= 1)) {
    return FlagError(flag, "'" + text + "' is not a number from 0 to 1");
  }
  return f;
}

// A duration flag in milliseconds: `min` to one hour.
Result<uint32_t> ParseMs(std::string_view flag, uint64_t ms, uint64_t min) {
  if (ms < min || ms > 3'600'000) {
    return FlagError(flag,
                     "must be " + std::to_string(min) + " to 3600000, got " + std::to_string(ms));
  }
  return static_cast<uint32_t>(ms);
}

}  // namespace

Result<NodeConfig> ParseNodeConfig(int argc, char** argv, const HostFacts& host) {
  RawFlags raw;
  FlagSet flags("airt-node");
  flags.AddString("head-address", &raw.head_address, "the head, HOST:PORT (required)");
  flags.AddString("num-cpus", &raw.num_cpus, "CPUs this node offers; empty: the hardware threads");
  flags.AddString("num-gpus", &raw.num_gpus,
                  "GPUs this node offers (ids 0..N-1); empty: what the GPU plugin detects");
  flags.AddString("memory", &raw.memory,
                  "bytes for tasks (K, M, G suffixes); empty: 70% of RAM less the store");
  flags.AddString("object-store-memory", &raw.object_store_memory,
                  "bytes of the object store; empty: 1G, at most 30% of RAM");
  flags.AddString("object-store-fallback-limit", &raw.object_store_fallback_limit,
                  "bytes of objects the store may hold in fallback files on disk (objects the "
                  "store's memory cannot hold) at once; 0: none; empty: "
                  "$AIRT_OBJECT_STORE_FALLBACK_LIMIT, else what the disk holds");
  flags.AddString("resources", &raw.resources, "custom resources, JSON: '{\"TPU\": 2}'");
  flags.AddString("labels", &raw.labels,
                  "labels, key=value,...: ray.io/accelerator-type=A10,zone=a (accelerator_type=A10 "
                  "means the same; a flat JSON object works too); default the detected "
                  "accelerator type");
  flags.AddString("node-address", &raw.node_address, "address the node's services bind");
  flags.AddUint64("port", &raw.port, "the node's Cap'n Proto service port; 0: any");
  flags.AddUint64("transfer-port", &raw.transfer_port, "the object transfer port; 0: any");
  flags.AddString("temp-dir", &raw.temp_dir, "the node makes its folder node-<id>/ here");
  flags.AddString("gpu-plugin", &raw.gpu_plugin,
                  "path of libairt_gpu_plugin.so; empty: beside the binary's build or install");
  flags.AddUint64("head-timeout-ms", &raw.head_timeout_ms, "deadline of one call to the head");
  flags.AddUint64("head-retry-max-ms", &raw.head_retry_max_ms,
                  "longest wait between retries while the head is unreachable");
  flags.AddString("head-reconnect-timeout-s", &raw.head_reconnect_timeout_s,
                  "how long the node keeps trying to reach the head before it exits (0: "
                  "forever); default: $AIRT_HEAD_RECONNECT_TIMEOUT_S, then "
                  "$RAY_gcs_rpc_server_reconnect_timeout_s, then 60");
  flags.AddString("python-executable", &raw.python_executable,
                  "the python3 that runs Python workers (python -m airt._private.worker); default: "
                  "$AIRT_PYTHON, else the python3 on PATH if it imports airt; none: Python "
                  "tasks are refused");
  flags.AddString("worker-binary", &raw.worker_binary,
                  "the C++ worker the node starts; empty: airt-worker beside airt-node's build or "
                  "install");
  flags.AddString("worker-code-search-path", &raw.worker_code_search_path,
                  "DIR[:DIR...] given to C++ workers: the libraries of their remote functions");
  flags.AddUint64("infeasible-grace-ms", &raw.infeasible_grace_ms,
                  "how long a lease no node can hold waits for a node that can, then fails");
  flags.AddUint64("worker-register-timeout-ms", &raw.worker_register_timeout_ms,
                  "a started worker that has not registered by then is killed");
  flags.AddUint64("idle-worker-timeout-ms", &raw.idle_worker_timeout_ms,
                  "an idle worker is stopped after this");
  flags.AddUint64("worker-stop-grace-ms", &raw.worker_stop_grace_ms,
                  "a worker told to stop (SIGTERM) is killed (SIGKILL) after this");
  flags.AddUint64("cluster-view-interval-ms", &raw.cluster_view_interval_ms,
                  "the longest backoff between subscriptions to the head's cluster view, and its "
                  "polling interval against a head without waitClusterChange (for spillback)");
  flags.AddUint64("preemption-grace-ms", &raw.preemption_grace_ms,
                  "on SIGUSR1 (a preemption notice) the node drains, leaving within this");
  flags.AddString("preemption-reason", &raw.preemption_reason,
                  "the reason of that drain, as the head shows it");
  flags.AddString("gpu-memory", &raw.gpu_memory,
                  "bytes of each GPU when detection does not say (declared GPUs); sets the "
                  "memory shares of fractional GPUs");
  flags.AddString("gpu-fault-spec", &raw.gpu_fault_spec,
                  "inject GPU failures instead of running the real checks (drills; docs/gpu.md), "
                  "e.g. 'gpu=0:xid=79:when=busy;gpu=1:memory=9G'");
  flags.AddUint64("gpu-health-interval-ms", &raw.gpu_health_interval_ms,
                  "how often GPUs are checked: idle ones fully, busy ones lightly");
  flags.AddUint64("gpu-memory-check-ms", &raw.gpu_memory_check_ms,
                  "how often the GPU memory of workers holding a fractional GPU is read");
  flags.AddString("gpu-memory-margin", &raw.gpu_memory_margin,
                  "bytes a worker may exceed its GPU memory share by, besides the CUDA context; "
                  "default 5% of the device");
  flags.AddString("gpu-min-bandwidth-fraction", &raw.gpu_min_bandwidth_fraction,
                  "a GPU whose copy bandwidth is below this fraction of its type's fails; "
                  "default 0.5");
  flags.AddUint64("memory-monitor-interval-ms", &raw.memory_monitor_interval_ms,
                  "how often the host's memory use is read (Ray's memory_monitor_refresh_ms); 0: "
                  "no memory monitor");
  flags.AddString("memory-usage-threshold", &raw.memory_usage_threshold,
                  "above this fraction of the host's memory in use the node stops a worker, the "
                  "newest retriable one first (Ray's memory_usage_threshold); default 0.95");
  flags.AddString("memory-usage-file", &raw.memory_usage_file,
                  "test-only: read the memory use from this file ('USED TOTAL' bytes) instead of "
                  "the host");
  Status parsed = flags.Parse(argc, argv);
  if (parsed.code() == Code::kCancelled) return Cancelled(flags.Usage());
  AIRT_RETURN_IF_ERROR(parsed);

  NodeConfig config;
  if (raw.head_address.empty()) return FlagError("head-address", "required (HOST:PORT)");
  AIRT_RETURN_IF_ERROR(CheckHeadAddress(raw.head_address));
  config.head_address = raw.head_address;
  if (raw.node_address.empty()) return FlagError("node-address", "must not be empty");
  config.node_address = raw.node_address;
  if (raw.temp_dir.empty()) return FlagError("temp-dir", "must not be empty");
  config.temp_dir = raw.temp_dir;
  AIRT_ASSIGN_OR_RETURN(config.port, ParsePort("port", raw.port));
  AIRT_ASSIGN_OR_RETURN(config.transfer_port, ParsePort("transfer-port", raw.transfer_port));
  if (raw.head_timeout_ms == 0 || raw.head_timeout_ms > 3'600'000) {
    return FlagError("head-timeout-ms", "must be 1 to 3600000");
  }
  if (raw.head_retry_max_ms == 0 || raw.head_retry_max_ms > 3'600'000) {
    return FlagError("head-retry-max-ms", "must be 1 to 3600000");
  }
  config.head_call_timeout_ms = static_cast<uint32_t>(raw.head_timeout_ms);
  config.head_retry_max_ms = static_cast<uint32_t>(raw.head_retry_max_ms);
  std::string reconnect = raw.head_reconnect_timeout_s;
  std::string reconnect_source = "--head-reconnect-timeout-s";
  for (const char* env : {"AIRT_HEAD_RECONNECT_TIMEOUT_S", "RAY_gcs_rpc_server_reconnect_timeout_s"}) {
    const char* value = std::getenv(env);
    if (reconnect.empty() && value != nullptr && *value != '\0') {
      reconnect = value;
      reconnect_source = std::string("$") + env;
    }
  }
  if (!reconnect.empty()) {
    uint64_t seconds = 0;
    auto [end, ec] = std::from_chars(reconnect.data(), reconnect.data() + reconnect.size(), seconds);
    if (ec != std::errc() || end != reconnect.data() + reconnect.size() || seconds > 86'400) {
      return InvalidArgument(reconnect_source +
                             ": must be a whole number of seconds, 0 to 86400, got '" + reconnect +
                             "'");
    }
    config.head_reconnect_timeout_s = static_cast<uint32_t>(seconds);
  }
  config.worker_binary = raw.worker_binary;
  config.python_executable = raw.python_executable;
  if (config.python_executable.empty()) {
    if (const char* env = std::getenv("AIRT_PYTHON")) config.python_executable = env;
  }
  bool default_python = config.python_executable.empty();
  config.worker_code_search_path = raw.worker_code_search_path;
  AIRT_ASSIGN_OR_RETURN(config.infeasible_grace_ms,
                        ParseMs("infeasible-grace-ms", raw.infeasible_grace_ms, 0));
  AIRT_ASSIGN_OR_RETURN(config.worker_register_timeout_ms,
                        ParseMs("worker-register-timeout-ms", raw.worker_register_timeout_ms, 1));
  AIRT_ASSIGN_OR_RETURN(config.idle_worker_timeout_ms,
                        ParseMs("idle-worker-timeout-ms", raw.idle_worker_timeout_ms, 1));
  AIRT_ASSIGN_OR_RETURN(config.worker_stop_grace_ms,
                        ParseMs("worker-stop-grace-ms", raw.worker_stop_grace_ms, 0));
  AIRT_ASSIGN_OR_RETURN(config.cluster_view_interval_ms,
                        ParseMs("cluster-view-interval-ms", raw.cluster_view_interval_ms, 1));
  AIRT_ASSIGN_OR_RETURN(config.preemption_grace_ms,
                        ParseMs("preemption-grace-ms", raw.preemption_grace_ms, 1));
  if (raw.preemption_reason.empty() || raw.preemption_reason.size() > 4096) {
    return FlagError("preemption-reason", "must be 1 to 4096 bytes");
  }
  config.preemption_reason = raw.preemption_reason;

  uint64_t cpus = host.cpu_count;
  if (!raw.num_cpus.empty()) {
    AIRT_ASSIGN_OR_RETURN(cpus, ParseCount("num-cpus", raw.num_cpus));
  }
  bool explicit_gpus = !raw.num_gpus.empty();
  std::vector<GpuDeviceInfo> detected;
  if (host.detect_gpus) detected = host.detect_gpus(raw.gpu_plugin);
  uint64_t gpus = detected.size();
  if (explicit_gpus) {
    AIRT_ASSIGN_OR_RETURN(gpus, ParseCount("num-gpus", raw.num_gpus));
  }
  if (gpus > 1024) return FlagError("num-gpus", std::to_string(gpus) + " is more than 1024");
  // Detection ran in this process, so it saw only CUDA_VISIBLE_DEVICES' devices already.
  AIRT_RETURN_IF_ERROR(AssignGpuIds(gpus, explicit_gpus, host.cuda_visible_devices, &config));
  uint64_t declared_memory = 0;
  if (!raw.gpu_memory.empty()) {
    AIRT_ASSIGN_OR_RETURN(declared_memory, ParseBytesFlag("gpu-memory", raw.gpu_memory));
  }
  for (size_t i = 0; i < config.gpu_ids.size(); ++i) {
    bool known = i < detected.size();
    config.gpu_uuids.push_back(known ? detected[i].uuid : "");
    config.gpu_memory.push_back(known && detected[i].total_memory > 0 ? detected[i].total_memory
                                                                       : declared_memory);
  }
  config.gpu_plugin = raw.gpu_plugin;
  config.gpu_fault_spec = raw.gpu_fault_spec;
  AIRT_ASSIGN_OR_RETURN(config.gpu_health_interval_ms,
                        ParseMs("gpu-health-interval-ms", raw.gpu_health_interval_ms, 10));
  AIRT_ASSIGN_OR_RETURN(config.gpu_memory_check_ms,
                        ParseMs("gpu-memory-check-ms", raw.gpu_memory_check_ms, 10));
  if (!raw.gpu_memory_margin.empty()) {
    AIRT_ASSIGN_OR_RETURN(config.gpu_memory_margin,
                          ParseBytesFlag("gpu-memory-margin", raw.gpu_memory_margin));
  } else if (!config.gpu_memory.empty()) {
    config.gpu_memory_margin = config.gpu_memory.front() / 20;
  }
  if (!raw.gpu_min_bandwidth_fraction.empty()) {
    AIRT_ASSIGN_OR_RETURN(
        config.gpu_min_bandwidth_fraction,
        ParseFraction("gpu-min-bandwidth-fraction", raw.gpu_min_bandwidth_fraction, false));
  }
  if (raw.memory_monitor_interval_ms != 0) {
    AIRT_ASSIGN_OR_RETURN(
        config.memory_monitor_interval_ms,
        ParseMs("memory-monitor-interval-ms", raw.memory_monitor_interval_ms, 10));
  } else {
    config.memory_monitor_interval_ms = 0;
  }
  if (!raw.memory_usage_threshold.empty()) {
    AIRT_ASSIGN_OR_RETURN(
        config.memory_usage_threshold,
        ParseFraction("memory-usage-threshold", raw.memory_usage_threshold, true));
  }
  config.memory_usage_file = raw.memory_usage_file;

  config.object_store_memory = std::min(kDefaultStoreBytes, host.physical_memory / 10 * 3);
  if (config.object_store_memory == 0) config.object_store_memory = kDefaultStoreBytes;
  if (!raw.object_store_memory.empty()) {
    AIRT_ASSIGN_OR_RETURN(config.object_store_memory,
                          ParseBytesFlag("object-store-memory", raw.object_store_memory));
    if (config.object_store_memory == 0) return FlagError("object-store-memory", "must not be 0");
  }
  std::string fallback_limit = raw.object_store_fallback_limit;
  if (fallback_limit.empty()) {
    if (const char* env = std::getenv("AIRT_OBJECT_STORE_FALLBACK_LIMIT")) fallback_limit = env;
  }
  if (!fallback_limit.empty()) {
    AIRT_ASSIGN_OR_RETURN(config.object_store_fallback_limit,
                          ParseBytesFlag("object-store-fallback-limit", fallback_limit));
  }
  uint64_t memory = host.physical_memory / 10 * 7;
  memory = memory > config.object_store_memory ? memory - config.object_store_memory : 0;
  if (!raw.memory.empty()) {
    AIRT_ASSIGN_OR_RETURN(memory, ParseBytesFlag("memory", raw.memory));
  }
  if (static_cast<double>(memory) > kMaxAmount) {
    return FlagError("memory", std::to_string(memory) + " bytes is more than 1e14");
  }

  auto add = [&](std::string name, double amount) {
    if (amount > 0) config.total.push_back({std::move(name), amount});
  };
  add(kCpu, static_cast<double>(cpus));
  add(kGpu, static_cast<double>(config.gpu_ids.size()));
  add(kMemory, static_cast<double>(memory));
  add(kObjectStoreMemory, static_cast<double>(config.object_store_memory));
  add(kNodeResourcePrefix + config.node_address, 1);
  AIRT_RETURN_IF_ERROR(AddCustomResources(raw.resources, &config.total));
  AIRT_ASSIGN_OR_RETURN(config.labels, ParseLabels(raw.labels));
  // The accelerator type: --labels wins, else the first detected GPU's (Ray labels a node with
  // one type). It is also Ray's resource accelerator_type:<T>.
  auto type = std::find_if(config.labels.begin(), config.labels.end(),
                           [](const auto& label) { return label.first == kAcceleratorTypeLabel; });
  if (type == config.labels.end() && !config.gpu_ids.empty() && !detected.empty()) {
    std::string detected_type = AcceleratorTypeFromName(detected.front().name);
    if (!detected_type.empty()) {
      config.labels.emplace_back(kAcceleratorTypeLabel, detected_type);
      type = config.labels.end() - 1;
    }
  }
  if (type != config.labels.end()) {
    std::string name = kAcceleratorTypeResourcePrefix + type->second;
    bool given = std::any_of(config.total.begin(), config.total.end(),
                             [&](const ResourceAmount& r) { return r.name == name; });
    if (!given) config.total.push_back({name, 1});
  }
  // Last, once the flags are known good: finding the default may start an interpreter.
  if (default_python && host.default_python) {
    Result<std::string> python = host.default_python();
    if (python.ok()) {
      config.python_executable = *python;
    } else {
      AIRT_LOG(WARNING) << "no Python workers: " << python.status().message()
                        << " (pass --python-executable or set AIRT_PYTHON)";
    }
  }
  return config;
}

}  // namespace airt::worker
