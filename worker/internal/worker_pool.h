// The node's worker processes (DESIGN.md "Processes"): started per lease when no idle worker of
// the job, language and GPU ids exists, reused while idle, stopped after an idle timeout, on a
// disconnecting return, when their job finishes, when killed (Node.killWorker), and all of them
// when the node stops.
//
// A worker is a child process: the worker binary with
//   --node-address=HOST --node-port=PORT --worker-id=HEX --job-id=HEX --store-socket=PATH
//   --transfer-address=HOST:PORT [--code-search-path=DIRS]
// CUDA_VISIBLE_DEVICES set to its lease's GPU ids ("" without GPUs: a CPU worker sees none), and
// stdout and stderr in <log dir>/worker-<id prefix>.log. It is usable once it calls
// Node.registerWorker with the id it was given. Because CUDA_VISIBLE_DEVICES is fixed when the
// process starts, an idle worker is reused only for the same GPU ids.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <kj/async.h>
#include <kj/timer.h>
#include <sys/types.h>

#include "common/ids.h"
#include "common/status.h"
#include "worker/internal/child_processes.h"

namespace airt::worker {

enum class WorkerLanguage : uint8_t { kCpp, kPython };
std::string_view LanguageName(WorkerLanguage language);  // "cpp", "python"

// Environment variables set for a worker besides CUDA_VISIBLE_DEVICES, in order.
using WorkerEnv = std::vector<std::pair<std::string, std::string>>;

// Where a registered worker serves (proto::WorkerAddress).
struct WorkerAddress {
  WorkerId id;
  std::string host;
  uint16_t port = 0;
  int32_t pid = 0;
};

struct WorkerPoolOptions {
  std::string cpp_worker_binary;  // the C++ worker (airt-worker)
  std::string python_executable;  // Python workers run `<it> -m airt._private.worker`; "": none
  std::string head_address;       // "host:port", for workers' tasks that submit work
  std::string node_address;       // what workers connect to
  uint16_t node_port = 0;
  std::string store_socket;
  std::string transfer_address;  // "host:port" of the node's transfer service
  std::string code_search_path;  // for C++ workers; "": none passed
  std::string log_dir;           // the node's logs/
  kj::Duration register_timeout = 30 * kj::SECONDS;
  kj::Duration idle_timeout = 60 * kj::SECONDS;
  kj::Duration stop_grace = 2 * kj::SECONDS;  // SIGTERM, then SIGKILL after this
};

struct WorkerSnapshot {
  enum class State { kStarting, kIdle, kLeased, kStopping };
  WorkerId id;
  JobId job;
  WorkerLanguage language = WorkerLanguage::kCpp;
  std::string cuda_visible_devices;
  pid_t pid = 0;
  State state = State::kStarting;
  std::string log_path;
};

struct WorkerPoolSnapshot {
  std::vector<WorkerSnapshot> workers;  // by id
  uint64_t started = 0;                 // processes launched
  uint64_t reused = 0;                  // leases given an idle worker
};

// Event-loop confined. `launcher`, `reaper` and `timer` must outlive it.
class WorkerPool {
 public:
  // Called when a worker handed out by Acquire (and not Released) exits.
  using OnLeasedExit = std::function<void(const WorkerId& id, const std::string& why)>;

  WorkerPool(WorkerPoolOptions options, ProcessLauncher& launcher, ChildReaper& reaper,
             kj::Timer& timer);
  // SIGKILLs and reaps any worker still running (StopAll first for a graceful stop).
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void SetOnLeasedExit(OnLeasedExit on_leased_exit) { on_leased_exit_ = std::move(on_leased_exit); }
  // Whether this node can start workers of `language`.
  bool CanStart(WorkerLanguage language) const;

  // A registered worker for a lease: an idle one of the same job, language and GPU ids, else a
  // new process once it registers. It is then leased until Release or its exit. Rejects with
  // kUnavailable naming the worker's log when a new worker exits or does not register within
  // register_timeout (it is killed), or when the pool is stopping; with the launcher's error
  // when it cannot start. Dropping the promise: a worker being started goes idle once it
  // registers.
  // `job_code`: the job's own code search path, loaded besides the node's by a new worker (a
  // job's workers all have the same).
  // `gpu_env`: set for a new worker (a fractional GPU's memory limit); an idle one is reused only
  // with the same.
  // `outlives_job`: a detached actor's worker, which its job's end does not stop (Outliving).
  kj::Promise<WorkerAddress> Acquire(const JobId& job, WorkerLanguage language,
                                     const std::string& cuda_visible_devices,
                                     const std::string& job_code = "",
                                     const WorkerEnv& gpu_env = {}, bool outlives_job = false);
  // The workers of `job` acquired with outlives_job, starting or leased.
  std::set<WorkerId> Outliving(const JobId& job) const;
  // A started worker says where it serves. kNotFound: no worker of this id was started here
  // (or it has exited); kFailedPrecondition: it registered already or is being stopped.
  Status Register(const WorkerAddress& address);
  // A leased worker comes back: idle for reuse, or stopped when `stop`. No-op for an unknown id
  // (it exited meanwhile).
  void Release(const WorkerId& id, bool stop);
  // Refuses new workers and stops every worker: SIGTERM, SIGKILL after stop_grace. Resolves
  // when all have been reaped (or 5 s after the SIGKILLs, with a log line naming the rest).
  kj::Promise<void> StopAll();
  // Stops every worker of `job` (its job finished), starting, idle or leased, but those in
  // `keep`: SIGTERM, SIGKILL after stop_grace. Their leases end here: OnLeasedExit is not called
  // for them. Resolves when they have been reaped (or 5 s after the SIGKILLs, with a log line
  // naming the rest).
  kj::Promise<void> StopJob(const JobId& job, const std::set<WorkerId>& keep = {});
  // SIGKILLs worker `id` now. Its lease ends here: OnLeasedExit is not called for it. false: no
  // such worker (it has exited).
  bool Kill(const WorkerId& id);

  // Resolves once each of `ids` has exited (at once for those gone already).
  kj::Promise<void> Exited(std::set<WorkerId> ids);
  // Whether `id` is a worker of this pool that has not exited.
  bool Running(const WorkerId& id) const { return workers_.count(id) > 0; }
  // The job of worker `id`; nullopt when it has exited.
  std::optional<JobId> JobOf(const WorkerId& id) const;
  WorkerPoolSnapshot Snapshot() const;

 private:
  using State = WorkerSnapshot::State;
  struct Worker;

  kj::Promise<WorkerAddress> Start(const JobId& job, WorkerLanguage language,
                                   const std::string& cuda_visible_devices,
                                   const std::string& job_code, const WorkerEnv& gpu_env,
                                   bool outlives_job);
  void Stop(Worker& worker, const std::string& why);
  void OnRegisterTimeout(const WorkerId& id);
  void OnIdleTimeout(const WorkerId& id);
  void OnExited(const WorkerId& id, int wait_status);
  // The ids of the workers running now.
  std::set<WorkerId> RunningIds() const;
  Worker* Find(const WorkerId& id);

  WorkerPoolOptions options_;
  ProcessLauncher& launcher_;
  ChildReaper& reaper_;
  kj::Timer& timer_;
  OnLeasedExit on_leased_exit_;

  // Event-loop confined.
  std::map<WorkerId, std::unique_ptr<Worker>> workers_;
  struct ExitWaiter {
    std::set<WorkerId> left;
    kj::Own<kj::PromiseFulfiller<void>> fulfiller;
  };
  std::vector<ExitWaiter> exit_waiters_;
  bool stopping_ = false;
  uint64_t started_ = 0;
  uint64_t reused_ = 0;
};

}  // namespace airt::worker
