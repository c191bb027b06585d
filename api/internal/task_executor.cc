#include "api/internal/task_executor.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <span>
#include <string_view>
#include <utility>

#include "airt/internal/serialization.h"
#include "common/logging.h"
#include "objectstore/transfer.h"

namespace airt::worker {
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
                                   task.actor_id.IsNil() ? std::string() : task.actor_id.Binary()};
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

}  // namespace

TaskId CurrentTaskId() {
  const std::string& running = internal::ThisThreadsTask().task_id;
  return running.empty() ? TaskId() : TaskId::FromRaw(reinterpret_cast<const uint8_t*>(running.data()));
}

TaskExecutor::TaskExecutor(const internal::FunctionRegistry& registry,
                           objectstore::StoreClient* store, Options options)
    : registry_(registry), store_(store), options_(std::move(options)) {
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Item{std::move(task), std::move(done), nullptr});
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
      TaskOutcome outcome = Run(*item.task);
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
        TaskFailure::Kind::kFunctionNotFound,
        NotFoundMessage(task.function_name, registry_.Names(), options_.code_search_path)};
    return internal::InvokeOutcome{};
  };
  if (task.kind == TaskKind::kActorMethod) {
    const internal::MethodInvoker* method = registry_.FindMethod(task.function_name);
    if (method == nullptr && !options_.fallback) return not_found();
    if (!actor_) {
      *refused = TaskFailure{TaskFailure::Kind::kBadArguments,
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
        TaskFailure::Kind::kBadArguments,
        "this worker hosts an actor already; '" + task.function_name + "' cannot create another"};
    return internal::InvokeOutcome{};
  }
  internal::InvokeOutcome created =
      invoker ? (*invoker)(args) : options_.fallback(task.kind, task.function_name, nullptr, args);
  if (created.kind == internal::InvokeOutcome::Kind::kOk) {
    if (!created.instance) {
      *refused = TaskFailure{
          TaskFailure::Kind::kBadArguments,
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
    outcome.failure = TaskFailure{TaskFailure::Kind::kCancelled,
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
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && running_ == 0 && extra_threads_.empty();
}

TaskOutcome TaskExecutor::Run(const TaskToRun& task) {
  RunningTaskScope scope(task);
  GeneratorScope streaming(task.generator);
  TaskOutcome outcome;
  bool known = static_cast<bool>(options_.fallback) ||
               (task.kind == TaskKind::kActorMethod
                    ? registry_.FindMethod(task.function_name) != nullptr
                    : registry_.Find(task.function_name) != nullptr);
  if (!known) {
    outcome.failure = TaskFailure{
        TaskFailure::Kind::kFunctionNotFound,
        NotFoundMessage(task.function_name, registry_.Names(), options_.code_search_path)};
    AIRT_LOG(WARNING) << Describe(task) << ": " << outcome.failure->message;
    return outcome;
  }

  // Resolve the arguments: inline bytes as they are, objects pinned in the local store.
  std::vector<objectstore::ObjectPin> pins;
  std::deque<std::string> assembled;  // list arguments' msgpack arrays
  std::vector<std::string_view> args;
  args.reserve(task.args.size());
  for (size_t i = 0; i < task.args.size(); ++i) {
    const TaskArgument& arg = task.args[i];
    if (arg.is_list) {
      Result<std::string> array = AssembleList(arg);
      if (!array.ok()) {
        outcome.status =
            array.status().WithContext("argument " + std::to_string(i) + " of " + Describe(task));
        AIRT_LOG(WARNING) << outcome.status.ToString();
        return outcome;
      }
      args.push_back(assembled.emplace_back(std::move(*array)));
      continue;
    }
    if (!arg.is_object) {
      args.push_back(arg.inline_bytes);
      continue;
    }
    Result<objectstore::ObjectPin> pin = Fetch(arg);
    if (!pin.ok()) {
      outcome.status = pin.status().WithContext("argument " + std::to_string(i) + " of " +
                                                Describe(task) + ", object " + arg.object_id.Hex());
      AIRT_LOG(WARNING) << outcome.status.ToString();
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

  switch (invoked.kind) {
    case internal::InvokeOutcome::Kind::kOk: break;
    case internal::InvokeOutcome::Kind::kBadArguments:
      outcome.failure = TaskFailure{TaskFailure::Kind::kBadArguments, std::move(invoked.error)};
      AIRT_LOG(WARNING) << Describe(task) << ": " << outcome.failure->message;
      return outcome;
    case internal::InvokeOutcome::Kind::kUserException:
      outcome.failure = TaskFailure{TaskFailure::Kind::kUserException, std::move(invoked.error)};
      AIRT_LOG(INFO) << Describe(task) << " raised: " << outcome.failure->message;
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
          TaskFailure{TaskFailure::Kind::kBadArguments,
                      "'" + task.function_name + "' returns " + std::to_string(values.size()) +
                          " value(s), the task asks for " + std::to_string(task.num_returns)};
      return outcome;
    }
  }
  outcome.status = StoreReturns(task, std::move(values), &outcome.returns);
  if (!outcome.status.ok()) {
    outcome.returns.clear();
    AIRT_LOG(WARNING) << outcome.status.ToString();
  }
  return outcome;
}

Result<std::string> TaskExecutor::AssembleList(const TaskArgument& list) {
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
    Result<objectstore::ObjectPin> pin = Fetch(element);
    if (!pin.ok()) {
      return pin.status().WithContext("element " + std::to_string(j) + ", object " +
                                      element.object_id.Hex());
    }
    array.append(reinterpret_cast<const char*>(pin->data().data()), pin->data().size());
  }
  return array;
}

Result<objectstore::ObjectPin> TaskExecutor::Fetch(const TaskArgument& arg) {
  if (!store_->Contains(arg.object_id) && !arg.transfer_address.empty()) {
    objectstore::ObjectPuller puller(store_);
    Status pulled = puller.Pull(arg.transfer_address, arg.object_id, options_.fetch_timeout_ms);
    if (!pulled.ok()) return pulled.WithContext("pulling from " + arg.transfer_address);
  }
  // Local (or just pulled): pin it. With no address, wait for it to be sealed here.
  return store_->Get(arg.object_id, options_.fetch_timeout_ms);
}

Result<TaskReturnValue> TaskExecutor::KeepValue(const ObjectId& id, std::string bytes) {
  TaskReturnValue value;
  value.size = bytes.size();
  if (bytes.size() <= options_.inline_threshold) {
    value.inline_bytes = std::move(bytes);
    return value;
  }
  value.in_store = true;
  value.object_id = id;
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  Status put = store_->Put(id, std::span<const uint8_t>(data, bytes.size()));
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
      Status put = store_->Put(value.object_id, std::span<const uint8_t>(bytes, values[i].size()));
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

}  // namespace airt::worker
