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
#include "api/core_worker/reference_counter.h"
#include "api/core_worker/task_dispatcher.h"
#include "common/inbox.h"
#include "common/logging.h"
#include "common/proto/cluster.capnp.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"
#include "objectstore/object_store.h"
#include "objectstore/transfer.h"

namespace airt::core {
namespace {

kj::Exception Fail(const Status& s) { return ToKjException(s); }

// A connection to one peer, reused for every call to it. `cap` queues calls until connected.
struct Peer {
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<capnp::TwoPartyClient> rpc;
  capnp::Capability::Client cap = nullptr;
};

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

class CoreWorker::Impl {
 public:
  explicit Impl(CoreWorkerOptions options) : options_(std::move(options)) {}
  ~Impl() { Stop(); }

  Status Start();
  void Stop();
  std::vector<ObjectId> Submit(const std::string& function, std::vector<TaskArgument> args,
                               const TaskOptions& options);
  Result<ObjectId> Put(std::string bytes);
  Result<ObjectId> Put(uint64_t size, const std::function<void(uint8_t*)>& write);
  Result<std::vector<GotObject>> Get(std::span<const ObjectId> ids, int64_t timeout_ms);
  std::vector<bool> Ready(std::span<const ObjectId> ids) const { return memory_.Ready(ids); }
  std::vector<bool> Wait(std::span<const ObjectId> ids, size_t n, int64_t timeout_ms) {
    std::vector<bool> ready = memory_.Ready(ids);
    if (static_cast<size_t>(std::count(ready.begin(), ready.end(), true)) >= n) return ready;
    Blocked blocked(*this);
    return memory_.WaitFor(ids, n, timeout_ms);
  }
  const JobId& job_id() const { return job_id_; }
  Result<ActorId> CreateActor(const std::string& factory, std::vector<TaskArgument> args,
                              ActorOptions options);
  std::vector<ObjectId> SubmitActorTask(const ActorId& actor, const std::string& method,
                                        std::vector<TaskArgument> args, uint32_t num_returns);
  Result<ActorId> GetActor(const std::string& name, const std::string& ns);
  Status KillActor(const ActorId& actor, bool no_restart);
  void AddLocalReference(const ObjectId& id) {
    inbox_.Post([this, id] { refs_.AddLocal(id); });
  }
  void RemoveLocalReference(const ObjectId& id) {
    inbox_.Post([this, id] { refs_.RemoveLocal(id); });
  }
  size_t NumReferencedObjects();
  Result<bool> KvPut(const std::string& ns, const std::string& key, const std::string& value,
                     bool overwrite);
  Result<std::optional<std::string>> KvGet(const std::string& ns, const std::string& key);
  Result<std::vector<CoreWorker::NodeView>> ClusterView();
  const std::string& node_address() const { return node_address_; }

 private:
  // State confined to the loop thread.
  struct Loop {
    Loop(kj::AsyncIoContext& io, kj::TaskSet::ErrorHandler& errors) : io(io), tasks(errors) {}
    kj::AsyncIoContext& io;
    kj::TaskSet tasks;
    std::map<std::string, kj::Own<Peer>> peers;
    std::vector<kj::Own<Peer>> retired;  // kept until the loop ends: callbacks may point at them
    proto::Head::Client head = nullptr;
    // Held while the driver runs: the head finishes the job when it is dropped.
    proto::JobLease::Client job_lease = nullptr;
    kj::Own<TaskDispatcher> dispatcher;  // once joined
    kj::Own<ActorManager> actors;        // once joined
  };

  // Runs `fn` on the loop thread (after everything posted before) and waits for it.
  template <typename Fn>
  auto OnLoop(Fn&& fn) {
    return executor_->executeSync([this, &fn] {
      inbox_.RunPending();
      return fn();
    });
  }

  // In a worker, tells its node while the calling thread waits for objects, so that the node
  // lends the lease's CPUs to the tasks being waited for. Nothing in a driver.
  class Blocked {
   public:
    explicit Blocked(Impl& impl) : impl_(impl) { impl_.NotifyBlocked(true); }
    ~Blocked() { impl_.NotifyBlocked(false); }
    Blocked(const Blocked&) = delete;
    Blocked& operator=(const Blocked&) = delete;

   private:
    Impl& impl_;
  };
  void NotifyBlocked(bool blocked);

  // Loop thread.
  capnp::Capability::Client Connect(const std::string& address);
  void Forget(const std::string& address);
  kj::Promise<void> Run(PendingTask* task);
  // Counts the task's reference arguments as held until the task is destroyed.
  void HoldArguments(PendingTask& task);
  // The last reference to `id` went: drops it from the memory store and from the stores of the
  // nodes that hold it (when it arrives, if it is not there yet).
  void Free(const ObjectId& id);
  void FlushRemoteFrees();
  // A new task of `kind` with `num_returns` return ids (at least one).
  kj::Own<PendingTask> NewTask(proto::TaskKind kind, const ActorId& actor, std::string function,
                               std::vector<TaskArgument> args, uint32_t num_returns);

  CoreWorkerOptions options_;
  MemoryStore memory_;
  std::thread thread_;
  kj::Own<const kj::Executor> executor_;
  airt::Inbox inbox_;  // submissions, run on the loop without their caller waiting
  kj::Own<kj::PromiseFulfiller<void>> stop_;  // loop thread
  Loop* loop_ = nullptr;                      // loop thread
  JobId job_id_;
  std::string namespace_;
  TaskId driver_task_;
  std::string node_address_, transfer_address_, store_socket_;
  std::unique_ptr<objectstore::StoreClient> store_;
  std::atomic<uint32_t> put_index_{0};
  // Loop thread.
  ReferenceCounter refs_{[this](const ObjectId& id) { Free(id); }};
  std::map<std::string, std::vector<ObjectId>> remote_frees_;  // by node, sent once per loop turn
  bool stopping_ = false;  // no frees once the connections are closing
};

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
      loop_->head = Connect(options_.head_address).castAs<proto::Head>();
      kj::Promise<void> joined = kj::READY_NOW;
      if (options_.job.IsNil()) {
        auto job = loop_->head.registerJobRequest();
        job.setDriverPid(::getpid());
        job.setCodeSearchPath(options_.code_search_path);
        joined = job.send().then([this](auto reply) {
          std::string id = ToString(reply.getJobId());
          if (id.size() != JobId::kSize) throw Fail(Internal("the head gave a malformed job id"));
          job_id_ = JobId::FromRaw(reinterpret_cast<const uint8_t*>(id.data()));
          loop_->job_lease = reply.getLease();
        });
      } else {
        job_id_ = options_.job;
      }
      return joined.then([this] { return loop_->head.clusterViewRequest().send(); })
          .then([this](auto view) {
            for (auto node : view.getNodes()) {
              auto info = node.getInfo();
              if (!node.getAlive() || options_.node_address != info.getAddress().cStr()) continue;
              if (options_.node_port != 0 && options_.node_port != info.getNodePort()) continue;
              std::string host = info.getAddress().cStr();
              node_address_ = host + ":" + std::to_string(info.getNodePort());
              transfer_address_ = host + ":" + std::to_string(info.getTransferPort());
              store_socket_ = info.getStoreSocket().cStr();
              loop_->dispatcher = kj::heap<TaskDispatcher>(
                  loop_->io.provider->getTimer(), loop_->tasks, memory_,
                  [this](const std::string& a) { return Connect(a); },
                  [this](const std::string& a) { Forget(a); }, node_address_, job_id_,
                  options_.code_search_path);
              loop_->actors = kj::heap<ActorManager>(
                  loop_->io.provider->getTimer(), loop_->tasks, memory_,
                  [this](const std::string& a) { return Connect(a); },
                  [this](const std::string& a) { Forget(a); }, loop_->head, node_address_, job_id_,
                  options_.code_search_path);
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
  if (!joined.ok()) return joined.WithContext("joining the cluster at " + options_.head_address);
  // A worker's puts get ids of a task of their own: several workers put into one job.
  driver_task_ =
      options_.job.IsNil() ? TaskId::ForDriver(job_id_) : TaskId::Of(ActorId::NilFor(job_id_));
  namespace_ = options_.ns.empty() ? "anonymous-job-" + job_id_.Hex() : options_.ns;
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
      auto request = loop_->head.finishJobRequest();
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
  OnLoop([&] { stopping_ = true; });
  store_.reset();
  OnLoop([&] { stop_->fulfill(); });
  thread_.join();
}

capnp::Capability::Client CoreWorker::Impl::Connect(const std::string& address) {
  if (auto it = loop_->peers.find(address); it != loop_->peers.end()) return it->second->cap;
  auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return capnp::Capability::Client(Fail(InvalidArgument("'" + address + "' is not host:port")));
  }
  auto peer = kj::heap<Peer>();
  Peer* raw = peer.get();
  raw->cap = capnp::Capability::Client(
      loop_->io.provider->getNetwork()
          .parseAddress(kj::StringPtr(address.substr(0, colon).c_str()),
                        static_cast<uint>(std::stoul(address.substr(colon + 1))))
          .then([](kj::Own<kj::NetworkAddress> a) { return a->connect(); })
          .then([raw](kj::Own<kj::AsyncIoStream> stream) {
            raw->stream = kj::mv(stream);
            raw->rpc = kj::heap<capnp::TwoPartyClient>(*raw->stream);
            return raw->rpc->bootstrap();
          }));
  loop_->peers.emplace(address, kj::mv(peer));
  return raw->cap;
}

void CoreWorker::Impl::Forget(const std::string& address) {
  if (auto it = loop_->peers.find(address); it != loop_->peers.end()) {
    loop_->retired.push_back(kj::mv(it->second));
    loop_->peers.erase(it);
  }
}

std::vector<ObjectId> CoreWorker::Impl::Submit(const std::string& function,
                                               std::vector<TaskArgument> args,
                                               const TaskOptions& options) {
  auto task =
      NewTask(proto::TaskKind::NORMAL, ActorId(), function, std::move(args), options.num_returns);
  task->options = options;
  std::vector<ObjectId> returns = task->returns;
  inbox_.Post([this, task = kj::mv(task)]() mutable {
    HoldArguments(*task);
    PendingTask* raw = task.get();
    loop_->tasks.add(Run(raw).attach(kj::mv(task)));
  });
  return returns;
}

kj::Promise<void> CoreWorker::Impl::Run(PendingTask* task) {
  // Every object argument must exist before the task is pushed (its value or its location).
  return ResolveArguments(memory_, *task)
      .then([this, task](std::optional<ObjectError> failed) -> kj::Promise<void> {
        if (failed) {
          loop_->dispatcher->Fail(*task, failed->kind, failed->message);
          return kj::READY_NOW;
        }
        return loop_->dispatcher->Dispatch(task);
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
                                                        uint32_t num_returns) {
  auto call = NewTask(proto::TaskKind::ACTOR_METHOD, actor, method, std::move(args), num_returns);
  std::vector<ObjectId> returns = call->returns;
  inbox_.Post([this, call = kj::mv(call)]() mutable {
    HoldArguments(*call);
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

Result<ObjectId> CoreWorker::Impl::Put(std::string bytes) {
  ObjectId id = ObjectId::ForPut(driver_task_, ++put_index_);
  ObjectEntry entry;
  if (bytes.size() <= options_.inline_threshold) {
    entry.value = std::make_shared<const std::string>(std::move(bytes));
  } else {
    AIRT_RETURN_IF_ERROR(store_->Put(
        id,
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())));
    entry.location = ObjectLocation{id, transfer_address_, bytes.size(), node_address_};
  }
  memory_.PutNew(id, std::move(entry));
  return id;
}

Result<bool> CoreWorker::Impl::KvPut(const std::string& ns, const std::string& key,
                                     const std::string& value, bool overwrite) {
  bool added = false;
  Status put = CatchKj([&] {
    OnLoop([&] {
      auto request = loop_->head.kvPutRequest();
      request.setNamespace(ns);
      request.setKey(key);
      request.setValue(AsData(value));
      request.setOverwrite(overwrite);
      return request.send().then([&](auto reply) { added = reply.getAdded(); });
    });
  });
  if (!put.ok()) return put;
  return added;
}

Result<std::optional<std::string>> CoreWorker::Impl::KvGet(const std::string& ns,
                                                           const std::string& key) {
  std::optional<std::string> value;
  Status got = CatchKj([&] {
    OnLoop([&] {
      auto request = loop_->head.kvGetRequest();
      request.setNamespace(ns);
      request.setKey(key);
      return request.send().then([&](auto reply) {
        if (reply.getFound()) value = ToString(reply.getValue());
      });
    });
  });
  if (!got.ok()) return got;
  return value;
}

Result<std::vector<CoreWorker::NodeView>> CoreWorker::Impl::ClusterView() {
  std::vector<CoreWorker::NodeView> nodes;
  Status got = CatchKj([&] {
    OnLoop([&] {
      return loop_->head.clusterViewRequest().send().then([&](auto view) {
        for (auto n : view.getNodes()) {
          auto info = n.getInfo();
          CoreWorker::NodeView node;
          std::string id = ToString(info.getNodeId());
          if (id.size() == NodeId::kSize) {
            node.id = NodeId::FromRaw(reinterpret_cast<const uint8_t*>(id.data()));
          }
          node.address =
              std::string(info.getAddress().cStr()) + ":" + std::to_string(info.getNodePort());
          node.alive = n.getAlive();
          for (auto r : info.getTotal()) node.total[r.getName().cStr()] = r.getAmount();
          for (auto r : n.getAvailable()) node.available[r.getName().cStr()] = r.getAmount();
          nodes.push_back(std::move(node));
        }
      });
    });
  });
  if (!got.ok()) return got;
  return nodes;
}

size_t CoreWorker::Impl::NumReferencedObjects() {
  return OnLoop([this] { return refs_.size(); });
}

void CoreWorker::Impl::HoldArguments(PendingTask& task) {
  std::vector<ObjectId> held;
  for (const TaskArgument& arg : task.args) {
    if (arg.ref) held.push_back(*arg.ref);
    held.insert(held.end(), arg.ref_list.begin(), arg.ref_list.end());
  }
  for (const ObjectId& id : held) refs_.AddSubmitted(id);
  if (held.empty()) return;
  task.holds = std::shared_ptr<void>(nullptr, [this, held = std::move(held)](void*) {
    for (const ObjectId& id : held) refs_.RemoveSubmitted(id);
  });
}

void CoreWorker::Impl::Free(const ObjectId& id) {
  if (stopping_) return;  // the job's end frees what is left (the nodes delete its objects)
  std::optional<ObjectEntry> entry = memory_.Erase(id);
  if (!entry) {
    // Its task has not answered yet: free it when it does.
    loop_->tasks.add(memory_.WhenReady(id).then([this, id](ObjectEntry) { Free(id); }));
    return;
  }
  if (!entry->location) return;
  // This node's copy: the primary of a put, or a copy a Get pulled here.
  if (store_->Contains(id)) {
    Status deleted = store_->Delete(id);
    if (!deleted.ok() && deleted.code() != Code::kNotFound) {
      AIRT_LOG(WARNING) << "freeing object " << id.Hex() << ": " << deleted.ToString();
    }
  }
  const std::string& node = entry->location->node_address;
  if (node.empty() || node == node_address_) return;
  if (remote_frees_.empty()) {
    loop_->tasks.add(kj::evalLater([this] { FlushRemoteFrees(); }));
  }
  remote_frees_[node].push_back(id);
}

void CoreWorker::Impl::FlushRemoteFrees() {
  for (auto& [node, ids] : remote_frees_) {
    auto request = Connect(node).castAs<proto::Node>().freeObjectsRequest();
    auto list = request.initObjectIds(static_cast<uint>(ids.size()));
    for (size_t i = 0; i < ids.size(); ++i) {
      list.set(static_cast<uint>(i), AsData(ids[i].Binary()));
    }
    loop_->tasks.add(request.send().ignoreResult());
  }
  remote_frees_.clear();
}

void CoreWorker::Impl::NotifyBlocked(bool blocked) {
  if (options_.job.IsNil()) return;  // a driver holds no lease
  // Not waiting for the answer: calls on one connection arrive in order, so "unblocked" follows
  // "blocked".
  OnLoop([this, blocked] {
    auto request = Connect(node_address_).castAs<proto::Node>().notifyWorkerBlockedRequest();
    request.setWorkerId(AsData(options_.worker.Binary()));
    request.setBlocked(blocked);
    loop_->tasks.add(request.send().ignoreResult());
  });
}

Result<ObjectId> CoreWorker::Impl::Put(uint64_t size, const std::function<void(uint8_t*)>& write) {
  if (size <= options_.inline_threshold) {
    std::string bytes(size, '\0');
    write(reinterpret_cast<uint8_t*>(bytes.data()));
    return Put(std::move(bytes));
  }
  ObjectId id = ObjectId::ForPut(driver_task_, ++put_index_);
  AIRT_ASSIGN_OR_RETURN(objectstore::MutableObject object, store_->Create(id, size));
  try {
    write(object.data.data());
  } catch (...) {
    (void)store_->Abort(id);
    throw;
  }
  AIRT_RETURN_IF_ERROR(store_->Seal(id));
  memory_.PutNew(id,
                 ObjectEntry{nullptr, ObjectLocation{id, transfer_address_, size, node_address_},
                             std::nullopt});
  return id;
}

Result<std::vector<GotObject>> CoreWorker::Impl::Get(std::span<const ObjectId> ids,
                                                     int64_t timeout_ms) {
  std::vector<bool> ready = memory_.Ready(ids);
  std::optional<Blocked> blocked;
  if (std::find(ready.begin(), ready.end(), false) != ready.end()) blocked.emplace(*this);
  AIRT_ASSIGN_OR_RETURN(std::vector<ObjectEntry> entries, memory_.Wait(ids, timeout_ms));
  blocked.reset();
  std::vector<GotObject> out(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    out[i].error = entries[i].error;
    out[i].value = entries[i].value;
    if (!entries[i].location) continue;
    const ObjectLocation& where = *entries[i].location;
    if (!store_->Contains(where.id)) {
      AIRT_RETURN_IF_ERROR(objectstore::ObjectPuller(store_.get())
                               .Pull(where.transfer_address, where.id, timeout_ms));
    }
    AIRT_ASSIGN_OR_RETURN(objectstore::ObjectPin pin, store_->Get(where.id, timeout_ms));
    out[i].value = std::make_shared<const std::string>(
        reinterpret_cast<const char*>(pin.data().data()), pin.data().size());
  }
  return out;
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
Result<std::vector<GotObject>> CoreWorker::Get(std::span<const ObjectId> ids, int64_t timeout_ms) {
  return impl_->Get(ids, timeout_ms);
}
std::vector<bool> CoreWorker::Ready(std::span<const ObjectId> ids) const {
  return impl_->Ready(ids);
}
std::vector<bool> CoreWorker::Wait(std::span<const ObjectId> ids, size_t num_ready,
                                   int64_t timeout_ms) {
  return impl_->Wait(ids, num_ready, timeout_ms);
}
const JobId& CoreWorker::job_id() const { return impl_->job_id(); }
void CoreWorker::AddLocalReference(const ObjectId& id) { impl_->AddLocalReference(id); }
void CoreWorker::RemoveLocalReference(const ObjectId& id) { impl_->RemoveLocalReference(id); }
size_t CoreWorker::NumReferencedObjects() { return impl_->NumReferencedObjects(); }
Result<std::vector<CoreWorker::NodeView>> CoreWorker::ClusterView() { return impl_->ClusterView(); }
const std::string& CoreWorker::node_address() const { return impl_->node_address(); }
Result<bool> CoreWorker::KvPut(const std::string& ns, const std::string& key,
                               const std::string& value, bool overwrite) {
  return impl_->KvPut(ns, key, value, overwrite);
}
Result<std::optional<std::string>> CoreWorker::KvGet(const std::string& ns,
                                                     const std::string& key) {
  return impl_->KvGet(ns, key);
}
Result<ActorId> CoreWorker::CreateActor(const std::string& factory, std::vector<TaskArgument> args,
                                        const ActorOptions& options) {
  return impl_->CreateActor(factory, std::move(args), options);
}
std::vector<ObjectId> CoreWorker::SubmitActorTask(const ActorId& actor, const std::string& method,
                                                  std::vector<TaskArgument> args,
                                                  uint32_t num_returns) {
  return impl_->SubmitActorTask(actor, method, std::move(args), num_returns);
}
Result<ActorId> CoreWorker::GetActor(const std::string& name, const std::string& ns) {
  return impl_->GetActor(name, ns);
}
Status CoreWorker::KillActor(const ActorId& actor, bool no_restart) {
  return impl_->KillActor(actor, no_restart);
}

}  // namespace airt::core
