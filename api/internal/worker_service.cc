#include "api/internal/worker_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <string_view>
#include <thread>
#include <utility>

#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::internal {
namespace {

// How long pushTask waits on the loop for a task with nothing ahead of it to finish, before it
// leaves the answer to the executor's post.
constexpr std::chrono::microseconds kAnswerWait{100};

std::string_view AsStringView(capnp::Data::Reader data) {
  return std::string_view(reinterpret_cast<const char*>(data.begin()), data.size());
}

capnp::Data::Reader AsData(std::string_view bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

}  // namespace

namespace {

// An inline or object argument (a list's elements are read by the caller).
Result<TaskArgument> ParseTaskArg(proto::TaskArg::Reader in, const std::string& field) {
  TaskArgument arg;
  switch (in.which()) {
    case proto::TaskArg::INLINE:
      arg.inline_bytes = std::string(AsStringView(in.getInline()));
      break;
    case proto::TaskArg::OBJECT: {
      auto object = in.getObject();
      Result<ObjectId::BaseId> id = ObjectId::FromBinary(AsStringView(object.getObjectId()));
      if (!id.ok()) return id.status().WithContext(field + ".objectId");
      arg.is_object = true;
      arg.object_id = *id;
      arg.transfer_address = object.getTransferAddress().cStr();
      break;
    }
    case proto::TaskArg::LIST: break;
    default: return InvalidArgument(field + " is neither inline, object nor list");
  }
  return arg;
}

}  // namespace

Result<TaskToRun> ParseTaskSpec(proto::TaskSpec::Reader spec, const JobId& job) {
  TaskToRun task;
  Result<TaskId::BaseId> task_id = TaskId::FromBinary(AsStringView(spec.getTaskId()));
  if (!task_id.ok()) return task_id.status().WithContext("taskId");
  task.task_id = *task_id;
  Result<JobId> task_job = JobId::FromBinary(AsStringView(spec.getJobId()));
  if (!task_job.ok()) return task_job.status().WithContext("jobId");
  auto function = spec.getFunctionName();
  if (function.size() == 0 || function.size() > kMaxFunctionNameBytes) {
    return InvalidArgument("functionName must be 1.." + std::to_string(kMaxFunctionNameBytes) +
                           " bytes, got " + std::to_string(function.size()));
  }
  task.function_name = std::string(function.cStr(), function.size());
  task.name = spec.getName().cStr();
  if (!job.IsNil() && *task_job != job) {
    return FailedPrecondition("task " + task.task_id.Hex() + " (" + task.function_name +
                              ") is of job " + task_job->Hex() + ", this worker runs job " +
                              job.Hex());
  }
  auto args = spec.getArgs();
  if (args.size() > kMaxTaskArgs) {
    return InvalidArgument("a task takes at most " + std::to_string(kMaxTaskArgs) +
                           " arguments, got " + std::to_string(args.size()));
  }
  if (spec.getNumReturns() > kMaxTaskReturns) {
    return InvalidArgument("numReturns must be at most " + std::to_string(kMaxTaskReturns) +
                           ", got " + std::to_string(spec.getNumReturns()));
  }
  task.num_returns = spec.getNumReturns();
  switch (spec.getKind()) {
    case proto::TaskKind::NORMAL: task.kind = TaskKind::kNormal; break;
    case proto::TaskKind::ACTOR_CREATION: task.kind = TaskKind::kActorCreation; break;
    case proto::TaskKind::ACTOR_METHOD: task.kind = TaskKind::kActorMethod; break;
    default: return InvalidArgument("kind is not a TaskKind");
  }
  if (task.kind != TaskKind::kNormal) {
    Result<ActorId::BaseId> actor = ActorId::FromBinary(AsStringView(spec.getActorId()));
    if (!actor.ok()) return actor.status().WithContext("actorId");
    task.actor_id = *actor;
  }
  if (spec.getMaxConcurrency() > kMaxActorConcurrency) {
    return InvalidArgument("maxConcurrency must be at most " +
                           std::to_string(kMaxActorConcurrency) + ", got " +
                           std::to_string(spec.getMaxConcurrency()));
  }
  task.max_concurrency = std::max<uint32_t>(spec.getMaxConcurrency(), 1);
  auto resources = spec.getResources();
  if (resources.size() > kMaxTaskResources) {
    return InvalidArgument("resources names " + std::to_string(resources.size()) +
                           " resources, at most " + std::to_string(kMaxTaskResources));
  }
  for (auto r : resources) {
    double amount = r.getAmount();
    if (r.getName().size() == 0 || !std::isfinite(amount) || amount < 0) {
      return InvalidArgument("resources: '" + std::string(r.getName().cStr()) + "' = " +
                             std::to_string(amount) + " (a name and a finite amount >= 0)");
    }
    task.resources[r.getName().cStr()] = amount;
  }
  task.actor_restarts = spec.getActorRestarts();
  std::string_view owner(spec.getOwnerAddress().cStr(), spec.getOwnerAddress().size());
  if (owner.size() > objectstore::kMaxOwnerBytes || owner.find('\0') != std::string_view::npos) {
    return InvalidArgument("ownerAddress: must be at most " +
                           std::to_string(objectstore::kMaxOwnerBytes) + " bytes without NUL");
  }
  task.owner = std::string(owner);
  task.args.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    std::string field = "args[" + std::to_string(i) + "]";
    AIRT_ASSIGN_OR_RETURN(TaskArgument arg, ParseTaskArg(args[i], field));
    if (args[i].isList()) {
      auto list = args[i].getList();
      if (list.size() > kMaxTaskArgs) {
        return InvalidArgument(field + " lists " + std::to_string(list.size()) +
                               " objects, at most " + std::to_string(kMaxTaskArgs));
      }
      arg.is_list = true;
      for (uint j = 0; j < list.size(); ++j) {
        std::string element = field + ".list[" + std::to_string(j) + "]";
        if (list[j].isList()) return InvalidArgument(element + " is a list inside a list");
        AIRT_ASSIGN_OR_RETURN(TaskArgument value, ParseTaskArg(list[j], element));
        arg.elements.push_back(std::move(value));
      }
    }
    task.args.push_back(std::move(arg));
  }
  return task;
}

void FillTaskResults(const TaskOutcome& outcome, const std::string& function_name,
                     const ReturnsAt& returns_at, proto::Worker::PushTaskResults::Builder results) {
  // The copies this node holds now of arguments that lay elsewhere: their owners learn of them.
  std::vector<const std::pair<ObjectId, std::string>*> copies;
  for (const auto& fetched : outcome.fetched) {
    if (fetched.second != returns_at.transfer_address) copies.push_back(&fetched);
  }
  if (!copies.empty()) {
    auto list = results.initCopies(static_cast<unsigned>(copies.size()));
    for (size_t i = 0; i < copies.size(); ++i) {
      list[i].setObjectId(capnp::Data::Reader(copies[i]->first.data(), ObjectId::kSize));
      list[i].setTransferAddress(returns_at.transfer_address);
      list[i].setNodeAddress(returns_at.node_address);
    }
  }
  if (outcome.failure || !outcome.status.ok()) {
    // An executor's status (none today) fails the task with the status's kind.
    TaskFailure failure = outcome.failure ? *outcome.failure
                                          : TaskFailure{ErrorKindOf(outcome.status),
                                                        outcome.status.ToString(), ""};
    results.setFailed(true);
    auto error = results.initError();
    error.setFunctionName(function_name);
    error.setMessage(failure.message);
    error.setKind(failure.kind);
    error.setData(AsData(failure.data));
    results.initReturns(0);
    return;
  }
  results.setFailed(false);
  auto returns = results.initReturns(static_cast<unsigned>(outcome.returns.size()));
  for (size_t i = 0; i < outcome.returns.size(); ++i) {
    const TaskReturnValue& value = outcome.returns[i];
    if (!value.in_store) {
      returns[i].setInline(AsData(value.inline_bytes));
      continue;
    }
    auto object = returns[i].initObject();
    object.setObjectId(capnp::Data::Reader(value.object_id.data(), ObjectId::kSize));
    object.setTransferAddress(returns_at.transfer_address);
    object.setNodeAddress(returns_at.node_address);
    object.setSize(value.size);
  }
}

WorkerService::WorkerService(TaskExecutor& executor, JobId job, ReturnsAt returns_at,
                             kj::Own<kj::PromiseFulfiller<void>> on_exit,
                             CancelChildren cancel_children)
    : executor_(executor),
      tasks_(*this),
      job_(job),
      returns_at_(std::move(returns_at)),
      on_exit_(kj::mv(on_exit)),
      cancel_children_(std::move(cancel_children)),
      generators_(returns_at_.transfer_address, returns_at_.node_address) {
  tasks_.add(finished_->Serve());
}

WorkerService::~WorkerService() { finished_->Close(); }

void WorkerService::taskFailed(kj::Exception&& exception) {
  AIRT_LOG(ERROR) << "worker service: " << FromKjException(exception).ToString();
}

kj::Promise<void> WorkerService::pushTask(PushTaskContext context) {
  if (exiting_) throw ToKjException(Unavailable("the worker is exiting"));
  Result<TaskToRun> task = ParseTaskSpec(context.getParams().getTask(), job_);
  if (!task.ok()) throw ToKjException(task.status().WithContext("pushTask"));
  std::string function_name = task->function_name;
  std::optional<TaskId> streaming;  // a generator's task: its sink, until it is answered
  if (context.getParams().getTask().hasGeneratorSink()) {
    streaming = task->task_id;
    task->generator = generators_.Open(
        task->task_id, context.getParams().getTask().getGeneratorSink(),
        [this, owner = task->owner](const ObjectId& item, std::string bytes) {
          return executor_.KeepValue(item, std::move(bytes), owner);
        });
  }

  // Never run here: this loop is the core worker's, which a task's Get or Wait waits on.
  // The executor's thread writes the outcome and posts the task's number back to this loop,
  // which fulfills. (A void promise: kj's ExceptionOr of a value type trips GCC's
  // -Wmaybe-uninitialized.)
  bool alone = executor_.CanRunInline(*task);  // nothing ahead of it
  auto outcome = std::make_shared<TaskOutcome>();
  auto done = std::make_shared<std::atomic<bool>>(false);
  auto paf = kj::newPromiseAndFulfiller<void>();
  uint64_t number = next_task_++;
  running_.emplace(number, kj::mv(paf.fulfiller));
  executor_.Submit(std::move(*task),
                   [this, finished = finished_, outcome, done, number](TaskOutcome result) {
                     *outcome = std::move(result);
                     finished->Post([this, number] {
                       auto it = running_.find(number);
                       if (it == running_.end()) return;
                       it->second->fulfill();
                       running_.erase(it);
                     });
                     done->store(true, std::memory_order_release);  // its post is in `finished`
                   });
  if (alone) {
    // A small task is done within microseconds: once the loop has read every call already here,
    // wait for it briefly and answer at once, rather than let the loop sleep and be woken (most
    // of a small task's cost). Bounded, so a task that waits on this loop (one that submits
    // tasks) only delays it by kAnswerWait.
    spin_for_ = number;
    spin_done_ = done;
    if (!spin_scheduled_) {
      spin_scheduled_ = true;
      tasks_.add(kj::evalLast([this] {
        spin_scheduled_ = false;
        AwaitLoneAnswer();
      }));
    }
  }
  return paf.promise.then(
      [this, context, outcome, function_name = std::move(function_name)]() mutable {
        FillTaskResults(*outcome, function_name, returns_at_, context.getResults());
      })
      .attach(kj::defer([this, streaming] {
        if (streaming) generators_.Close(*streaming);
      }));
}

void WorkerService::AwaitLoneAnswer() {
  if (!spin_done_ || running_.size() != 1 || running_.count(spin_for_) == 0) return;
  std::shared_ptr<std::atomic<bool>> done = std::move(spin_done_);
  auto until = std::chrono::steady_clock::now() + kAnswerWait;
  while (!done->load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  // Its post is in `finished_` once `done` is set: answer it now.
  if (done->load(std::memory_order_acquire)) finished_->RunPending();
}

kj::Promise<void> WorkerService::exit(ExitContext) {
  exiting_ = true;
  AIRT_LOG(INFO) << "exit requested: finishing the tasks pushed before it";
  auto paf = kj::newPromiseAndCrossThreadFulfiller<void>();
  auto fulfiller =
      std::make_shared<kj::Own<kj::CrossThreadPromiseFulfiller<void>>>(kj::mv(paf.fulfiller));
  executor_.AfterQueued([fulfiller] { (*fulfiller)->fulfill(); });
  return paf.promise.then([this] {
    if (on_exit_->isWaiting()) on_exit_->fulfill();
  });
}

kj::Promise<void> WorkerService::cancelTask(CancelTaskContext context) {
  auto params = context.getParams();
  Result<TaskId::BaseId> task = TaskId::FromBinary(AsStringView(params.getTaskId()));
  if (!task.ok()) throw ToKjException(task.status().WithContext("cancelTask: taskId"));
  TaskId id = *task;
  bool force = params.getForce();
  if (force) {
    // The owner kills this process next: the task is left alone (no KeyboardInterrupt, as Ray's
    // force-cancel), only the tasks it submitted are cancelled first.
    bool running = executor_.IsRunning(id);
    AIRT_LOG(INFO) << "force-cancel of task " << id.Hex() << (running ? ": running" : ": not here");
    if (running && params.getRecursive() && cancel_children_) cancel_children_(true);
    return kj::READY_NOW;
  }
  // What this process submitted and has not finished belongs to the cancelled task only while
  // nothing else runs here: always so for a normal task (one at a time), not for an actor
  // running several calls, whose other calls' tasks must go on.
  bool alone = executor_.RunsAlone(id);
  const char* what = "not here (finished, or never pushed)";
  bool running = false;
  switch (executor_.Cancel(id)) {
    case TaskExecutor::CancelOutcome::kDropped: what = "dropped from the queue"; break;
    case TaskExecutor::CancelOutcome::kInterrupted:
      what = "interrupted";
      running = true;
      break;
    case TaskExecutor::CancelOutcome::kRunsOn:
      what = "running, cannot be interrupted";
      running = true;
      break;
    case TaskExecutor::CancelOutcome::kNotHere: break;
  }
  AIRT_LOG(INFO) << "cancel of task " << id.Hex() << ": " << what;
  // A task that never started, or is gone, has no children here.
  if (running && alone && params.getRecursive() && cancel_children_) cancel_children_(false);
  return kj::READY_NOW;
}

}  // namespace airt::internal
