#include "api/core_worker/core_worker.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <future>
#include <thread>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include "api/core_worker/actor_manager.h"
#include "api/core_worker/capnp_util.h"
#include "api/core_worker/core_worker_impl.h"
#include "api/core_worker/reference_counter.h"
#include "api/core_worker/task_dispatcher.h"
#include "common/inbox.h"
#include "common/logging.h"
#include "common/proto/cluster.capnp.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"
#include "objectstore/object_store.h"
#include "objectstore/transfer.h"

namespace airt::core_worker {
namespace {

kj::Exception Fail(const Status& s) { return ToKjException(s); }

class LogTaskErrors : public kj::TaskSet::ErrorHandler {
 public:
  void taskFailed(kj::Exception&& e) override {
    AIRT_LOG(WARNING) << "core worker background task failed: " << e.getDescription().cStr();
  }
};

// Prints the lines the node streams from this job's workers on the driver's stdout, one write
// per batch (Ray's "(pid=..., node=...) line" output). Runs on the loop thread.
class PrintLogs final : public proto::LogSink::Server {
 protected:
  kj::Promise<void> write(WriteContext context) override {
    std::string text;
    for (capnp::Text::Reader line : context.getParams().getLines()) {
      text.append(line.cStr(), line.size());
      text.push_back('\n');
    }
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return kj::READY_NOW;
  }
};

}  // namespace

Status CoreWorker::Impl::Start() {
  std::promise<void> ready;
  thread_ = std::thread([this, &ready] {
    kj::AsyncIoContext io = kj::setupAsyncIo();
    LogTaskErrors errors;
    Loop loop(io, errors);
    loop_ = &loop;
    executor_ = kj::getCurrentThreadExecutor().addRef();
    auto stop = kj::newPromiseAndFulfiller<void>();
    stop_ = kj::mv(stop.fulfiller);
    ready.set_value();
    stop.promise.exclusiveJoin(inbox_.Serve()).wait(io.waitScope);
    loop_ = nullptr;
  });
  ready.get_future().wait();

  Status joined = CatchKj([&] {
    OnLoop([&]() -> kj::Promise<void> {
      if (!options_.worker.IsNil()) {
        JoinAsWorker();
        return ReadJobNamespace();
      }
      kj::Promise<void> joined = kj::READY_NOW;
      if (options_.job.IsNil()) {
        auto job = Head().registerJobRequest();
        job.setDriverPid(::getpid());
        job.setCodeSearchPath(options_.code_search_path);
        job.setNamespace(options_.ns);
        joined = job.send().then([this](auto reply) {
          std::string id = ToString(reply.getJobId());
          if (id.size() != JobId::kSize) throw Fail(Internal("the head gave a malformed job id"));
          job_id_ = JobId::FromRaw(reinterpret_cast<const uint8_t*>(id.data()));
          loop_->job_lease = reply.getLease();
        });
      } else {
        job_id_ = options_.job;
      }
      return joined.then([this] { return Head().clusterViewRequest().send(); })
          .then([this](auto view) {
            for (auto node : view.getNodes()) {
              auto info = node.getInfo();
              if (!node.getAlive() || options_.node_address != info.getAddress().cStr()) continue;
              if (options_.node_port != 0 && options_.node_port != info.getNodePort()) continue;
              std::string host = info.getAddress().cStr();
              node_address_ = host + ":" + std::to_string(info.getNodePort());
              transfer_address_ = host + ":" + std::to_string(info.getTransferPort());
              store_socket_ = info.getStoreSocket().cStr();
              MakeSubmitters();
              return;
            }
            throw Fail(NotFound("no alive node at " + options_.node_address +
                                " in the cluster of the head at " + options_.head_address));
          })
          .then([this]() -> kj::Promise<void> {
            // The job's workers' output, printed by its driver; the driver works without it.
            if (!options_.job.IsNil()) return kj::READY_NOW;
            auto subscribe = Connect(node_address_).castAs<proto::Node>().subscribeLogsRequest();
            subscribe.setJobId(AsData(job_id_.Binary()));
            subscribe.setSink(kj::heap<PrintLogs>());
            return subscribe.send().ignoreResult().catch_([this](kj::Exception&& e) {
              AIRT_LOG(WARNING) << "workers' output will not be shown: subscribing to the logs "
                                << "of node " << node_address_
                                << " failed: " << FromKjException(e).ToString();
            });
          });
    });
  });
  if (!joined.ok()) {
    return joined.WithContext(options_.worker.IsNil()
                                  ? "joining the cluster at " + options_.head_address
                                  : "starting worker " + options_.worker.Hex() + "'s core worker");
  }
  // A worker's puts get ids of a task of their own: several workers put into one job.
  driver_task_ = options_.job.IsNil() && options_.worker.IsNil()
                     ? TaskId::ForDriver(job_id_)
                     : TaskId::Of(ActorId::NilFor(job_id_));
  if (namespace_.empty()) namespace_ = options_.ns;  // a worker's: its job's, read at start
  if (namespace_.empty()) namespace_ = "anonymous-job-" + job_id_.Hex();
  // The index only: the data pages of the objects this process writes and reads are mapped as it
  // touches them (a put of 800 MB still runs at ~16 GB/s here), and a driver does not spend
  // seconds of CPU populating a large store's page tables while it works.
  AIRT_ASSIGN_OR_RETURN(
      store_, objectstore::StoreClient::Connect(
                  store_socket_, objectstore::StoreClient::Options{.prefault_data = false}));
  return Status::Ok();
}

void CoreWorker::Impl::Stop() {
  if (!thread_.joinable()) return;
  Status finished = CatchKj([&] {
    OnLoop([&]() -> kj::Promise<void> {
      if (job_id_.IsNil()) return kj::READY_NOW;  // never joined
      auto request = Head().finishJobRequest();
      request.setJobId(AsData(job_id_.Binary()));
      kj::Promise<void> returned = kj::READY_NOW;
      if (loop_->dispatcher) {
        returned =
            loop_->actors->StopOwned().then([this] { return loop_->dispatcher->ReturnAll(); });
      }
      bool finish = options_.job.IsNil();  // a worker's core worker leaves the job running
      return loop_->io.provider->getTimer().timeoutAfter(
          2 * kj::SECONDS, returned.then([request = kj::mv(request), finish]() mutable {
            return finish ? request.send().ignoreResult() : kj::Promise<void>(kj::READY_NOW);
          }));
    });
  });
  if (!finished.ok())
    AIRT_LOG(WARNING) << "finishing job " << job_id_.Hex() << ": " << finished.ToString();
  OnLoop([&] {
    stopping_ = true;
    EndServing();  // a worker's proto::Worker goes before the store its tasks use
  });
  {
    std::lock_guard<std::mutex> lock(prefetch_mu_);
    prefetches_.clear();
  }
  puller_.reset();  // its connections write into store_
  store_.reset();
  OnLoop([&] { stop_->fulfill(); });
  thread_.join();
}

void CoreWorker::Impl::MakeSubmitters() {
  // Served from the start, so that the returns of the first actor calls name their owner too.
  loop_->tasks.add(ServeOwner().catch_([](kj::Exception&& e) {
    AIRT_LOG(WARNING) << "cannot serve proto::Owner: " << FromKjException(e).ToString();
  }));
  loop_->dispatcher = kj::heap<TaskDispatcher>(
      loop_->io.provider->getTimer(), loop_->tasks, memory_,
      [this](const std::string& a) { return Connect(a); },
      [this](const std::string& a) { Forget(a); }, node_address_, job_id_,
      options_.code_search_path);
  // A worker that died may have died with its node: the owner asks the head (lineage).
  loop_->dispatcher->OnWorkerLost(
      [this](const std::string& node) { loop_->tasks.add(WatchNode(node).ignoreResult()); });
  // The copies the workers' nodes pulled of task arguments join their objects' locations.
  loop_->dispatcher->OnCopies([this](std::vector<ObjectLocation> copies) { AddCopies(copies); });
  // A lease on a draining node takes no new task: the dispatcher hears of drains from the head.
  if (!options_.head_address.empty()) {
    loop_->dispatcher->OnFirstLease([this] { loop_->tasks.add(WatchDrains(0, 0)); });
  }
  loop_->actors = kj::heap<ActorManager>(
      loop_->io.provider->getTimer(), loop_->tasks, memory_,
      [this](const std::string& a) { return Connect(a); },
      [this](const std::string& a) { Forget(a); },
      ActorManager::HeadLink{[this] { return Head(); }, [this] { ReconnectHead(); }},
      node_address_, job_id_, options_.code_search_path);
  loop_->actors->OnCopies([this](std::vector<ObjectLocation> copies) { AddCopies(copies); });
}

capnp::Capability::Client CoreWorker::Impl::Connect(const std::string& address) {
  if (auto it = loop_->peers.find(address); it != loop_->peers.end()) return it->second->cap;
  auto peer = kj::heap<Peer>();
  Peer* raw = peer.get();
  // A connection that ended, or never opened, leaves the cache at once: the process that owned
  // the address is gone, and a later one on the same port (the kernel reuses them) is a new
  // peer, never the old connection's broken capability.
  auto connected = [this, raw, address](kj::Own<kj::AsyncIoStream> stream) {
    raw->stream = kj::mv(stream);
    raw->rpc = kj::heap<capnp::TwoPartyClient>(*raw->stream);
    raw->gone = raw->rpc->onDisconnect()
                    .then([this, raw, address] { Forget(address, raw); })
                    .eagerlyEvaluate(nullptr);
    return raw->rpc->bootstrap();
  };
  auto failed = [this, raw, address](kj::Exception&& e) {
    Forget(address, raw);
    return capnp::Capability::Client(kj::mv(e));
  };
  raw->cap = capnp::Capability::Client(
      connector_->Connect(loop_->io, address).then(kj::mv(connected), kj::mv(failed)));
  loop_->peers.emplace(address, kj::mv(peer));
  return raw->cap;
}

void CoreWorker::Impl::Forget(const std::string& address, const Peer* only) {
  auto it = loop_->peers.find(address);
  if (it == loop_->peers.end() || (only != nullptr && it->second.get() != only)) return;
  loop_->retired.push_back(kj::mv(it->second));
  loop_->peers.erase(it);
}

std::vector<ObjectId> CoreWorker::Impl::Submit(const std::string& function,
                                               std::vector<TaskArgument> args,
                                               const TaskOptions& options) {
  auto task =
      NewTask(proto::TaskKind::NORMAL, ActorId(), function, std::move(args), options.num_returns);
  task->options = options;
  if (options.stream.streaming) OpenStream(*task, options.stream);
  std::vector<ObjectId> returns = task->returns;
  inbox_.Post([this, task = kj::mv(task)]() mutable {
    HoldArguments(*task);
    PendingTask* raw = task.get();
    live_tasks_[raw->id] = raw;
    loop_->tasks.add(
        Run(raw)
            .then([this, raw] { KeepLineage(*raw); })
            .attach(kj::mv(task), kj::defer([this, id = raw->id] { live_tasks_.erase(id); })));
  });
  return returns;
}

kj::Promise<void> CoreWorker::Impl::Run(PendingTask* task) {
  // Every object argument must exist before the task is pushed (its value or its location).
  return ResolveArguments(memory_, *task)
      .then([this, task](std::optional<ObjectError> failed) -> kj::Promise<void> {
        if (task->cancelled) return kj::READY_NOW;  // cancelled while its arguments resolved
        // An argument on a node known dead is rebuilt first (lineage), then resolved again.
        for (size_t i = 0; i < task->args.size(); ++i) {
          const ObjectEntry& dep = task->resolved[i];
          if (!task->args[i].ref || !dep.location || borrowed_.count(*task->args[i].ref) > 0 ||
              dead_nodes_.count(dep.location->node_address) == 0) {
            continue;
          }
          Recover(*task->args[i].ref, dep.location->node_address);
          std::optional<ObjectEntry> now = memory_.Peek(*task->args[i].ref);
          if (now && now->location && now->location->node_address == dep.location->node_address) {
            continue;  // not this process's to rebuild now: the worker's fetch says what it is
          }
          return Run(task);
        }
        if (failed) {
          loop_->dispatcher->Fail(*task, failed->kind, failed->message, failed->data);
          return kj::READY_NOW;
        }
        task->intercept_lost_arguments = task->kind == proto::TaskKind::NORMAL;
        // Its worker names this process as its returns' owner (so a node that leaves can say
        // where they went); a port that cannot be bound leaves them unnamed, not the task failed.
        return ServeOwner()
            .catch_([](kj::Exception&& e) {
              AIRT_LOG(WARNING) << "cannot serve proto::Owner; task returns name no owner: "
                                << FromKjException(e).ToString();
            })
            .then([this, task] {
              task->owner = owner_address_;
              return loop_->dispatcher->Dispatch(task);
            })
            .then([this, task] { return AfterDispatch(task); });
      });
}

kj::Own<PendingTask> CoreWorker::Impl::NewTask(proto::TaskKind kind, const ActorId& actor,
                                               std::string function, std::vector<TaskArgument> args,
                                               uint32_t num_returns) {
  auto task = kj::heap<PendingTask>();
  task->kind = kind;
  task->actor_id = actor;
  task->id = TaskId::Of(kind == proto::TaskKind::NORMAL ? ActorId::NilFor(job_id_) : actor);
  task->function = std::move(function);
  task->args = std::move(args);
  task->resolved.resize(task->args.size());
  for (uint32_t i = 0; i < std::max<uint32_t>(num_returns, 1); ++i) {
    task->returns.push_back(ObjectId::ForReturn(task->id, i + 1));
  }
  return task;
}

Result<ActorId> CoreWorker::Impl::CreateActor(const std::string& factory,
                                              std::vector<TaskArgument> args,
                                              ActorOptions options) {
  if (options.detached && options.name.empty()) {
    // As Ray: nothing but its name finds a detached actor once its creator is gone.
    return InvalidArgument("creating actor " + factory + ": a detached actor must have a name");
  }
  if (options.max_task_retries < -1) {
    return InvalidArgument("creating actor " + factory +
                           ": max_task_retries must be -1 or >= 0, got " +
                           std::to_string(options.max_task_retries));
  }
  if (options.ns.empty()) options.ns = namespace_;
  ActorId id = ActorId::Of(job_id_);
  auto creation = NewTask(proto::TaskKind::ACTOR_CREATION, id, factory, std::move(args), 1);
  creation->max_concurrency = std::max<uint32_t>(options.max_concurrency, 1);
  creation->options.name = options.name;
  Status created = CatchKj([&] {
    OnLoop([&] {
      HoldArguments(*creation);  // for the actor's life: a restart runs the factory again
      return loop_->actors->Create(kj::mv(creation), options);
    });
  });
  if (!created.ok()) return created.WithContext("creating actor " + factory);
  return id;
}

std::vector<ObjectId> CoreWorker::Impl::SubmitActorTask(const ActorId& actor,
                                                        const std::string& method,
                                                        std::vector<TaskArgument> args,
                                                        uint32_t num_returns,
                                                        StreamOptions stream) {
  auto call = NewTask(proto::TaskKind::ACTOR_METHOD, actor, method, std::move(args), num_returns);
  if (stream.streaming) OpenStream(*call, stream);
  std::vector<ObjectId> returns = call->returns;
  inbox_.Post([this, call = kj::mv(call)]() mutable {
    HoldArguments(*call);
    call->owner = owner_address_;  // served since MakeSubmitters (when its port could be bound)
    loop_->actors->Submit(kj::mv(call));
  });
  return returns;
}

Result<ActorId> CoreWorker::Impl::GetActor(const std::string& name, const std::string& ns) {
  ActorId id;
  Status found = CatchKj([&] {
    OnLoop([&] {
      return loop_->actors->Lookup(name, ns.empty() ? namespace_ : ns).then([&](ActorId got) {
        id = got;
      });
    });
  });
  if (!found.ok()) return found;
  return id;
}

Status CoreWorker::Impl::KillActor(const ActorId& actor, bool no_restart) {
  return CatchKj([&] { OnLoop([&] { return loop_->actors->Kill(actor, no_restart); }); });
}

Result<uint32_t> CoreWorker::Impl::ActorRestarts(const ActorId& actor) {
  uint32_t restarts = 0;
  bool found = false;
  Status asked = CatchKj([&] {
    OnLoop([&] {
      auto request = Head().getActorRequest();
      request.setActorId(AsData(actor.Binary()));
      return request.send().then([&](auto reply) {
        found = reply.getFound();
        restarts = reply.getInfo().getNumRestarts();
      });
    });
  });
  if (!asked.ok()) return asked;
  if (!found) return NotFound("no actor " + actor.Hex());
  return restarts;
}

Status CoreWorker::Impl::MarkActorDead(const ActorId& actor, const std::string& cause) {
  return CatchKj([&] {
    OnLoop([&] {
      auto request = Head().killActorRequest();
      request.setActorId(AsData(actor.Binary()));
      request.setCause(cause);
      return request.send().ignoreResult();
    });
  });
}

Status CoreWorker::Impl::CancelTask(const ObjectId& object, bool force, bool recursive) {
  if (object.IsPut()) {
    return InvalidArgument("object " + object.Hex() +
                           " is a put, not a task's return: nothing to cancel");
  }
  TaskId task = object.Task();
  if (task.Actor() != ActorId::NilFor(task.Job())) {
    if (force) {
      // As Ray: killing the process would take the actor (and its other calls) with it.
      return InvalidArgument("object " + object.Hex() + " is a return of an actor method call: " +
                             "force=True is not supported for actor tasks (cancel without " +
                             "force, or kill the actor)");
    }
    return CatchKj([&] { OnLoop([&] { loop_->actors->Cancel(task, recursive); }); });
  }
  return CatchKj([&] {
    OnLoop([&] {
      auto live = live_tasks_.find(task);
      if (live != live_tasks_.end()) Cancel(*live->second, force, recursive);
    });
  });
}

void CoreWorker::Impl::CancelAllTasks(bool force) {
  Status cancelled = CatchKj([&] { OnLoop([&] { CancelAll(force); }); });
  if (!cancelled.ok())
    AIRT_LOG(WARNING) << "cancelling this worker's tasks: " << cancelled.ToString();
}

void CoreWorker::Impl::CancelAll(bool force) {
  // Cancel may finish tasks, which leave live_tasks_: walk a copy.
  std::vector<PendingTask*> tasks;
  for (const auto& [id, task] : live_tasks_) tasks.push_back(task);
  for (PendingTask* task : tasks) Cancel(*task, force, /*recursive=*/true);
}

void CoreWorker::Impl::Cancel(PendingTask& task, bool force, bool recursive) {
  // A second cancel may escalate to force; the returns are failed once.
  bool first = MarkCancelled(memory_, task);
  if (!first && !force) return;
  if (loop_->dispatcher) loop_->dispatcher->Cancel(task, force, recursive);
}

void CoreWorker::Impl::NotifyBlocked(bool blocked) {
  if (options_.worker.IsNil()) return;  // a driver holds no lease
  // Not waiting for the answer: calls on one connection arrive in order, so "unblocked" follows
  // "blocked".
  OnLoop([this, blocked] {
    auto request = Connect(node_address_).castAs<proto::Node>().notifyWorkerBlockedRequest();
    request.setWorkerId(AsData(options_.worker.Binary()));
    request.setBlocked(blocked);
    loop_->tasks.add(request.send().ignoreResult());
  });
}

Result<std::unique_ptr<CoreWorker>> CoreWorker::Connect(CoreWorkerOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  AIRT_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<CoreWorker>(new CoreWorker(std::move(impl)));
}

CoreWorker::CoreWorker(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CoreWorker::~CoreWorker() = default;

std::vector<ObjectId> CoreWorker::SubmitTask(const std::string& function,
                                             std::vector<TaskArgument> args,
                                             const TaskOptions& options) {
  return impl_->Submit(function, std::move(args), options);
}
Result<ObjectId> CoreWorker::Put(std::string bytes) { return impl_->Put(std::move(bytes)); }
Result<ObjectId> CoreWorker::Put(uint64_t size, const std::function<void(uint8_t*)>& write) {
  return impl_->Put(size, write);
}
Status CoreWorker::GetEach(std::span<const ObjectId> ids, int64_t timeout_ms,
                           const std::function<void(size_t, GotObject&)>& use) {
  return impl_->GetEach(ids, timeout_ms, use);
}
std::vector<bool> CoreWorker::Ready(std::span<const ObjectId> ids) const {
  return impl_->Ready(ids);
}
std::vector<std::string> CoreWorker::NodeAddressesOf(std::span<const ObjectId> ids) const {
  return impl_->NodeAddressesOf(ids);
}
std::vector<bool> CoreWorker::Wait(std::span<const ObjectId> ids, size_t num_ready,
                                   int64_t timeout_ms) {
  return impl_->Wait(ids, num_ready, timeout_ms);
}
const JobId& CoreWorker::job_id() const { return impl_->job_id(); }
void CoreWorker::AddLocalReference(const ObjectId& id) { impl_->AddLocalReference(id); }
void CoreWorker::RemoveLocalReference(const ObjectId& id) { impl_->RemoveLocalReference(id); }
Result<std::vector<CoreWorker::NodeView>> CoreWorker::ClusterView() { return impl_->ClusterView(); }
const std::string& CoreWorker::node_address() const { return impl_->node_address(); }
const WorkerId& CoreWorker::worker_id() const { return impl_->options().worker; }
const std::string& CoreWorker::head_address() const { return impl_->options().head_address; }
Result<bool> CoreWorker::KvPut(const std::string& ns, const std::string& key,
                               const std::string& value, bool overwrite) {
  return impl_->KvPut(ns, key, value, overwrite);
}
Result<std::optional<std::string>> CoreWorker::KvGet(const std::string& ns,
                                                     const std::string& key) {
  return impl_->KvGet(ns, key);
}
Result<bool> CoreWorker::KvDelete(const std::string& ns, const std::string& key) {
  return impl_->KvDelete(ns, key);
}
Result<uint32_t> CoreWorker::KvDeletePrefix(const std::string& ns, const std::string& prefix) {
  return impl_->KvDeletePrefix(ns, prefix);
}
void CoreWorker::RecordCollectiveProgress(const std::string& group,
                                          std::optional<uint64_t> entered) {
  impl_->RecordCollectiveProgress(group, entered);
}
Result<std::string> CoreWorker::CollectiveProgressAddress() {
  return impl_->CollectiveProgressAddress();
}
Result<std::optional<CollectiveProgress>> CoreWorker::QueryCollectiveProgress(
    const std::string& address, const std::string& group, int64_t timeout_ms) {
  return impl_->QueryCollectiveProgress(address, group, timeout_ms);
}
Result<ActorId> CoreWorker::CreateActor(const std::string& factory, std::vector<TaskArgument> args,
                                        const ActorOptions& options) {
  return impl_->CreateActor(factory, std::move(args), options);
}
std::vector<ObjectId> CoreWorker::SubmitActorTask(const ActorId& actor, const std::string& method,
                                                  std::vector<TaskArgument> args,
                                                  uint32_t num_returns, StreamOptions stream) {
  return impl_->SubmitActorTask(actor, method, std::move(args), num_returns, stream);
}
Result<ActorId> CoreWorker::GetActor(const std::string& name, const std::string& ns) {
  return impl_->GetActor(name, ns);
}
Status CoreWorker::KillActor(const ActorId& actor, bool no_restart) {
  return impl_->KillActor(actor, no_restart);
}
Result<uint32_t> CoreWorker::ActorRestarts(const ActorId& actor) {
  return impl_->ActorRestarts(actor);
}
Status CoreWorker::MarkActorDead(const ActorId& actor, const std::string& cause) {
  return impl_->MarkActorDead(actor, cause);
}
const std::string& CoreWorker::ns() const { return impl_->ns(); }
Status CoreWorker::CancelTask(const ObjectId& object, bool force, bool recursive) {
  return impl_->CancelTask(object, force, recursive);
}
void CoreWorker::CancelAllTasks(bool force) { impl_->CancelAllTasks(force); }
Result<uint16_t> CoreWorker::ServeWorker(WorkerServing serving) {
  return impl_->ServeWorker(std::move(serving));
}
void CoreWorker::WaitServingEnded() { impl_->WaitServingEnded(); }
objectstore::StoreClient& CoreWorker::store() { return impl_->store(); }
objectstore::ObjectPuller& CoreWorker::puller() { return impl_->Puller(); }

}  // namespace airt::core_worker
