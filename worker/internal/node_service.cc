#include "worker/internal/node_service.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "common/logging.h"
#include "common/rpc_status.h"
#include "common/strategy_wire.h"

namespace airt::worker {
namespace {

Status FieldError(std::string_view field, const std::string& why) {
  return InvalidArgument(std::string(field) + ": " + why);
}

std::string_view View(capnp::Text::Reader text) { return {text.cStr(), text.size()}; }

// The worker id in `id`, field `field` of a request; kInvalidArgument naming the field.
Result<WorkerId> WorkerIdField(capnp::Data::Reader id, std::string_view field) {
  Result<WorkerId> worker =
      WorkerId::FromBinary(std::string_view(reinterpret_cast<const char*>(id.begin()), id.size()));
  if (!worker.ok()) return FieldError(field, worker.status().message());
  return worker;
}

kj::Promise<void> Fail(const Status& status) { return ToKjException(status); }

}  // namespace

Result<LeaseAsk> ParseLeaseAsk(proto::Node::RequestWorkerLeaseParams::Reader params) {
  LeaseAsk ask;
  auto shape = params.getShape();
  auto resources = shape.getResources();
  if (resources.size() > kMaxShapeResources) {
    return FieldError("shape.resources", std::to_string(resources.size()) +
                                             " entries, more than the " +
                                             std::to_string(kMaxShapeResources) + " allowed");
  }
  std::map<std::string, double> amounts;
  for (size_t i = 0; i < resources.size(); ++i) {
    std::string field = "shape.resources[" + std::to_string(i) + "]";
    std::string_view name = View(resources[i].getName());
    if (name.find('\0') != std::string_view::npos) {
      return FieldError(field + ".name", "holds a NUL byte");
    }
    if (!amounts.emplace(std::string(name), resources[i].getAmount()).second) {
      return FieldError(field + ".name", "'" + std::string(name) + "' is named twice");
    }
  }
  std::string_view accelerator = View(shape.getAcceleratorType());
  if (accelerator.find('\0') != std::string_view::npos) {
    return FieldError("shape.acceleratorType", "holds a NUL byte");
  }
  Result<worker::scheduling::ResourceShape> parsed =
      worker::scheduling::ResourceShape::FromDoubles(amounts, std::string(accelerator));
  if (!parsed.ok()) return FieldError("shape", parsed.status().message());
  ask.shape = std::move(*parsed);

  auto job = params.getJobId();
  Result<JobId> job_id =
      JobId::FromBinary(std::string_view(reinterpret_cast<const char*>(job.begin()), job.size()));
  if (!job_id.ok()) return FieldError("jobId", job_id.status().message());
  ask.job = *job_id;

  switch (params.getLanguage()) {
    case proto::Language::CPP: ask.language = WorkerLanguage::kCpp; break;
    case proto::Language::PYTHON: ask.language = WorkerLanguage::kPython; break;
    default:
      return FieldError("language",
                        "unknown value " + std::to_string(static_cast<int>(params.getLanguage())));
  }
  std::string_view code = View(params.getCodeSearchPath());
  if (code.size() > kMaxCodeSearchPathBytes || code.find('\0') != std::string_view::npos) {
    return FieldError("codeSearchPath",
                      "must be at most " + std::to_string(kMaxCodeSearchPathBytes) +
                          " bytes without NUL, got " + std::to_string(code.size()));
  }
  ask.code_search_path = std::string(code);
  ask.placed = params.getPlaced();
  ask.spilled = params.getSpilled();
  if (params.hasStrategy()) {
    AIRT_ASSIGN_OR_RETURN(ask.strategy, ReadStrategy(params.getStrategy(), "strategy"));
  }
  ask.detached = params.getDetached();
  ask.retriable = params.getRetriable();
  return ask;
}

Result<WorkerAddress> ParseWorkerAddress(proto::WorkerAddress::Reader address,
                                         std::string_view field) {
  WorkerAddress out;
  Result<WorkerId> worker_id =
      WorkerIdField(address.getWorkerId(), std::string(field) + ".workerId");
  if (!worker_id.ok()) {
    return worker_id.status();
  }
  out.id = *worker_id;
  std::string_view host = View(address.getHost());
  if (host.empty() || host.size() > kMaxHostBytes || host.find('\0') != std::string_view::npos) {
    return FieldError(std::string(field) + ".host",
                      "must be 1 to " + std::to_string(kMaxHostBytes) + " bytes without NUL");
  }
  out.host = std::string(host);
  if (address.getPort() == 0) return FieldError(std::string(field) + ".port", "must not be 0");
  out.port = address.getPort();
  if (address.getPid() <= 0) {
    return FieldError(std::string(field) + ".pid",
                      std::to_string(address.getPid()) + " is not a process id");
  }
  out.pid = address.getPid();
  return out;
}

void FillLeaseReply(const LeaseOutcome& outcome, proto::LeaseReply::Builder reply) {
  if (const auto* granted = std::get_if<LeaseGranted>(&outcome)) {
    auto grant = reply.initGranted();
    grant.setLeaseId(granted->lease_id);
    auto worker = grant.initWorker();
    worker.setWorkerId(capnp::Data::Reader(granted->worker.id.data(), WorkerId::kSize));
    worker.setHost(granted->worker.host);
    worker.setPort(granted->worker.port);
    worker.setPid(granted->worker.pid);
    auto gpus = grant.initGpuIds(granted->gpu_ids.size());
    for (size_t i = 0; i < granted->gpu_ids.size(); ++i) gpus.set(i, granted->gpu_ids[i]);
  } else if (const auto* spilled = std::get_if<LeaseSpilled>(&outcome)) {
    reply.setSpillback(spilled->node_address);
  } else {
    reply.setInfeasible(std::get<LeaseInfeasible>(outcome).message);
  }
}

namespace {

// One granted lease's LeaseHolder (node.capnp): owned by the RPC system, destroyed on the loop
// when the requester's last reference goes (dropped, or its connection broke); then the lease, if
// still held, is returned (LeaseManager::AbandonLease).
class LeaseHolderImpl final : public proto::LeaseHolder::Server {
 public:
  LeaseHolderImpl(std::shared_ptr<NodeServiceTarget> target, uint64_t lease_id)
      : target_(std::move(target)), lease_id_(lease_id) {}
  ~LeaseHolderImpl() noexcept {
    if (target_->leases != nullptr) target_->leases->AbandonLease(lease_id_);
  }

 private:
  std::shared_ptr<NodeServiceTarget> target_;
  uint64_t lease_id_;
};

}  // namespace

Result<LeaseManager*> NodeService::Leases() const {
  if (target_->leases == nullptr) return Unavailable("the node is not granting leases (stopping)");
  return target_->leases;
}

kj::Promise<void> NodeService::requestWorkerLease(RequestWorkerLeaseContext context) {
  Result<LeaseManager*> leases = Leases();
  if (!leases.ok()) return Fail(leases.status());
  Result<LeaseAsk> ask = ParseLeaseAsk(context.getParams());
  if (!ask.ok()) return Fail(ask.status());
  // Cap'n Proto 0.9 finishes a call the client dropped only when the server allows it: then the
  // promise below is dropped, which takes the request out of the queue (LeaseManager).
  context.allowCancellation();
  return (*leases)
      ->RequestLease(std::move(*ask))
      .then([context, target = target_](LeaseOutcome&& outcome) mutable {
        auto results = context.getResults();
        FillLeaseReply(outcome, results.initReply());
        if (const auto* granted = std::get_if<LeaseGranted>(&outcome)) {
          results.setHolder(kj::heap<LeaseHolderImpl>(std::move(target), granted->lease_id));
        }
      });
}

kj::Promise<void> NodeService::returnWorkerLease(ReturnWorkerLeaseContext context) {
  Result<LeaseManager*> leases = Leases();
  if (!leases.ok()) return Fail(leases.status());
  auto params = context.getParams();
  Status returned = (*leases)->ReturnLease(params.getLeaseId(), params.getDisconnectWorker());
  if (!returned.ok()) return Fail(returned);
  return kj::READY_NOW;
}

kj::Promise<void> NodeService::registerWorker(RegisterWorkerContext context) {
  Result<LeaseManager*> leases = Leases();
  if (!leases.ok()) return Fail(leases.status());
  Result<WorkerAddress> address = ParseWorkerAddress(context.getParams().getWorker(), "worker");
  if (!address.ok()) return Fail(address.status());
  Status registered = (*leases)->RegisterWorker(*address);
  if (!registered.ok()) return Fail(registered);
  return kj::READY_NOW;
}

kj::Promise<void> NodeService::killWorker(KillWorkerContext context) {
  Result<LeaseManager*> leases = Leases();
  if (!leases.ok()) return Fail(leases.status());
  Result<WorkerId> worker = WorkerIdField(context.getParams().getWorkerId(), "workerId");
  if (!worker.ok()) return Fail(worker.status());
  context.getResults().setKilled((*leases)->KillWorker(*worker));
  return kj::READY_NOW;
}

kj::Promise<void> NodeService::notifyWorkerBlocked(NotifyWorkerBlockedContext context) {
  Result<LeaseManager*> leases = Leases();
  if (!leases.ok()) return Fail(leases.status());
  auto params = context.getParams();
  Result<WorkerId> worker = WorkerIdField(params.getWorkerId(), "workerId");
  if (!worker.ok()) return Fail(worker.status());
  (*leases)->WorkerBlocked(*worker, params.getBlocked());
  return kj::READY_NOW;
}

kj::Promise<void> NodeService::freeObjects(FreeObjectsContext context) {
  if (target_->store == nullptr) return Fail(Unavailable("the node is not serving (stopping)"));
  auto ids = context.getParams().getObjectIds();
  for (uint i = 0; i < ids.size(); ++i) {
    Result<ObjectId::BaseId> id = ObjectId::FromBinary(
        std::string_view(reinterpret_cast<const char*>(ids[i].begin()), ids[i].size()));
    if (!id.ok())
      return Fail(FieldError("objectIds[" + std::to_string(i) + "]", id.status().message()));
    Status deleted = target_->store->Delete(*id);
    if (!deleted.ok() && deleted.code() != Code::kNotFound) {
      AIRT_LOG(WARNING) << "freeing object " << ObjectId(*id).Hex() << ": " << deleted.ToString();
    }
  }
  return kj::READY_NOW;
}

kj::Promise<void> NodeService::subscribeLogs(SubscribeLogsContext context) {
  if (target_->logs == nullptr) {
    return Fail(Unavailable("the node is not streaming logs (stopping)"));
  }
  auto params = context.getParams();
  auto job = params.getJobId();
  Result<JobId> job_id =
      JobId::FromBinary(std::string_view(reinterpret_cast<const char*>(job.begin()), job.size()));
  if (!job_id.ok()) return Fail(FieldError("jobId", job_id.status().message()));
  target_->logs->Subscribe(*job_id, params.getSink());
  return kj::READY_NOW;
}

kj::Promise<void> NodeService::gpuHealth(GpuHealthContext context) {
  auto results = context.getResults();
  if (target_->gpus == nullptr) {
    results.initGpus(0);
    return kj::READY_NOW;
  }
  GpuMonitorSnapshot snapshot = target_->gpus->Snapshot();
  auto gpus = results.initGpus(static_cast<unsigned>(snapshot.gpus.size()));
  for (size_t i = 0; i < snapshot.gpus.size(); ++i) {
    const GpuState& gpu = snapshot.gpus[i];
    auto out = gpus[static_cast<unsigned>(i)];
    out.setGpuId(gpu.gpu_id);
    out.setUuid(gpu.uuid);
    out.setQuarantined(gpu.quarantined);
    out.setReason(gpu.reason);
    out.setSinceMs(gpu.since_ms);
    out.setChecks(gpu.checks);
  }
  results.setCordoned(snapshot.cordon_reason);
  results.setCordonedSinceMs(snapshot.cordoned_since_ms);
  return kj::READY_NOW;
}

kj::Promise<void> NodeService::returnGpu(ReturnGpuContext context) {
  if (target_->gpus == nullptr) return Fail(Unavailable("the node is not serving (stopping)"));
  Status returned = target_->gpus->Return(context.getParams().getGpuId());
  if (!returned.ok()) return Fail(returned);
  return kj::READY_NOW;
}

kj::Promise<void> NodeService::workerExitReason(WorkerExitReasonContext context) {
  Result<LeaseManager*> leases = Leases();
  if (!leases.ok()) return Fail(leases.status());
  Result<WorkerId> worker = WorkerIdField(context.getParams().getWorkerId(), "workerId");
  if (!worker.ok()) return Fail(worker.status());
  std::optional<WorkerExit> exit = (*leases)->ExitReason(*worker);
  auto results = context.getResults();
  results.setReason(exit ? exit->reason : "");
  results.setOutOfMemory(exit && exit->out_of_memory);
  return kj::READY_NOW;
}

kj::Promise<void> NodeService::drain(DrainContext context) {
  constexpr size_t kMaxDrainReasonBytes = 4096;
  if (target_->drain == nullptr) return Fail(Unavailable("the node is not serving (stopping)"));
  auto params = context.getParams();
  std::string_view reason = View(params.getReason());
  if (reason.size() > kMaxDrainReasonBytes || reason.find('\0') != std::string_view::npos) {
    return Fail(FieldError("reason", "must be at most " + std::to_string(kMaxDrainReasonBytes) +
                                         " bytes without NUL"));
  }
  if (params.getTimeoutMs() == 0) return Fail(FieldError("timeoutMs", "must be > 0"));
  constexpr uint64_t kMaxTimeoutMs = 7ull * 24 * 3600 * 1000;
  uint64_t timeout_ms = std::min(params.getTimeoutMs(), kMaxTimeoutMs);
  Status started = target_->drain->Start(std::string(reason),
                                         static_cast<int64_t>(timeout_ms) * kj::MILLISECONDS);
  if (!started.ok()) return Fail(started);
  return kj::READY_NOW;
}

}  // namespace airt::worker
