#include "worker/internal/memory_monitor.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/logging.h"

namespace airt::worker {
namespace {

// The first line of `path`; nullopt when it cannot be read.
std::optional<std::string> FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

std::optional<uint64_t> ParseBytes(const std::string& text) {
  if (text.empty() || text[0] < '0' || text[0] > '9') return std::nullopt;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  while (end != nullptr && (*end == ' ' || *end == '\n')) ++end;
  if (end == nullptr || *end != '\0') return std::nullopt;
  return value;
}

std::string Gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

std::string Fraction(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", fraction);
  return text;
}

}  // namespace

Result<MemoryUsage> HostMemoryReader::Read() {
  // cgroup v2: the limit of this node's cgroup, when it has one.
  std::optional<std::string> max = FirstLine(cgroup_dir_ + "/memory.max");
  std::optional<std::string> current = FirstLine(cgroup_dir_ + "/memory.current");
  if (max && current) {
    std::optional<uint64_t> limit = ParseBytes(*max);  // "max": no limit
    std::optional<uint64_t> used = ParseBytes(*current);
    if (limit && used && *limit > 0) return MemoryUsage{*used, *limit};
  }
  std::ifstream in(meminfo_);
  if (!in) return Unavailable("cannot read " + meminfo_);
  uint64_t total = 0, available = 0;
  bool has_total = false, has_available = false;
  std::string key;
  uint64_t kib = 0;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    if (!(fields >> key >> kib)) continue;
    if (key == "MemTotal:") {
      total = kib * 1024;
      has_total = true;
    } else if (key == "MemAvailable:") {
      available = kib * 1024;
      has_available = true;
    }
  }
  if (!has_total || !has_available || total == 0) {
    return Unavailable(meminfo_ + " has no MemTotal or MemAvailable line");
  }
  return MemoryUsage{total > available ? total - available : 0, total};
}

Result<MemoryUsage> FileMemoryReader::Read() {
  std::optional<std::string> line = FirstLine(path_);
  if (!line) return Unavailable("cannot read the memory usage file " + path_);
  std::istringstream fields(*line);
  uint64_t used = 0, total = 0;
  if (!(fields >> used >> total) || total == 0) {
    return Unavailable("the memory usage file " + path_ + " does not hold 'USED TOTAL' bytes: '" +
                       *line + "'");
  }
  return MemoryUsage{used, total};
}

std::optional<size_t> PickWorkerToKill(std::span<const KillCandidate> candidates) {
  std::optional<size_t> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!best) {
      best = i;
      continue;
    }
    const KillCandidate& a = candidates[i];
    const KillCandidate& b = candidates[*best];
    if (a.retriable != b.retriable ? a.retriable : a.lease_id > b.lease_id) best = i;
  }
  return best;
}

MemoryMonitor::MemoryMonitor(MemoryMonitorOptions options, MemoryReader& reader, kj::Timer& timer,
                             CandidatesFn candidates, StopFn stop)
    : options_(std::move(options)),
      reader_(reader),
      timer_(timer),
      candidates_(std::move(candidates)),
      stop_(std::move(stop)),
      tasks_(*this) {}

void MemoryMonitor::Start() { Loop(); }

void MemoryMonitor::Loop() {
  tasks_.add(timer_.afterDelay(options_.interval).then([this] {
    Check();
    Loop();
  }));
}

std::optional<WorkerId> MemoryMonitor::Check() {
  Result<MemoryUsage> usage = reader_.Read();
  if (!usage.ok()) {
    if (!read_failing_) {
      AIRT_LOG(WARNING) << "memory monitor: " << usage.status().message()
                        << "; no worker is stopped for memory until it reads again";
    }
    read_failing_ = true;
    return std::nullopt;
  }
  read_failing_ = false;
  double fraction = usage->Fraction();
  if (fraction <= options_.threshold) return std::nullopt;
  std::vector<KillCandidate> candidates = candidates_();
  std::optional<size_t> pick = PickWorkerToKill(candidates);
  if (!pick) return std::nullopt;
  const KillCandidate& victim = candidates[*pick];
  std::string reason =
      "node " + options_.node + " ran low on memory: " + Gib(usage->used) + " of " +
      Gib(usage->total) + " in use (" + Fraction(fraction) +
      "), above its memory usage threshold " + Fraction(options_.threshold) +
      " (--memory-usage-threshold); it stopped worker " + victim.worker.Hex().substr(0, 8) +
      " (pid " + std::to_string(victim.pid) + "), its most recently leased " +
      (victim.retriable ? "retriable " : "") +
      "worker. Give the node more memory or run fewer tasks at once (ask for more CPUs or "
      "memory per task); set max_retries to retry such tasks; --memory-monitor-interval-ms=0 "
      "turns this off";
  if (!stop_(victim.worker, reason)) return std::nullopt;
  ++kills_;
  AIRT_LOG(WARNING) << reason;
  return victim.worker;
}

void MemoryMonitor::taskFailed(kj::Exception&& exception) {
  AIRT_LOG(ERROR) << "memory monitor: " << exception.getDescription().cStr();
}

}  // namespace airt::worker
