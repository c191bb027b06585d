#include "worker/internal/worker_pool.h"

#include <signal.h>

#include <utility>

#include <sys/wait.h>

#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::worker {
namespace {

constexpr size_t kLogIdChars = 12;
constexpr auto kMaxWaitAfterKill = 5 * kj::SECONDS;

int64_t Ms(kj::Duration d) { return d / kj::MILLISECONDS; }

std::string Short(const WorkerId& id) { return id.Hex().substr(0, 8); }

void LogTimerError(kj::Exception&& e) {
  AIRT_LOG(ERROR) << "worker pool timer failed: " << FromKjException(e).ToString();
}

}  // namespace

std::string_view LanguageName(WorkerLanguage language) {
  return language == WorkerLanguage::kCpp ? "cpp" : "python";
}

struct WorkerPool::Worker {
  WorkerId id;
  JobId job;
  WorkerLanguage language = WorkerLanguage::kCpp;
  std::string cuda_visible_devices;
  WorkerEnv gpu_env;  // AIRT_GPU_MEMORY_* of a fractional GPU's worker
  pid_t pid = 0;
  std::string log_path;       // stdout and stderr: what user code prints (streamed to drivers)
  std::string airt_log_path;  // the worker's own log lines
  std::string Logs() const { return log_path + " and " + airt_log_path; }
  State state = State::kStarting;
  bool leased = false;    // handed out by Acquire and not Released (true while it stops too)
  bool outlives_job = false;  // a detached actor's, while starting or leased
  WorkerAddress address;  // once registered
  // The Acquire that started it, while starting.
  kj::Own<kj::PromiseFulfiller<WorkerAddress>> waiter;
  // The register timeout while starting, the idle timeout while idle. Never reset from inside
  // its own continuation.
  kj::Promise<void> deadline = nullptr;
  kj::Promise<void> kill_after_grace = nullptr;  // once stopping
};

WorkerPool::WorkerPool(WorkerPoolOptions options, ProcessLauncher& launcher, ChildReaper& reaper,
                       kj::Timer& timer)
    : options_(std::move(options)), launcher_(launcher), reaper_(reaper), timer_(timer) {}

WorkerPool::~WorkerPool() {
  for (auto& [id, worker] : workers_) {
    reaper_.Forget(worker->pid);
    ::kill(worker->pid, SIGKILL);
    ::waitpid(worker->pid, nullptr, 0);  // prompt after SIGKILL
  }
}

bool WorkerPool::CanStart(WorkerLanguage language) const {
  return language == WorkerLanguage::kCpp ? !options_.cpp_worker_binary.empty()
                                          : !options_.python_executable.empty();
}

WorkerPool::Worker* WorkerPool::Find(const WorkerId& id) {
  auto it = workers_.find(id);
  return it == workers_.end() ? nullptr : it->second.get();
}

kj::Promise<WorkerAddress> WorkerPool::Acquire(const JobId& job, WorkerLanguage language,
                                               const std::string& cuda_visible_devices,
                                               const std::string& job_code,
                                               const WorkerEnv& gpu_env, bool outlives_job) {
  if (stopping_) return ToKjException(Unavailable("the node is stopping its workers"));
  for (auto& [id, worker] : workers_) {
    if (worker->state == State::kIdle && worker->job == job && worker->language == language &&
        worker->cuda_visible_devices == cuda_visible_devices && worker->gpu_env == gpu_env) {
      worker->state = State::kLeased;
      worker->leased = true;
      worker->deadline = nullptr;  // the idle timeout
      worker->outlives_job = outlives_job;
      ++reused_;
      AIRT_LOG(DEBUG) << "reusing idle worker " << Short(id) << " (pid " << worker->pid << ")";
      return worker->address;
    }
  }
  return Start(job, language, cuda_visible_devices, job_code, gpu_env, outlives_job);
}

std::set<WorkerId> WorkerPool::Outliving(const JobId& job) const {
  std::set<WorkerId> ids;
  for (const auto& [id, worker] : workers_) {
    if (worker->job == job && worker->outlives_job && worker->state != State::kStopping) {
      ids.insert(id);
    }
  }
  return ids;
}

kj::Promise<WorkerAddress> WorkerPool::Start(const JobId& job, WorkerLanguage language,
                                             const std::string& cuda_visible_devices,
                                             const std::string& job_code,
                                             const WorkerEnv& gpu_env, bool outlives_job) {
  if (!CanStart(language)) {
    return ToKjException(FailedPrecondition("this node cannot start " +
                                            std::string(LanguageName(language)) + " workers"));
  }
  auto worker = std::make_unique<Worker>();
  worker->id = WorkerId::FromRandom();
  worker->job = job;
  worker->language = language;
  worker->cuda_visible_devices = cuda_visible_devices;
  worker->gpu_env = gpu_env;
  worker->outlives_job = outlives_job;
  std::string log_stem = options_.log_dir + "/worker-" + worker->id.Hex().substr(0, kLogIdChars);
  worker->log_path = log_stem + ".log";            // what user code prints: streamed to the driver
  worker->airt_log_path = log_stem + ".airt.log";  // the worker's own log lines
  ChildCommand command;
  command.binary = options_.cpp_worker_binary;
  command.args = {};
  if (language == WorkerLanguage::kPython) {
    // The same worker loop, run by the airt package's module (python/airt/_private/worker.py).
    command.binary = options_.python_executable;
    command.args = {"-m", "airt._private.worker"};
  }
  std::vector<std::string> flags = {"--head-address=" + options_.head_address,
                  "--node-address=" + options_.node_address,
                  "--node-port=" + std::to_string(options_.node_port),
                  "--worker-id=" + worker->id.Hex(),
                  "--job-id=" + job.Hex(),
                  "--store-socket=" + options_.store_socket,
                  "--transfer-address=" + options_.transfer_address,
                  "--log-file=" + worker->airt_log_path};
  command.args.insert(command.args.end(), flags.begin(), flags.end());
  std::string code = options_.code_search_path;
  if (!job_code.empty() && job_code != code) code += (code.empty() ? "" : ":") + job_code;
  if (!code.empty()) command.args.push_back("--code-search-path=" + code);
  command.env = {{"CUDA_VISIBLE_DEVICES", cuda_visible_devices}, {"PYTHONUNBUFFERED", "1"}};
  command.env.insert(command.env.end(), gpu_env.begin(), gpu_env.end());
  command.log_path = worker->log_path;
  Result<pid_t> pid = launcher_.Launch(command);
  if (!pid.ok()) {
    AIRT_LOG(ERROR) << "cannot start a worker: " << pid.status().ToString();
    return ToKjException(pid.status());
  }
  worker->pid = *pid;
  ++started_;
  WorkerId id = worker->id;
  auto paf = kj::newPromiseAndFulfiller<WorkerAddress>();
  worker->waiter = kj::mv(paf.fulfiller);
  worker->deadline = timer_.afterDelay(options_.register_timeout)
                         .then([this, id] { OnRegisterTimeout(id); })
                         .eagerlyEvaluate(LogTimerError);
  AIRT_LOG(INFO) << "started worker " << Short(id) << " (pid " << *pid << ", job " << job.Hex()
                 << ", " << LanguageName(language) << ", CUDA_VISIBLE_DEVICES='"
                 << cuda_visible_devices << "'), logs " << worker->Logs();
  reaper_.Watch(*pid, [this, id](int status) { OnExited(id, status); });
  workers_.emplace(id, std::move(worker));
  return kj::mv(paf.promise);
}

Status WorkerPool::Register(const WorkerAddress& address) {
  Worker* worker = Find(address.id);
  if (worker == nullptr) {
    return NotFound("worker " + address.id.Hex() + " was not started by this node (or exited)");
  }
  if (worker->state != State::kStarting) {
    return FailedPrecondition(
        "worker " + address.id.Hex() +
        (worker->state == State::kStopping ? " is being stopped" : " registered already"));
  }
  if (address.pid != worker->pid) {
    AIRT_LOG(WARNING) << "worker " << Short(address.id) << " registered pid " << address.pid
                      << ", but the node started it as pid " << worker->pid;
  }
  worker->address = address;
  worker->deadline = nullptr;  // the register timeout
  AIRT_LOG(INFO) << "worker " << Short(address.id) << " registered at " << address.host << ":"
                 << address.port;
  if (worker->waiter.get() != nullptr && worker->waiter->isWaiting()) {
    worker->state = State::kLeased;
    worker->leased = true;
    worker->waiter->fulfill(WorkerAddress(address));
  } else {
    // Its lease request went away while it started: keep it for the next one.
    worker->state = State::kLeased;
    Release(address.id, /*stop=*/false);
  }
  worker->waiter = nullptr;
  return Status::Ok();
}

void WorkerPool::Release(const WorkerId& id, bool stop) {
  Worker* worker = Find(id);
  if (worker == nullptr || worker->state != State::kLeased) return;
  worker->leased = false;
  if (stop || stopping_) {
    Stop(*worker, "its lease was returned with disconnectWorker");
    return;
  }
  worker->state = State::kIdle;
  worker->outlives_job = false;
  worker->deadline = timer_.afterDelay(options_.idle_timeout)
                         .then([this, id] { OnIdleTimeout(id); })
                         .eagerlyEvaluate(LogTimerError);
}

void WorkerPool::Stop(Worker& worker, const std::string& why) {
  if (worker.state == State::kStopping) return;
  worker.state = State::kStopping;
  AIRT_LOG(INFO) << "stopping worker " << Short(worker.id) << " (pid " << worker.pid
                 << "): " << why;
  ::kill(worker.pid, SIGTERM);  // still our child: the record goes when it is reaped
  WorkerId id = worker.id;
  worker.kill_after_grace = timer_.afterDelay(options_.stop_grace)
                                .then([this, id] {
                                  if (Worker* w = Find(id)) {
                                    AIRT_LOG(WARNING) << "worker " << Short(id) << " ignored "
                                                      << "SIGTERM; sending SIGKILL";
                                    ::kill(w->pid, SIGKILL);
                                  }
                                })
                                .eagerlyEvaluate(LogTimerError);
}

void WorkerPool::OnRegisterTimeout(const WorkerId& id) {
  Worker* worker = Find(id);
  if (worker == nullptr || worker->state != State::kStarting) return;
  worker->state = State::kStopping;
  ::kill(worker->pid, SIGKILL);
  Status status =
      Unavailable("worker " + id.Hex() + " (pid " + std::to_string(worker->pid) +
                  ") did not register within " + std::to_string(Ms(options_.register_timeout)) +
                  " ms and was killed; see its logs " + worker->Logs());
  AIRT_LOG(WARNING) << status.message();
  if (worker->waiter.get() != nullptr && worker->waiter->isWaiting()) {
    worker->waiter->reject(ToKjException(status));
  }
  worker->waiter = nullptr;
}

void WorkerPool::OnIdleTimeout(const WorkerId& id) {
  Worker* worker = Find(id);
  if (worker == nullptr || worker->state != State::kIdle) return;
  Stop(*worker, "idle for " + std::to_string(Ms(options_.idle_timeout)) + " ms");
}

void WorkerPool::OnExited(const WorkerId& id, int wait_status) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  std::unique_ptr<Worker> worker = std::move(it->second);
  workers_.erase(it);
  std::string why = "worker " + id.Hex() + " (pid " + std::to_string(worker->pid) + ") " +
                    DescribeWaitStatus(wait_status);
  if (worker->waiter.get() != nullptr && worker->waiter->isWaiting()) {
    worker->waiter->reject(
        ToKjException(Unavailable(why + " before it registered; see its logs " + worker->Logs())));
  }
  switch (worker->state) {
    case State::kStarting:
      AIRT_LOG(WARNING) << why << " before it registered; logs " << worker->Logs();
      break;
    case State::kLeased:
      AIRT_LOG(WARNING) << why << " while leased; logs " << worker->Logs();
      break;
    case State::kIdle: AIRT_LOG(WARNING) << why << " while idle; logs " << worker->Logs(); break;
    case State::kStopping: AIRT_LOG(INFO) << why; break;
  }
  if (worker->leased && on_leased_exit_) on_leased_exit_(id, why);
  std::erase_if(exit_waiters_, [&id](ExitWaiter& waiter) {
    waiter.left.erase(id);
    if (!waiter.left.empty()) return false;
    waiter.fulfiller->fulfill();
    return true;
  });
}

std::optional<JobId> WorkerPool::JobOf(const WorkerId& id) const {
  auto it = workers_.find(id);
  if (it == workers_.end()) return std::nullopt;
  return it->second->job;
}

std::set<WorkerId> WorkerPool::RunningIds() const {
  std::set<WorkerId> ids;
  for (const auto& [id, worker] : workers_) ids.insert(id);
  return ids;
}

kj::Promise<void> WorkerPool::Exited(std::set<WorkerId> ids) {
  std::erase_if(ids, [this](const WorkerId& id) { return workers_.count(id) == 0; });
  if (ids.empty()) return kj::READY_NOW;
  auto paf = kj::newPromiseAndFulfiller<void>();
  exit_waiters_.push_back(ExitWaiter{std::move(ids), kj::mv(paf.fulfiller)});
  return kj::mv(paf.promise);
}

kj::Promise<void> WorkerPool::StopAll() {
  stopping_ = true;
  size_t count = workers_.size();
  if (count > 0) AIRT_LOG(INFO) << "stopping " << count << " workers";
  for (auto& [id, worker] : workers_) {
    if (worker->state == State::kStopping) continue;
    // The grace timer of Stop is not needed here: the timeout below covers every worker.
    worker->state = State::kStopping;
    ::kill(worker->pid, SIGTERM);
  }
  return timer_.timeoutAfter(options_.stop_grace, Exited(RunningIds()))
      .then(
          [count]() -> kj::Promise<void> {
            if (count > 0) AIRT_LOG(INFO) << "all " << count << " workers stopped";
            return kj::READY_NOW;
          },
          [this](kj::Exception&&) -> kj::Promise<void> {
            AIRT_LOG(WARNING) << workers_.size() << " workers outlived SIGTERM by "
                              << Ms(options_.stop_grace) << " ms; sending SIGKILL";
            for (auto& [id, worker] : workers_) ::kill(worker->pid, SIGKILL);
            return timer_.timeoutAfter(kMaxWaitAfterKill, Exited(RunningIds()))
                .catch_([this](kj::Exception&&) {
                  for (auto& [id, worker] : workers_) {
                    AIRT_LOG(ERROR) << "worker " << Short(id) << " (pid " << worker->pid
                                    << ") has not exited 5 s after SIGKILL";
                  }
                });
          });
}

kj::Promise<void> WorkerPool::StopJob(const JobId& job, const std::set<WorkerId>& keep) {
  std::set<WorkerId> ids;
  for (auto& [id, worker] : workers_) {
    if (worker->job != job || keep.count(id) != 0) continue;
    worker->leased = false;
    Stop(*worker, "its job " + job.Hex() + " finished");
    ids.insert(id);
  }
  if (ids.empty()) return kj::READY_NOW;
  AIRT_LOG(INFO) << "job " << job.Hex() << " finished: stopping its " << ids.size() << " workers";
  return timer_.timeoutAfter(options_.stop_grace + kMaxWaitAfterKill, Exited(ids))
      .catch_([this, ids](kj::Exception&&) {
        for (const WorkerId& id : ids) {
          if (Worker* worker = Find(id)) {
            AIRT_LOG(ERROR) << "worker " << Short(id) << " (pid " << worker->pid
                            << ") has not exited 5 s after SIGKILL";
          }
        }
      });
}

bool WorkerPool::Kill(const WorkerId& id) {
  Worker* worker = Find(id);
  if (worker == nullptr) return false;
  AIRT_LOG(INFO) << "killing worker " << Short(id) << " (pid " << worker->pid
                 << ") as asked (killWorker)";
  worker->leased = false;
  worker->state = State::kStopping;
  worker->kill_after_grace = nullptr;
  ::kill(worker->pid, SIGKILL);  // still our child: the record goes when it is reaped
  return true;
}

WorkerPoolSnapshot WorkerPool::Snapshot() const {
  WorkerPoolSnapshot snapshot;
  snapshot.started = started_;
  snapshot.reused = reused_;
  for (const auto& [id, w] : workers_) {
    snapshot.workers.push_back(WorkerSnapshot{w->id, w->job, w->language, w->cuda_visible_devices,
                                              w->pid, w->state, w->log_path});
  }
  return snapshot;
}

}  // namespace airt::worker
