#include "api/internal/task_executor.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <span>
#include <string_view>
#include <utility>

#include "airt/internal/serialization.h"
#include "api/internal/error_kinds.h"
#include "common/logging.h"
#include "objectstore/transfer.h"

namespace airt::internal {
namespace {

// What a void function's single return holds when the submitter asks for one (Ray's
// ObjectRef<void>): msgpack nil.
constexpr std::string_view kMsgpackNil = "\xc0";
constexpr size_t kMaxNamesListed = 20;
// How long an executor thread that ran out of tasks polls for the next before it sleeps.
constexpr std::chrono::microseconds kIdleSpin{200};

// Sets the calling thread's running task (internal::ThisThreadsTask, which the API's
// CurrentTaskId and the Python worker read) for a scope.
class RunningTaskScope {
 public:
  explicit RunningTaskScope(const TaskToRun& task) : saved_(internal::ThisThreadsTask()) {
    internal::ThisThreadsTask() = {task.task_id.Binary(),
                                   task.actor_id.IsNil() ? std::string() : task.actor_id.Binary(),
                                   task.name, task.resources, task.actor_restarts};
  }
  ~RunningTaskScope() { internal::ThisThreadsTask() = std::move(saved_); }
  RunningTaskScope(const RunningTaskScope&) = delete;
  RunningTaskScope& operator=(const RunningTaskScope&) = delete;

 private:
  internal::RunningTask saved_;
};

// Sets the calling thread's generator emitter (internal::ThisThreadsGenerator) for a scope.
class GeneratorScope {
 public:
  explicit GeneratorScope(std::shared_ptr<internal::GeneratorEmitter> emitter)
      : saved_(std::exchange(internal::ThisThreadsGenerator(), std::move(emitter))) {}
  ~GeneratorScope() { internal::ThisThreadsGenerator() = std::move(saved_); }
  GeneratorScope(const GeneratorScope&) = delete;
  GeneratorScope& operator=(const GeneratorScope&) = delete;

 private:
  std::shared_ptr<internal::GeneratorEmitter> saved_;
};

std::string Describe(const TaskToRun& task) {
  std::string out = "task " + task.task_id.Hex() + " (" + task.function_name;
  if (!task.name.empty() && task.name != task.function_name) out += ", \"" + task.name + "\"";
  return out + ")";
}

std::string NotFoundMessage(const std::string& function, const std::vector<std::string>& names,
                            const std::string& search_path) {
  std::string message = "function '" + function + "' is not registered in this worker (code " +
                        "search path: " + (search_path.empty() ? "none" : "'" + search_path + "'") +
                        "; registered: ";
  if (names.empty()) message += "none";
  for (size_t i = 0; i < names.size() && i < kMaxNamesListed; ++i) {
    message += (i ? ", " : "") + names[i];
  }
  if (names.size() > kMaxNamesListed) {
    message += " and " + std::to_string(names.size() - kMaxNamesListed) + " more";
  }
  return message + "). Is its library on the code search path, with AIRT_REMOTE(" + function + ")?";
}

// An object argument that could not be had: OBJECT_STORE_FULL when this node's store has no room
// for it, else OBJECT_LOST (its copy cannot be fetched: `status` names the object and the node).
TaskFailure ArgumentFailure(const Status& status) {
  proto::ErrorKind kind = status.code() == Code::kResourceExhausted
                              ? proto::ErrorKind::OBJECT_STORE_FULL
                              : proto::ErrorKind::OBJECT_LOST;
  return TaskFailure{kind, status.ToString(), ""};
}

// The task's object arguments (list elements too) that lie on other nodes and are not here.
std::vector<objectstore::PullRequest> RemoteArguments(const TaskToRun& task,
                                                      const objectstore::StoreClient& store) {
  std::vector<objectstore::PullRequest> wanted;
  auto add = [&](const TaskArgument& arg) {
    if (arg.is_object && !arg.transfer_address.empty() && !store.Contains(arg.object_id)) {
      wanted.push_back(objectstore::PullRequest{arg.object_id, arg.transfer_address});
    }
  };
  for (const TaskArgument& arg : task.args) {
    add(arg);
    for (const TaskArgument& element : arg.elements) add(element);
  }
  return wanted;
}

}  // namespace

TaskId ExecutingTaskId() {
  const std::string& running = internal::ThisThreadsTask().task_id;
  return running.empty() ? TaskId() : TaskId::FromRaw(reinterpret_cast<const uint8_t*>(running.data()));
}

TaskExecutor::TaskExecutor(const internal::FunctionRegistry& registry,
                           objectstore::StoreClient* store, Options options)
    : registry_(registry), store_(store), options_(std::move(options)) {
  if (options_.puller == nullptr) own_puller_ = std::make_unique<objectstore::ObjectPuller>(store_);
  puller_ = options_.puller != nullptr ? options_.puller : own_puller_.get();
  if (!options_.on_caller_thread) thread_ = std::thread([this] { Loop(); });
}

TaskExecutor::~TaskExecutor() {
  Stop();
  if (thread_.joinable()) thread_.join();
  for (std::thread& t : extra_threads_) t.join();
  // The actor goes after every thread that could run its methods.
  actor_.reset();
}

void TaskExecutor::RunQueued() { Loop(); }

void TaskExecutor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
}

void TaskExecutor::Submit(TaskToRun task, std::function<void(TaskOutcome)> done) {
  std::unique_ptr<objectstore::PullBatch> prefetch = StartPulls(task);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Item{std::move(task), std::move(done), nullptr, std::move(prefetch)});
    queued_.store(queue_.size(), std::memory_order_relaxed);
  }
  wake_.notify_one();
}

void TaskExecutor::AfterQueued(std::function<void()> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Item{std::nullopt, nullptr, std::move(done)});
    queued_.store(queue_.size(), std::memory_order_relaxed);
  }
  wake_.notify_one();
}

void TaskExecutor::Loop() {
  for (;;) {
    Item item;
    // A worker answering a stream of small calls gets the next one within microseconds of its
    // reply: a short yielding spin takes it without a futex sleep and wake-up (yielding, so the
    // RPC thread that receives it runs first on a busy machine).
    const auto spin_until = std::chrono::steady_clock::now() + kIdleSpin;
    while (queued_.load(std::memory_order_relaxed) == 0 &&
           std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) {
        std::deque<Item> dropped;
        dropped.swap(queue_);
        queued_.store(0, std::memory_order_relaxed);
        lock.unlock();
        return;  // `dropped` goes with its callbacks, none called
      }
      item = std::move(queue_.front());
      queue_.pop_front();
      queued_.store(queue_.size(), std::memory_order_relaxed);
      ++running_;
      if (item.task) running_ids_.push_back(item.task->task_id);
    }
    if (item.task) {
      TaskOutcome outcome = RunPrefetched(*item.task, item.prefetch.get());
      item.prefetch.reset();
      bool start_threads = item.task->kind == TaskKind::kActorCreation && !outcome.failure &&
                           outcome.status.ok() && item.task->max_concurrency > 1;
      if (start_threads) {
        // Methods may now run side by side; only this thread starts the others, once.
        std::lock_guard<std::mutex> lock(mu_);
        for (uint32_t i = 1; i < item.task->max_concurrency; ++i) {
          extra_threads_.emplace_back([this] { Loop(); });
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        --running_;
        running_ids_.erase(std::find(running_ids_.begin(), running_ids_.end(), item.task->task_id));
      }
      item.done(std::move(outcome));
    } else {
      {
        std::lock_guard<std::mutex> lock(mu_);
        --running_;
      }
      item.marker();
    }
  }
}

internal::InvokeOutcome TaskExecutor::Invoke(const TaskToRun& task,
                                             std::span<const std::string_view> args,
                                             std::optional<TaskFailure>* refused) {
  auto not_found = [&] {
    *refused = TaskFailure{
        proto::ErrorKind::FUNCTION_NOT_FOUND,
        NotFoundMessage(task.function_name, registry_.Names(), options_.code_search_path)};
    return internal::InvokeOutcome{};
  };
  if (task.kind == TaskKind::kActorMethod) {
    const internal::MethodInvoker* method = registry_.FindMethod(task.function_name);
    if (method == nullptr && !options_.fallback) return not_found();
    if (!actor_) {
      *refused = TaskFailure{proto::ErrorKind::BAD_ARGUMENTS,
                             "this worker hosts no actor to run '" + task.function_name + "' on"};
      return internal::InvokeOutcome{};
    }
    if (method == nullptr) return options_.fallback(task.kind, task.function_name, actor_.get(), args);
    return (*method)(actor_.get(), args);
  }
  const internal::Invoker* invoker = registry_.Find(task.function_name);
  if (invoker == nullptr && !options_.fallback) return not_found();
  if (task.kind == TaskKind::kNormal) {
    return invoker ? (*invoker)(args) : options_.fallback(task.kind, task.function_name, nullptr, args);
  }
  if (actor_) {
    *refused = TaskFailure{
        proto::ErrorKind::BAD_ARGUMENTS,
        "this worker hosts an actor already; '" + task.function_name + "' cannot create another"};
    return internal::InvokeOutcome{};
  }
  internal::InvokeOutcome created =
      invoker ? (*invoker)(args) : options_.fallback(task.kind, task.function_name, nullptr, args);
  if (created.ok()) {
    if (!created.instance) {
      *refused = TaskFailure{
          proto::ErrorKind::BAD_ARGUMENTS,
          "'" + task.function_name + "' is not an actor factory (a function returning T*)"};
      return internal::InvokeOutcome{};
    }
    actor_ = std::move(created.instance);
    AIRT_LOG(INFO) << "actor " << task.actor_id.Hex() << " created by " << task.function_name;
  }
  created.returns.clear();  // the creation's one return says "ready": nil
  return created;
}

TaskExecutor::CancelOutcome TaskExecutor::Cancel(const TaskId& task) {
  std::function<void(TaskOutcome)> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto queued = std::find_if(queue_.begin(), queue_.end(), [&](const Item& item) {
      return item.task && item.task->task_id == task;
    });
    if (queued != queue_.end()) {
      dropped = std::move(queued->done);
      queue_.erase(queued);
      queued_.store(queue_.size(), std::memory_order_relaxed);
    } else if (std::find(running_ids_.begin(), running_ids_.end(), task) == running_ids_.end()) {
      return CancelOutcome::kNotHere;
    } else if (!options_.interrupt) {
      return CancelOutcome::kRunsOn;
    }
  }
  if (dropped) {
    TaskOutcome outcome;
    outcome.failure = TaskFailure{proto::ErrorKind::CANCELLED,
                                  "task " + task.Hex() + " was cancelled before it started"};
    dropped(std::move(outcome));
    return CancelOutcome::kDropped;
  }
  // Outside mu_: a Python worker's interrupt takes the GIL, which the task's thread may hold.
  options_.interrupt(task);
  return CancelOutcome::kInterrupted;
}

bool TaskExecutor::IsRunning(const TaskId& task) {
  std::lock_guard<std::mutex> lock(mu_);
  return std::find(running_ids_.begin(), running_ids_.end(), task) != running_ids_.end();
}

bool TaskExecutor::RunsAlone(const TaskId& task) {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ids_.size() == 1 && running_ids_[0] == task;
}

bool TaskExecutor::CanRunInline(const TaskToRun& task) {
  if (options_.interrupt) return false;  // the loop must stay free to take a cancelTask
  if (task.generator) return false;      // the loop carries its items
  if (task.kind == TaskKind::kActorCreation && task.max_concurrency > 1) return false;
  // Pulling arguments from other nodes must not hold the RPC loop: such a task is queued.
  if (!RemoteArguments(task, *store_).empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && running_ == 0 && extra_threads_.empty();
}

TaskOutcome TaskExecutor::Run(const TaskToRun& task) { return RunPrefetched(task, nullptr); }

TaskOutcome TaskExecutor::RunPrefetched(const TaskToRun& task, objectstore::PullBatch* prefetch) {
  RunningTaskScope scope(task);
  GeneratorScope streaming(task.generator);
  TaskOutcome outcome;
  bool known = static_cast<bool>(options_.fallback) ||
               (task.kind == TaskKind::kActorMethod
                    ? registry_.FindMethod(task.function_name) != nullptr
                    : registry_.Find(task.function_name) != nullptr);
  if (!known) {
    outcome.failure = TaskFailure{
        proto::ErrorKind::FUNCTION_NOT_FOUND,
        NotFoundMessage(task.function_name, registry_.Names(), options_.code_search_path)};
    AIRT_LOG(WARNING) << Describe(task) << ": " << outcome.failure->message;
    return outcome;
  }

  // Resolve the arguments: inline bytes as they are, objects pinned in the local store (those on
  // other nodes pulled first, all in one batch).
  std::unordered_map<ObjectId, Status> failed = FetchArguments(task, prefetch);
  auto fetched = [&](const TaskArgument& arg) {
    if (arg.is_object && !arg.transfer_address.empty() && failed.count(arg.object_id) == 0) {
      outcome.fetched.emplace_back(arg.object_id, arg.transfer_address);
    }
  };
  for (const TaskArgument& arg : task.args) {
    fetched(arg);
    for (const TaskArgument& element : arg.elements) fetched(element);
  }
  std::vector<objectstore::ObjectPin> pins;
  std::deque<std::string> assembled;  // list arguments' msgpack arrays
  std::vector<std::string_view> args;
  args.reserve(task.args.size());
  for (size_t i = 0; i < task.args.size(); ++i) {
    const TaskArgument& arg = task.args[i];
    if (arg.is_list) {
      Result<std::string> array = AssembleList(arg, failed);
      if (!array.ok()) {
        outcome.failure = ArgumentFailure(
            array.status().WithContext("argument " + std::to_string(i) + " of " + Describe(task)));
        AIRT_LOG(WARNING) << outcome.failure->message;
        return outcome;
      }
      args.push_back(assembled.emplace_back(std::move(*array)));
      continue;
    }
    if (!arg.is_object) {
      args.push_back(arg.inline_bytes);
      continue;
    }
    Result<objectstore::ObjectPin> pin = Fetch(arg, failed);
    if (!pin.ok()) {
      outcome.failure = ArgumentFailure(pin.status().WithContext(
          "argument " + std::to_string(i) + " of " + Describe(task) + ", object " +
          arg.object_id.Hex()));
      AIRT_LOG(WARNING) << outcome.failure->message;
      return outcome;
    }
    const auto data = pin->data();
    args.emplace_back(reinterpret_cast<const char*>(data.data()), data.size());
    pins.push_back(std::move(*pin));
  }

  AIRT_LOG(DEBUG) << "running " << Describe(task);
  std::optional<TaskFailure> refused;
  internal::InvokeOutcome invoked = Invoke(task, std::span<const std::string_view>(args), &refused);
  pins.clear();  // the arguments are no longer read
  if (refused) {
    outcome.failure = std::move(refused);
    AIRT_LOG(WARNING) << Describe(task) << ": " << outcome.failure->message;
    return outcome;
  }

  if (!invoked.ok()) {
    outcome.failure = TaskFailure{internal::ToProto(*invoked.failure), std::move(invoked.error),
                                  std::move(invoked.data)};
    AIRT_LOG(INFO) << Describe(task) << " failed (" << ErrorKindName(outcome.failure->kind)
                   << "): " << outcome.failure->message;
    return outcome;
  }

  std::vector<std::string>& values = invoked.returns;
  if (values.size() != task.num_returns) {
    if (values.empty() && task.num_returns == 1) {
      values.emplace_back(kMsgpackNil);  // a void function's "done"
    } else if (task.num_returns == 0) {
      values.clear();  // nobody asked for the value
    } else {
      outcome.failure =
          TaskFailure{proto::ErrorKind::BAD_ARGUMENTS,
                      "'" + task.function_name + "' returns " + std::to_string(values.size()) +
                          " value(s), the task asks for " + std::to_string(task.num_returns)};
      return outcome;
    }
  }
  Status stored = StoreReturns(task, std::move(values), &outcome.returns);
  if (!stored.ok()) {
    // OBJECT_STORE_FULL when the node's store cannot take a return even after spilling.
    outcome.returns.clear();
    outcome.failure = TaskFailure{ErrorKindOf(stored), stored.ToString(), ""};
    AIRT_LOG(WARNING) << outcome.failure->message;
  }
  return outcome;
}

Result<std::string> TaskExecutor::AssembleList(const TaskArgument& list,
                                               const std::unordered_map<ObjectId, Status>& failed) {
  // A std::vector<T> in msgpack is an array header and then each T: the elements' own bytes.
  std::string array;
  internal::StringSink sink{&array};
  msgpack::packer<internal::StringSink>(sink).pack_array(
      static_cast<uint32_t>(list.elements.size()));
  for (size_t j = 0; j < list.elements.size(); ++j) {
    const TaskArgument& element = list.elements[j];
    if (!element.is_object) {
      array += element.inline_bytes;
      continue;
    }
    Result<objectstore::ObjectPin> pin = Fetch(element, failed);
    if (!pin.ok()) {
      return pin.status().WithContext("element " + std::to_string(j) + ", object " +
                                      element.object_id.Hex());
    }
    array.append(reinterpret_cast<const char*>(pin->data().data()), pin->data().size());
  }
  return array;
}

std::unique_ptr<objectstore::PullBatch> TaskExecutor::StartPulls(const TaskToRun& task) {
  std::vector<objectstore::PullRequest> wanted = RemoteArguments(task, *store_);
  if (wanted.empty()) return nullptr;
  return puller_->Start(wanted, options_.fetch_timeout_ms);
}

std::unordered_map<ObjectId, Status> TaskExecutor::FetchArguments(
    const TaskToRun& task, objectstore::PullBatch* prefetch) {
  // What the prefetch did not bring (it failed, or its deadline passed while the task was
  // queued) is asked for again, under a deadline of its own.
  if (prefetch != nullptr) prefetch->Wait();
  std::unordered_map<ObjectId, Status> failed;
  std::vector<objectstore::PullRequest> wanted = RemoteArguments(task, *store_);
  if (wanted.empty()) return failed;
  std::vector<Status> pulled = puller_->PullEach(wanted, options_.fetch_timeout_ms);
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (!pulled[i].ok()) failed.emplace(wanted[i].id, std::move(pulled[i]));
  }
  return failed;
}

Result<objectstore::ObjectPin> TaskExecutor::Fetch(
    const TaskArgument& arg, const std::unordered_map<ObjectId, Status>& failed) {
  if (auto it = failed.find(arg.object_id); it != failed.end()) return it->second;
  // Local (or just pulled): pin it. With no address, wait for it to be sealed here.
  return store_->Get(arg.object_id, options_.fetch_timeout_ms);
}

Result<TaskReturnValue> TaskExecutor::KeepValue(const ObjectId& id, std::string bytes,
                                                const std::string& owner) {
  TaskReturnValue value;
  value.size = bytes.size();
  if (bytes.size() <= options_.inline_threshold) {
    value.inline_bytes = std::move(bytes);
    return value;
  }
  value.in_store = true;
  value.object_id = id;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  Status put = store_->Put(id, std::span<const uint8_t>(data, bytes.size()), {}, owner);
  // A re-run of the task (a retry, lineage) finds its return there already: same bytes.
  if (!put.ok() && put.code() != Code::kAlreadyExists) {
    return put.WithContext("object " + id.Hex() + ", " + std::to_string(value.size) + " bytes");
  }
  return value;
}

Status TaskExecutor::StoreReturns(const TaskToRun& task, std::vector<std::string> values,
                                  std::vector<TaskReturnValue>* out) {
  out->reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    TaskReturnValue value;
    value.size = values[i].size();
    if (values[i].size() <= options_.inline_threshold) {
      value.inline_bytes = std::move(values[i]);
    } else {
      value.in_store = true;
      value.object_id = ObjectId::ForReturn(task.task_id, static_cast<uint32_t>(i + 1));
      const auto* bytes = reinterpret_cast<const uint8_t*>(values[i].data());
      Status put = store_->Put(value.object_id, std::span<const uint8_t>(bytes, values[i].size()),
                               {}, task.owner);
      // A re-run of the task (a retry, lineage) finds its return there already: same bytes.
      if (!put.ok() && put.code() != Code::kAlreadyExists) {
        return put.WithContext("return " + std::to_string(i) + " of " + Describe(task) +
                               " (object " + value.object_id.Hex() + ", " +
                               std::to_string(value.size) + " bytes)");
      }
    }
    out->push_back(std::move(value));
  }
  return Status::Ok();
}

}  // namespace airt::internal
