// The node's memory monitor (Ray's memory monitor and worker-killing policy): every interval it
// reads how much of the host's memory is in use (a MemoryReader), and above the usage threshold
// it stops one leased worker (PickWorkerToKill), whose task then fails with kOutOfMemory at its
// submitter (node.capnp workerExitReason says so) or is retried when it has retries left. After a
// kill it waits for the next interval before it may kill again, so that the freed memory shows.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <kj/async.h>
#include <kj/timer.h>

#include "common/ids.h"
#include "common/status.h"

namespace airt::worker {

// Bytes of the host's (or its cgroup's) memory in use, of `total`.
struct MemoryUsage {
  uint64_t used = 0;
  uint64_t total = 0;
  double Fraction() const {
    return total == 0 ? 0.0 : static_cast<double>(used) / static_cast<double>(total);
  }
};

// Where the monitor reads memory use from. Called on the node's loop; must not block long.
class MemoryReader {
 public:
  virtual ~MemoryReader() = default;
  // kUnavailable (naming the file) when the usage cannot be read.
  virtual Result<MemoryUsage> Read() = 0;
};

// The host's: cgroup v2's memory.current of memory.max under `cgroup_dir` when memory.max is a
// limit (not "max"), else /proc/meminfo's MemTotal less MemAvailable (Ray reads the same).
class HostMemoryReader final : public MemoryReader {
 public:
  explicit HostMemoryReader(std::string cgroup_dir = "/sys/fs/cgroup",
                            std::string meminfo = "/proc/meminfo")
      : cgroup_dir_(std::move(cgroup_dir)), meminfo_(std::move(meminfo)) {}
  Result<MemoryUsage> Read() override;

 private:
  std::string cgroup_dir_;
  std::string meminfo_;
};

// Test-only (airt-node --memory-usage-file): reads "USED TOTAL" (bytes) from `path` at every
// sample, so that tests make a node see high memory use without using the memory.
class FileMemoryReader final : public MemoryReader {
 public:
  explicit FileMemoryReader(std::string path) : path_(std::move(path)) {}
  Result<MemoryUsage> Read() override;

 private:
  std::string path_;
};

// A leased worker the monitor may stop.
struct KillCandidate {
  WorkerId worker;
  int32_t pid = 0;
  uint64_t lease_id = 0;   // leases are numbered in grant order: the highest is the newest
  bool retriable = false;  // its tasks are retried (max_retries), or its actor restarts
};

// Ray's retriable-LIFO policy: the newest retriable lease's worker, else the newest lease's.
// nullopt when there are none. The index into `candidates`.
std::optional<size_t> PickWorkerToKill(std::span<const KillCandidate> candidates);

struct MemoryMonitorOptions {
  kj::Duration interval = 250 * kj::MILLISECONDS;  // Ray's memory_monitor_refresh_ms
  double threshold = 0.95;                         // Ray's memory_usage_threshold
  std::string node;  // how the kill's reason names the node (its id and address)
};

// Event-loop confined. `reader` and `timer` must outlive it. `candidates` lists the leased
// workers now; `stop` stops one, remembering the reason as its out-of-memory exit (false: it had
// exited already).
class MemoryMonitor final : private kj::TaskSet::ErrorHandler {
 public:
  using CandidatesFn = std::function<std::vector<KillCandidate>()>;
  using StopFn = std::function<bool(const WorkerId& worker, const std::string& reason)>;

  MemoryMonitor(MemoryMonitorOptions options, MemoryReader& reader, kj::Timer& timer,
                CandidatesFn candidates, StopFn stop);

  // Samples every interval from now on, until destroyed.
  void Start();
  // One sample: above the threshold, stops the worker the policy picks and returns it. A read
  // that fails is logged (once until one succeeds) and stops nothing.
  std::optional<WorkerId> Check();
  uint64_t kills() const { return kills_; }

 private:
  void Loop();
  void taskFailed(kj::Exception&& exception) override;

  MemoryMonitorOptions options_;
  MemoryReader& reader_;
  kj::Timer& timer_;
  CandidatesFn candidates_;
  StopFn stop_;
  bool read_failing_ = false;
  uint64_t kills_ = 0;
  kj::TaskSet tasks_;
};

}  // namespace airt::worker
