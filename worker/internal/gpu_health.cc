#include "worker/internal/gpu_health.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>

#include <cstdio>

#include "common/flags.h"

namespace airt::worker {
namespace {

// Runs `call` on a thread of its own and waits up to `timeout_ms` for it. kUnavailable when it
// takes longer: the thread is left to finish (or stay stuck in the driver) on its own.
template <typename T>
Result<T> WithTimeout(std::function<Result<T>()> call, uint32_t timeout_ms, const char* what) {
  struct Shared {
    std::mutex mutex;
    std::condition_variable done;
    std::optional<Result<T>> result;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, call = std::move(call)] {
    Result<T> result = call();
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->result.emplace(std::move(result));
    shared->done.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(shared->mutex);
  if (!shared->done.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                             [&] { return shared->result.has_value(); })) {
    return Unavailable(std::string("the GPU driver did not answer ") + what + " within " +
                       std::to_string(timeout_ms) + " ms");
  }
  return std::move(*shared->result);
}

std::string ThrottleText(unsigned long long reasons) {
  std::string out;
  auto add = [&](unsigned long long bit, const char* name) {
    if (reasons & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  add(AIRT_GPU_THROTTLE_HW_SLOWDOWN, "HW slowdown");
  add(AIRT_GPU_THROTTLE_HW_THERMAL, "HW thermal");
  add(AIRT_GPU_THROTTLE_HW_POWER_BRAKE, "power brake");
  return out;
}

constexpr unsigned long long kFailingThrottle = AIRT_GPU_THROTTLE_HW_SLOWDOWN |
                                                AIRT_GPU_THROTTLE_HW_THERMAL |
                                                AIRT_GPU_THROTTLE_HW_POWER_BRAKE;

// The verdict on NVML's counters, shared by both sources.
GpuCheckResult Judge(const airt_gpu_health_t& h) {
  if (h.xid_count > 0) {
    return {false, std::to_string(h.xid_count) + " XID error(s) since the last check (latest XID " +
                       std::to_string(h.last_xid) + ")"};
  }
  if (h.ecc_uncorrectable > 0) {
    return {false, std::to_string(h.ecc_uncorrectable) + " uncorrectable ECC error(s)"};
  }
  if (h.remapping_failed) return {false, "a row remapping failed"};
  if (h.retired_pages_pending) return {false, "retired pages pending a reset"};
  if (h.remapped_rows_pending) return {false, "remapped rows pending a reset"};
  if (h.throttle_reasons & kFailingThrottle) {
    return {false, "throttled: " + ThrottleText(h.throttle_reasons & kFailingThrottle)};
  }
  return {};
}

GpuCheckResult BandwidthVerdict(double gbps, double expected, double fraction) {
  if (expected <= 0 || gbps >= expected * fraction) return {};
  char text[160];
  std::snprintf(text, sizeof text,
                "memory bandwidth %.0f GB/s is below %.0f%% of the expected %.0f GB/s", gbps,
                fraction * 100, expected);
  return {false, text};
}

Result<uint64_t> ParseNumber(std::string_view entry, std::string_view text) {
  Result<uint64_t> bytes = ParseByteSize(std::string(text));
  if (!bytes.ok()) {
    return InvalidArgument("--gpu-fault-spec: '" + std::string(entry) + "': '" +
                           std::string(text) + "' is not a number");
  }
  return *bytes;
}

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    size_t at = text.find(sep);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

}  // namespace

PluginGpuHealth::PluginGpuHealth(std::shared_ptr<GpuPlugin> plugin, PluginGpuHealthOptions options)
    : plugin_(std::move(plugin)), options_(std::move(options)) {}

Result<GpuCheckResult> PluginGpuHealth::Check(size_t index, GpuCheckDepth depth) {
  const int device = static_cast<int>(index);
  std::shared_ptr<GpuPlugin> plugin = plugin_;
  PluginGpuHealthOptions o = options_;
  double expected = index < o.expected_gbps.size() ? o.expected_gbps[index] : 0;
  return WithTimeout<GpuCheckResult>(
      [plugin, device, depth, o, expected]() -> Result<GpuCheckResult> {
        Result<airt_gpu_health_t> health = plugin->Health(device);
        if (!health.ok()) return health.status();
        if (GpuCheckResult verdict = Judge(*health); !verdict.healthy) return verdict;
        if (depth == GpuCheckDepth::kLight) return GpuCheckResult{};
        if (Status probe = plugin->Probe(device, o.probe_bytes); !probe.ok()) {
          if (probe.code() == Code::kUnavailable) return probe;
          return GpuCheckResult{false, "probe kernel: " + probe.message()};
        }
        Result<double> gbps = plugin->Bandwidth(device, o.bandwidth_bytes);
        if (!gbps.ok()) return GpuCheckResult{false, "bandwidth probe: " + gbps.status().message()};
        return BandwidthVerdict(*gbps, expected, o.min_bandwidth_fraction);
      },
      o.call_timeout_ms, "a health check");
}

Result<std::map<int32_t, uint64_t>> PluginGpuHealth::ProcessMemory(
    size_t index, const std::vector<int32_t>& pids) {
  std::shared_ptr<GpuPlugin> plugin = plugin_;
  int device = static_cast<int>(index);
  return WithTimeout<std::map<int32_t, uint64_t>>(
      [plugin, device, pids]() -> Result<std::map<int32_t, uint64_t>> {
        Result<std::vector<GpuProcessMemory>> all = plugin->ProcessMemory(device);
        if (!all.ok()) return all.status();
        std::map<int32_t, uint64_t> out;
        for (const GpuProcessMemory& p : *all) {
          if (std::find(pids.begin(), pids.end(), p.pid) != pids.end()) out[p.pid] += p.bytes;
        }
        return out;
      },
      options_.call_timeout_ms, "a process memory query");
}

Result<std::vector<GpuFault>> ParseGpuFaultSpec(const std::string& spec,
                                                const std::vector<uint32_t>& gpu_ids) {
  std::vector<GpuFault> faults;
  for (std::string_view entry : Split(spec, ';')) {
    if (entry.empty()) continue;
    auto bad = [&](const std::string& why) {
      return InvalidArgument("--gpu-fault-spec: '" + std::string(entry) + "': " + why +
                             " (e.g. gpu=0:xid=79:when=busy;driver:down:after=3; docs/gpu.md)");
    };
    std::vector<std::string_view> parts = Split(entry, ':');
    GpuFault fault;
    if (parts[0] == "driver") {
      if (parts.size() < 2 || parts[1] != "down") return bad("the driver's fault is 'down'");
      fault.kind = GpuFault::Kind::kDriverDown;
    } else if (parts[0].starts_with("gpu=")) {
      std::string_view id_text = parts[0].substr(4);
      uint32_t id = 0;
      auto [end, ec] = std::from_chars(id_text.data(), id_text.data() + id_text.size(), id);
      if (id_text.empty() || ec != std::errc() || end != id_text.data() + id_text.size()) {
        return bad("'" + std::string(id_text) + "' is not a GPU id");
      }
      if (std::find(gpu_ids.begin(), gpu_ids.end(), id) == gpu_ids.end()) {
        return bad("this node has no GPU " + std::to_string(id));
      }
      fault.gpu_id = id;
      if (parts.size() < 2) return bad("a fault is missing after the GPU");
      std::string_view what = parts[1];
      std::string_view name = what.substr(0, what.find('='));
      std::string_view value =
          what.find('=') == std::string_view::npos ? "" : what.substr(what.find('=') + 1);
      auto number = [&]() -> Result<uint64_t> {
        if (value.empty()) return bad("'" + std::string(name) + "' needs =VALUE");
        return ParseNumber(entry, value);
      };
      if (name == "xid") {
        fault.kind = GpuFault::Kind::kXid;
        AIRT_ASSIGN_OR_RETURN(fault.value, number());
      } else if (name == "ecc") {
        fault.kind = GpuFault::Kind::kEcc;
        fault.value = 1;
        if (!value.empty()) {
          AIRT_ASSIGN_OR_RETURN(fault.value, number());
        }
      } else if (name == "retired-pages") {
        fault.kind = GpuFault::Kind::kRetiredPages;
      } else if (name == "remapped-rows") {
        fault.kind = GpuFault::Kind::kRemappedRows;
      } else if (name == "throttle") {
        fault.kind = GpuFault::Kind::kThrottle;
        if (value != "hw-slowdown" && value != "hw-thermal" && value != "power-brake") {
          return bad("throttle= takes hw-slowdown, hw-thermal or power-brake");
        }
        fault.text = std::string(value);
      } else if (name == "probe") {
        fault.kind = GpuFault::Kind::kProbe;
      } else if (name == "bandwidth") {
        fault.kind = GpuFault::Kind::kBandwidth;
        AIRT_ASSIGN_OR_RETURN(fault.value, number());
      } else if (name == "memory") {
        fault.kind = GpuFault::Kind::kMemory;
        AIRT_ASSIGN_OR_RETURN(fault.value, number());
      } else {
        return bad("unknown fault '" + std::string(name) +
                   "' (xid, ecc, retired-pages, remapped-rows, throttle, probe, bandwidth, memory)");
      }
    } else {
      return bad("an entry starts with gpu=ID or driver");
    }
    for (size_t i = 2; i < parts.size(); ++i) {
      std::string_view option = parts[i];
      size_t eq = option.find('=');
      std::string_view key = option.substr(0, eq);
      std::string_view value = eq == std::string_view::npos ? "" : option.substr(eq + 1);
      if (key == "when" && value == "busy") {
        fault.only = GpuCheckDepth::kLight;
      } else if (key == "when" && value == "idle") {
        fault.only = GpuCheckDepth::kFull;
      } else if (key == "after" || key == "times") {
        AIRT_ASSIGN_OR_RETURN(uint64_t n, ParseNumber(entry, value));
        if (key == "after" && n == 0) return bad("after= counts from 1");
        (key == "after" ? fault.after : fault.times) = n;
      } else {
        return bad("unknown option '" + std::string(option) +
                   "' (when=busy, when=idle, after=N, times=N)");
      }
    }
    faults.push_back(std::move(fault));
  }
  return faults;
}

FaultSpecGpuHealth::FaultSpecGpuHealth(std::vector<GpuFault> faults, std::vector<uint32_t> gpu_ids,
                                       double min_bandwidth_fraction)
    : faults_(std::move(faults)),
      gpu_ids_(std::move(gpu_ids)),
      min_bandwidth_fraction_(min_bandwidth_fraction) {}

bool FaultSpecGpuHealth::Fires(size_t f, uint64_t check, std::optional<GpuCheckDepth> depth) {
  const GpuFault& fault = faults_[f];
  if (check < fault.after) return false;
  if (fault.only.has_value() && depth.has_value() && *fault.only != *depth) return false;
  if (fault.times > 0 && fired_[f] >= fault.times) return false;
  ++fired_[f];
  return true;
}

Result<GpuCheckResult> FaultSpecGpuHealth::Check(size_t index, GpuCheckDepth depth) {
  if (index >= gpu_ids_.size()) return InvalidArgument("no GPU at " + std::to_string(index));
  const uint64_t check = ++checks_[index];
  const uint32_t id = gpu_ids_[index];
  airt_gpu_health_t health{};
  health.nvml_ok = 1;
  std::optional<GpuCheckResult> full_failure;
  for (size_t f = 0; f < faults_.size(); ++f) {
    const GpuFault& fault = faults_[f];
    if (fault.kind == GpuFault::Kind::kDriverDown) {
      if (Fires(f, check, depth)) {
        return Unavailable("the GPU driver does not answer (injected by --gpu-fault-spec)");
      }
      continue;
    }
    if (fault.gpu_id != id || fault.kind == GpuFault::Kind::kMemory) continue;
    bool full_only = fault.kind == GpuFault::Kind::kProbe || fault.kind == GpuFault::Kind::kBandwidth;
    if (full_only && depth != GpuCheckDepth::kFull) continue;
    if (!Fires(f, check, depth)) continue;
    switch (fault.kind) {
      case GpuFault::Kind::kXid:
        ++health.xid_count;
        health.last_xid = fault.value;
        break;
      case GpuFault::Kind::kEcc: health.ecc_uncorrectable += fault.value; break;
      case GpuFault::Kind::kRetiredPages: health.retired_pages_pending = 1; break;
      case GpuFault::Kind::kRemappedRows: health.remapped_rows_pending = 1; break;
      case GpuFault::Kind::kThrottle:
        health.throttle_reasons |= fault.text == "hw-slowdown"   ? AIRT_GPU_THROTTLE_HW_SLOWDOWN
                                   : fault.text == "hw-thermal" ? AIRT_GPU_THROTTLE_HW_THERMAL
                                                                : AIRT_GPU_THROTTLE_HW_POWER_BRAKE;
        break;
      case GpuFault::Kind::kProbe:
        full_failure = GpuCheckResult{false, "probe kernel: memory read back wrong (injected)"};
        break;
      case GpuFault::Kind::kBandwidth:
        full_failure =
            BandwidthVerdict(static_cast<double>(fault.value), 1000, min_bandwidth_fraction_);
        break;
      default: break;
    }
  }
  if (GpuCheckResult verdict = Judge(health); !verdict.healthy) return verdict;
  if (full_failure.has_value() && !full_failure->healthy) return *full_failure;
  return GpuCheckResult{};
}

Result<std::map<int32_t, uint64_t>> FaultSpecGpuHealth::ProcessMemory(
    size_t index, const std::vector<int32_t>& pids) {
  std::map<int32_t, uint64_t> out;
  if (index >= gpu_ids_.size()) return out;
  for (const GpuFault& fault : faults_) {
    if (fault.kind != GpuFault::Kind::kMemory || fault.gpu_id != gpu_ids_[index]) continue;
    for (int32_t pid : pids) out[pid] = std::max(out[pid], fault.value);
  }
  return out;
}

}  // namespace airt::worker
