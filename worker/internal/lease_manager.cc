#include "worker/internal/lease_manager.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include <kj/function.h>

#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::worker {
namespace {

using worker::scheduling::TimePoint;

// Leases ended by the node remembered for their holders' returns; beyond this, the earliest go.
constexpr size_t kMaxEndedLeases = 4096;

worker::scheduling::Duration ToChrono(kj::Duration d) {
  return std::chrono::nanoseconds(d / kj::NANOSECONDS);
}

kj::TimePoint ToKj(TimePoint t) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return kj::origin<kj::TimePoint>() + ns * kj::NANOSECONDS;
}

}  // namespace

// A request the queue holds, or one granted here whose worker is starting.
struct LeaseManager::Request {
  LeaseAsk ask;
  // Own<>: GCC 12 sees a std::variant in a fulfiller's storage as maybe-uninitialized.
  kj::Own<kj::PromiseFulfiller<kj::Own<LeaseOutcome>>> reply;
  std::optional<worker::scheduling::Allocation> allocation;  // held while granting
  bool granting = false;
  bool started_again = false;  // detached: its worker was stopped while starting, started again
};

LeaseManager::LeaseManager(LeaseManagerOptions options, worker::scheduling::NodeResources resources,
                           WorkerPool& pool, kj::Timer& timer)
    : options_(options),
      resources_(std::move(resources)),
      queue_(worker::scheduling::LeasePolicy(
          {options.local_node, ToChrono(options.infeasible_grace)})),
      pool_(pool),
      timer_(timer),
      none_(*worker::scheduling::NodeResources::Create({})),
      self_(std::make_shared<LeaseManager*>(this)),
      tasks_(*this) {
  pool_.SetOnLeasedExit(
      [this](const WorkerId& worker, const std::string& why) { OnLeasedWorkerExit(worker, why); });
}

LeaseManager::~LeaseManager() noexcept {
  *self_ = nullptr;
  pool_.SetOnLeasedExit(nullptr);
  for (auto& [id, request] : requests_) {
    if (request->reply->isWaiting()) {
      request->reply->reject(ToKjException(Unavailable("the node is stopping")));
    }
  }
}

TimePoint LeaseManager::Now() const {
  return TimePoint(ToChrono(timer_.now() - kj::origin<kj::TimePoint>()));
}

kj::Promise<LeaseOutcome> LeaseManager::RequestLease(LeaseAsk ask) {
  if (!pool_.CanStart(ask.language)) {
    return ToKjException(Unimplemented(
        "language " + std::string(LanguageName(ask.language)) +
        ": this node has no worker for it (Python: no interpreter that imports airt; the node "
        "takes --python-executable, else $AIRT_PYTHON, else the python3 on its PATH if that "
        "imports airt, and its log says why that one was refused)"));
  }
  uint64_t id = next_request_id_++;
  TimePoint now = Now();
  Result<worker::scheduling::LeaseDecision> decision =
      queue_.Submit(worker::scheduling::LeaseRequest{id, ask.shape, now, ask.placed,
                                                     ask.strategy, ask.spilled},
                    Closed() ? none_ : resources_, remote_.view, now);
  if (!decision.ok()) return ToKjException(Internal(decision.status().ToString()));
  AIRT_LOG(DEBUG) << "lease request " << id << " for " << ask.shape.ToString() << ": "
                  << worker::scheduling::ToString(*decision);
  if (const auto* spill = std::get_if<worker::scheduling::SpillBack>(&*decision)) {
    return LeaseOutcome(SpillTarget(spill->node));
  }
  if (const auto* infeasible = std::get_if<worker::scheduling::Infeasible>(&*decision)) {
    AIRT_LOG(WARNING) << "lease request " << id << " is infeasible: " << infeasible->message;
    return LeaseOutcome(LeaseInfeasible{infeasible->message});
  }
  auto paf = kj::newPromiseAndFulfiller<kj::Own<LeaseOutcome>>();
  auto request = std::make_unique<Request>();
  request->ask = std::move(ask);
  request->reply = kj::mv(paf.fulfiller);
  Request& r = *request;
  requests_.emplace(id, std::move(request));
  if (std::holds_alternative<worker::scheduling::GrantLocally>(*decision)) {
    StartGrant(id, r);
  } else {
    ArmGraceTimer();
    if (on_queued_) on_queued_();
  }
  return paf.promise.then([](kj::Own<LeaseOutcome> outcome) { return kj::mv(*outcome); })
      .attach(kj::defer([self = self_, id] {
        if (*self != nullptr) (*self)->OnRequestDropped(id);
      }));
}

void LeaseManager::StartGrant(uint64_t id, Request& request) {
  Result<worker::scheduling::Allocation> allocation = resources_.Acquire(request.ask.shape);
  if (!allocation.ok()) {
    // The queue decided on the same state: our own bug.
    request.reply->reject(ToKjException(Internal("granted " + request.ask.shape.ToString() +
                                                 " yet: " + allocation.status().ToString())));
    requests_.erase(id);
    return;
  }
  request.granting = true;
  LendBundleGpus(*allocation);
  std::string cuda = VisibleDevices(*allocation);
  WorkerEnv gpu_env = GpuEnv(*allocation);
  request.allocation = std::move(*allocation);
  tasks_.add(
      pool_.Acquire(request.ask.job, request.ask.language, cuda, request.ask.code_search_path,
                    gpu_env, request.ask.detached)
          .then([this, id](WorkerAddress&& worker) { OnWorkerReady(id, worker); },
                [this, id](kj::Exception&& e) { OnWorkerFailed(id, kj::mv(e)); }));
}

void LeaseManager::OnWorkerReady(uint64_t id, const WorkerAddress& worker) {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    pool_.Release(worker.id, /*stop=*/false);
    return;
  }
  std::unique_ptr<Request> request = std::move(it->second);
  requests_.erase(it);
  if (!request->allocation.has_value() || !request->reply->isWaiting()) {
    // The caller went away while the worker started (its resources are released already).
    if (request->allocation.has_value()) Release(*request->allocation);
    pool_.Release(worker.id, /*stop=*/false);
    ScheduleDispatch();
    return;
  }
  if (!pool_.Running(worker.id)) {
    // It exited between registering and this turn: no lease for a dead worker.
    Release(*request->allocation);
    request->reply->reject(ToKjException(Unavailable(
        "worker " + worker.id.Hex() + " exited right after it registered; see its log")));
    ScheduleDispatch();
    return;
  }
  const std::vector<uint32_t> ids = GpuIdsOf(*request->allocation);
  if (std::any_of(ids.begin(), ids.end(), [&](uint32_t g) { return quarantined_.count(g); })) {
    // A GPU of this grant was quarantined while its worker started: decide the request again.
    Release(*request->allocation);
    pool_.Release(worker.id, /*stop=*/true);
    request->allocation.reset();
    request->granting = false;
    Status queued = queue_.Enqueue(
        worker::scheduling::LeaseRequest{id, request->ask.shape, Now(), request->ask.placed,
                                         request->ask.strategy, request->ask.spilled});
    if (!queued.ok()) {
      request->reply->reject(ToKjException(Internal("re-queueing: " + queued.ToString())));
      return;
    }
    requests_.emplace(id, std::move(request));
    ScheduleDispatch();
    return;
  }
  uint64_t lease_id = next_lease_id_++;
  LeaseGranted granted{lease_id, worker, GpuIdsOf(*request->allocation)};
  leases_.emplace(lease_id, Lease{worker.id, std::move(*request->allocation), request->ask.detached,
                                  worker.pid, request->ask.retriable});
  lease_of_worker_[worker.id] = lease_id;
  AIRT_LOG(DEBUG) << "lease " << lease_id << " of " << request->ask.shape.ToString()
                  << " granted: worker " << worker.id.Hex().substr(0, 8) << " at " << worker.host
                  << ":" << worker.port;
  request->reply->fulfill(kj::heap<LeaseOutcome>(std::move(granted)));
}

void LeaseManager::OnWorkerFailed(uint64_t id, kj::Exception&& exception) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  Request& waiting = *it->second;
  if (waiting.ask.detached && !waiting.started_again && waiting.allocation.has_value() &&
      waiting.reply->isWaiting()) {
    // A detached actor's worker (the head restarting it) stopped while it started, most often by
    // its job's end (EndJob keeps the request but the pool stops the job's starting workers):
    // one more start, on the resources it holds.
    waiting.started_again = true;
    AIRT_LOG(INFO) << "lease request " << id << " (detached): its worker failed to start ("
                   << exception.getDescription().cStr() << "); starting another";
    std::string cuda = VisibleDevices(*waiting.allocation);
    WorkerEnv gpu_env = GpuEnv(*waiting.allocation);
    tasks_.add(pool_.Acquire(waiting.ask.job, waiting.ask.language, cuda,
                             waiting.ask.code_search_path, gpu_env)
                   .then([this, id](WorkerAddress&& worker) { OnWorkerReady(id, worker); },
                         [this, id](kj::Exception&& e) { OnWorkerFailed(id, kj::mv(e)); }));
    return;
  }
  std::unique_ptr<Request> request = std::move(it->second);
  requests_.erase(it);
  if (request->allocation.has_value()) Release(*request->allocation);
  if (request->reply->isWaiting()) request->reply->reject(kj::mv(exception));
  ScheduleDispatch();
}

void LeaseManager::OnRequestDropped(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;  // answered
  Request& request = *it->second;
  if (!request.granting) {
    (void)queue_.Cancel(id);
    requests_.erase(it);
    AIRT_LOG(DEBUG) << "lease request " << id << " cancelled by its caller while queued";
    return;
  }
  // Its worker is starting: free the resources now, keep the worker when it registers.
  if (request.allocation.has_value()) {
    Release(*request.allocation);
    request.allocation.reset();
    ScheduleDispatch();
  }
  AIRT_LOG(DEBUG) << "lease request " << id << " cancelled by its caller while its worker starts";
}

Status LeaseManager::ReturnLease(uint64_t lease_id, bool disconnect_worker) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) {
    if (ended_leases_.erase(lease_id) > 0) return Status::Ok();  // killed, or its job finished
    return NotFound("lease " + std::to_string(lease_id) +
                    " is not held on this node (returned already, or its worker exited)");
  }
  Lease lease = std::move(it->second);
  leases_.erase(it);
  lease_of_worker_.erase(lease.worker);
  Release(lease.allocation);
  pool_.Release(lease.worker, disconnect_worker);
  Dispatch();
  return Status::Ok();
}

void LeaseManager::AbandonLease(uint64_t lease_id) noexcept {
  auto it = leases_.find(lease_id);
  if (it == leases_.end() || it->second.detached) return;
  AIRT_LOG(INFO) << "lease " << lease_id << " is returned: its holder dropped it without "
                 << "returning it (the requester exited?); its worker is stopped";
  Lease lease = std::move(it->second);
  leases_.erase(it);
  lease_of_worker_.erase(lease.worker);
  Release(lease.allocation);
  KJ_IF_MAYBE (e, kj::runCatchingExceptions([&] { pool_.Release(lease.worker, true); })) {
    AIRT_LOG(WARNING) << "stopping the worker of abandoned lease " << lease_id
                      << " failed: " << e->getDescription().cStr();
  }
  ScheduleDispatch();
}

Status LeaseManager::RegisterWorker(const WorkerAddress& address) {
  return pool_.Register(address);
}

void LeaseManager::OnLeasedWorkerExit(const WorkerId& worker, const std::string& why) {
  auto found = lease_of_worker_.find(worker);
  if (found == lease_of_worker_.end()) return;
  uint64_t lease_id = found->second;
  lease_of_worker_.erase(found);
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  AIRT_LOG(WARNING) << "lease " << lease_id << " ends: " << why;
  Release(it->second.allocation);
  leases_.erase(it);
  ScheduleDispatch();
}

void LeaseManager::EndLease(uint64_t lease_id) {
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) return;
  Release(it->second.allocation);
  lease_of_worker_.erase(it->second.worker);
  leases_.erase(it);
  ended_leases_.insert(lease_id);
  if (ended_leases_.size() > kMaxEndedLeases) ended_leases_.erase(ended_leases_.begin());
  ScheduleDispatch();
}

kj::Promise<void> LeaseManager::EndJob(const JobId& job) {
  for (auto it = requests_.begin(); it != requests_.end();) {
    Request& request = *it->second;
    // A detached actor's request (the head restarting it after its job ended) outlives the job.
    if (request.ask.job != job || request.ask.detached) {
      ++it;
      continue;
    }
    if (!request.granting) (void)queue_.Cancel(it->first);
    if (request.allocation.has_value()) Release(*request.allocation);
    if (request.reply->isWaiting()) {
      request.reply->reject(ToKjException(
          FailedPrecondition("job " + job.Hex() + " has finished; its lease requests are void")));
    }
    it = requests_.erase(it);
    ScheduleDispatch();
  }
  std::vector<uint64_t> ending;
  std::set<WorkerId> detached;
  for (const auto& [lease_id, lease] : leases_) {
    if (pool_.JobOf(lease.worker) != job) continue;
    if (lease.detached) {
      detached.insert(lease.worker);
    } else {
      ending.push_back(lease_id);
    }
  }
  for (uint64_t lease_id : ending) EndLease(lease_id);
  // The workers starting for detached actors' requests (the head restarting one) live on too.
  detached.merge(pool_.Outliving(job));
  if (!detached.empty()) {
    AIRT_LOG(INFO) << "job " << job.Hex() << " finished; its " << detached.size()
                   << " detached actors' workers keep running";
  }
  // The job's objects go once its detached actors' workers are gone too: they may read them.
  return pool_.StopJob(job, detached).then([this, detached]() mutable {
    return pool_.Exited(std::move(detached));
  });
}

bool LeaseManager::KillWorker(const WorkerId& worker) {
  if (!pool_.Running(worker)) return false;
  if (auto found = lease_of_worker_.find(worker); found != lease_of_worker_.end()) {
    EndLease(found->second);
  }
  return pool_.Kill(worker);
}

void LeaseManager::WorkerBlocked(const WorkerId& worker, bool blocked) {
  auto found = lease_of_worker_.find(worker);
  if (found == lease_of_worker_.end()) return;
  auto lease = leases_.find(found->second);
  if (lease == leases_.end()) return;
  Status lent = resources_.LendCpus(lease->second.allocation.id, blocked);
  if (!lent.ok()) AIRT_LOG(ERROR) << "lending a blocked worker's CPUs: " << lent.ToString();
  if (blocked) ScheduleDispatch();
}

std::string LeaseManager::VisibleDevices(const worker::scheduling::Allocation& allocation) const {
  std::string out;
  for (uint32_t id : GpuIdsOf(allocation)) {
    auto name = options_.gpu_visible_names.find(id);
    out += (out.empty() ? "" : ",") +
           (name == options_.gpu_visible_names.end() ? std::to_string(id) : name->second);
  }
  return out;
}

WorkerEnv LeaseManager::GpuEnv(const worker::scheduling::Allocation& allocation) const {
  double amount = GpuAmountOf(allocation);
  std::vector<uint32_t> ids = GpuIdsOf(allocation);
  if (amount <= 0 || amount >= 1 || ids.size() != 1) return {};
  auto memory = options_.gpu_memory.find(ids[0]);
  if (memory == options_.gpu_memory.end() || memory->second == 0) return {};
  char fraction[32];
  std::snprintf(fraction, sizeof fraction, "%g", amount);
  auto limit = static_cast<uint64_t>(amount * static_cast<double>(memory->second));
  return {{"AIRT_GPU_MEMORY_LIMIT_BYTES", std::to_string(limit)},
          {"AIRT_GPU_MEMORY_FRACTION", fraction}};
}

Status LeaseManager::QuarantineGpu(uint32_t gpu_id, const std::string& reason) {
  AIRT_RETURN_IF_ERROR(resources_.QuarantineGpu(gpu_id));
  quarantined_.insert(gpu_id);
  std::vector<WorkerId> holding;
  for (const auto& [lease_id, lease] : leases_) {
    const std::vector<uint32_t> ids = GpuIdsOf(lease.allocation);
    if (std::find(ids.begin(), ids.end(), gpu_id) != ids.end()) holding.push_back(lease.worker);
  }
  for (const WorkerId& worker : holding) {
    AIRT_LOG(WARNING) << "stopping worker " << worker.Hex().substr(0, 8) << ": " << reason;
    StopWorker(worker, reason);
  }
  ScheduleDispatch();
  return Status::Ok();
}

Status LeaseManager::RestoreGpu(uint32_t gpu_id) {
  AIRT_RETURN_IF_ERROR(resources_.RestoreGpu(gpu_id));
  quarantined_.erase(gpu_id);
  ScheduleDispatch();
  return Status::Ok();
}

void LeaseManager::SetCordoned(bool cordoned) {
  cordoned_ = cordoned;
  ScheduleDispatch();
}

void LeaseManager::SetDraining() {
  draining_ = true;
  ScheduleDispatch();
}

bool LeaseManager::StopWorker(const WorkerId& worker, const std::string& reason,
                              bool out_of_memory) {
  constexpr size_t kMaxExitReasons = 512;
  if (exit_reasons_.emplace(worker, WorkerExit{reason, out_of_memory}).second) {
    exit_reason_order_.push_back(worker);
  }
  if (exit_reason_order_.size() > kMaxExitReasons) {
    exit_reasons_.erase(exit_reason_order_.front());
    exit_reason_order_.erase(exit_reason_order_.begin());
  }
  return KillWorker(worker);
}

std::optional<WorkerExit> LeaseManager::ExitReason(const WorkerId& worker) const {
  auto it = exit_reasons_.find(worker);
  if (it == exit_reasons_.end()) return std::nullopt;
  return it->second;
}

std::vector<KillCandidate> LeaseManager::Leased() const {
  std::vector<KillCandidate> out;
  for (const auto& [lease_id, lease] : leases_) {
    out.push_back(KillCandidate{lease.worker, lease.pid, lease_id, lease.retriable});
  }
  return out;
}

std::vector<GpuLease> LeaseManager::GpuLeases() const {
  std::vector<GpuLease> out;
  std::map<WorkerId, int32_t> pids;  // the processes the pool started (what NVML lists)
  for (const WorkerSnapshot& w : pool_.Snapshot().workers) pids[w.id] = w.pid;
  for (const auto& [lease_id, lease] : leases_) {
    std::vector<uint32_t> ids = GpuIdsOf(lease.allocation);
    if (ids.empty()) continue;
    auto pid = pids.find(lease.worker);
    out.push_back(GpuLease{lease.worker, pid == pids.end() ? lease.pid : pid->second, ids,
                           GpuAmountOf(lease.allocation)});
  }
  return out;
}

void LeaseManager::Release(const worker::scheduling::Allocation& allocation) {
  ReturnBundleGpus(allocation.id);
  Status released = resources_.Release(allocation);
  if (!released.ok()) AIRT_LOG(ERROR) << "releasing a lease: " << released.ToString();
}

void LeaseManager::UpdateView(RemoteNodes nodes) {
  remote_ = std::move(nodes);
  Dispatch();
}

LeaseSpilled LeaseManager::SpillTarget(const NodeId& node) const {
  auto it = remote_.addresses.find(node);
  // The policy picks only nodes of the view, which all have addresses.
  return LeaseSpilled{node, it == remote_.addresses.end() ? "" : it->second};
}

void LeaseManager::Dispatch() {
  TimePoint now = Now();
  std::vector<worker::scheduling::DispatchedLease> out =
      queue_.Dispatch(Closed() ? none_ : resources_, remote_.view, now);
  for (worker::scheduling::DispatchedLease& d : out) {
    uint64_t id = d.request.id;
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;  // cancelled requests leave the queue at once
    Request& request = *it->second;
    AIRT_LOG(DEBUG) << "queued lease request " << id << " for " << d.request.shape.ToString()
                    << ": " << worker::scheduling::ToString(d.decision);
    if (std::holds_alternative<worker::scheduling::GrantLocally>(d.decision)) {
      StartGrant(id, request);
      continue;
    }
    if (const auto* spill = std::get_if<worker::scheduling::SpillBack>(&d.decision)) {
      request.reply->fulfill(kj::heap<LeaseOutcome>(SpillTarget(spill->node)));
    } else if (const auto* infeasible = std::get_if<worker::scheduling::Infeasible>(&d.decision)) {
      AIRT_LOG(WARNING) << "lease request " << id << " is infeasible: " << infeasible->message;
      request.reply->fulfill(kj::heap<LeaseOutcome>(LeaseInfeasible{infeasible->message}));
    }
    requests_.erase(it);
  }
  ArmGraceTimer();
}

void LeaseManager::ScheduleDispatch() {
  if (dispatch_scheduled_) return;
  dispatch_scheduled_ = true;
  tasks_.add(kj::evalLater([this] {
    dispatch_scheduled_ = false;
    Dispatch();
  }));
}

void LeaseManager::ArmGraceTimer() {
  std::optional<TimePoint> next = queue_.NextGraceEnd(Now());
  if (!next.has_value()) return;
  if (grace_timer_at_.has_value() && *grace_timer_at_ <= *next && *grace_timer_at_ > Now()) return;
  grace_timer_at_ = *next;
  TimePoint at = *next;
  tasks_.add(timer_.atTime(ToKj(at)).then([this, at] {
    if (grace_timer_at_ == at) grace_timer_at_.reset();
    Dispatch();
  }));
}

ResourceReport LeaseManager::Report() const {
  worker::scheduling::NodeResourcesSnapshot snapshot = resources_.Snapshot();
  ResourceReport report;
  for (const auto& [name, amount] : snapshot.total.amounts()) {
    report.available.push_back({name, Closed() ? 0 : snapshot.available.Get(name).ToDouble()});
  }
  for (const worker::scheduling::GpuIdUsage& gpu : snapshot.gpus_in_use) {
    report.gpu_ids_in_use.push_back(gpu.id);
  }
  report.quarantined_gpu_ids = snapshot.quarantined_gpus;
  report.held_bundles = CommittedBundles();
  for (const worker::scheduling::QueuedShape& queued : queue_.Snapshot()) {
    QueuedDemand demand;
    for (const auto& [name, amount] : queued.shape.amounts().amounts()) {
      demand.resources.push_back({name, amount.ToDouble()});
    }
    demand.accelerator_type = queued.shape.accelerator_type();
    demand.count = static_cast<uint32_t>(queued.count);
    report.queued.push_back(std::move(demand));
  }
  report.num_leases = static_cast<uint32_t>(leases_.size());
  return report;
}

LeaseManagerSnapshot LeaseManager::Snapshot() const {
  LeaseManagerSnapshot snapshot;
  snapshot.resources = resources_.Snapshot();
  snapshot.queued = queue_.Snapshot();
  snapshot.num_queued = queue_.size();
  for (const auto& [id, request] : requests_) snapshot.num_granting += request->granting ? 1 : 0;
  snapshot.num_leases = leases_.size();
  snapshot.view_nodes = remote_.view.nodes.size();
  snapshot.pool = pool_.Snapshot();
  return snapshot;
}

void LeaseManager::taskFailed(kj::Exception&& exception) {
  AIRT_LOG(ERROR) << "lease manager task failed: " << FromKjException(exception).ToString();
}

}  // namespace airt::worker
