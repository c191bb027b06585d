// Runs tasks on a thread of its own, one at a time, in the order they were submitted: resolves
// object arguments (pulling them from other nodes), calls the function, stores large returns in
// the node's store. Knows nothing of RPC; the worker service hands tasks in and results out.
//
// A worker hosts at most one actor: an actor-creation task runs the class's factory and keeps the
// instance; method tasks run on it. With max_concurrency N > 1 the methods run on N threads (in
// submission order as they start, concurrently after); otherwise one at a time, in order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "airt/generator.h"
#include "airt/internal/function_registry.h"
#include "common/error_kind.h"
#include "common/ids.h"
#include "common/status.h"
#include "objectstore/object_store.h"

namespace airt::objectstore {
class ObjectPuller;
class PullBatch;
}  // namespace airt::objectstore

namespace airt::internal {

struct TaskArgument {
  bool is_object = false;
  std::string inline_bytes;      // !is_object: the serialized value
  ObjectId object_id;            // is_object
  std::string transfer_address;  // is_object: "host:port" to pull it from; "" when local
  // Refs nested in a vector: the function gets the msgpack array of these (inline or object).
  std::vector<TaskArgument> elements;
  bool is_list = false;
};

enum class TaskKind { kNormal, kActorCreation, kActorMethod };

using Fallback = std::function<internal::InvokeOutcome(
    TaskKind kind, const std::string& function, void* actor,
    std::span<const std::string_view> args)>;

// Asks the user code running `task` to stop (a Python worker raises KeyboardInterrupt in it).
// Called on the worker's event-loop thread while the task may be finishing: it must check that
// `task` is still the one running.
using Interrupt = std::function<void(const TaskId& task)>;

// The task the calling thread runs now (inside the executor's Run, e.g. from a Fallback), or Nil.
TaskId ExecutingTaskId();

struct TaskToRun {
  TaskKind kind = TaskKind::kNormal;
  ActorId actor_id;              // kActorCreation, kActorMethod
  uint32_t max_concurrency = 1;  // kActorCreation: threads that run the actor's methods
  TaskId task_id;
  std::string function_name;
  std::string name;  // the user's name for the task, for logs
  std::vector<TaskArgument> args;
  uint32_t num_returns = 0;
  // What it holds while it runs: a normal task's request; an actor creation's, what the actor
  // holds for its life (its methods carry none).
  std::map<std::string, double> resources;
  uint32_t actor_restarts = 0;  // kActorCreation: restarts of the actor before this one
  // The owner of its returns (the submitter's proto::Owner, TaskSpec.ownerAddress), named in the
  // store with each return kept there; "" when the submitter named none.
  std::string owner;
  // A streaming generator's task: where its items go (its thread's ThisThreadsGenerator while it
  // runs). Such a task never runs inline on the event loop, which carries its items.
  std::shared_ptr<internal::GeneratorEmitter> generator;
};

// Why a task failed, as its TaskError says it (the schema's ErrorKind).
struct TaskFailure {
  TaskFailure(proto::ErrorKind kind, std::string message, std::string data = {})
      : kind(kind), message(std::move(message)), data(std::move(data)) {}
  proto::ErrorKind kind;
  std::string message;
  std::string data;  // USER_EXCEPTION: the exception for the caller (TaskError.data)
};

struct TaskReturnValue {
  bool in_store = false;
  std::string inline_bytes;  // !in_store
  ObjectId object_id;        // in_store: ObjectId::ForReturn(task, i + 1), in the node's store
  uint64_t size = 0;         // the serialized size
};

struct TaskOutcome {
  // Not ok: the executor could not answer; FillTaskResults reports it as a failure of the
  // status's kind. Run itself reports in `failure` (an argument that cannot be fetched is
  // OBJECT_LOST, a return the store cannot take OBJECT_STORE_FULL).
  Status status;
  std::optional<TaskFailure> failure;    // the task ran, or was refused, or could not run: failed
  std::vector<TaskReturnValue> returns;  // num_returns of them when it succeeded
  // The object arguments (list elements too) that lay on another node, named by the transfer
  // address the task gave, and that were pulled into (or found in) this node's store for it.
  std::vector<std::pair<ObjectId, std::string>> fetched;
};

class TaskExecutor {
 public:
  struct Options {
    uint64_t inline_threshold = 100 << 10;
    int64_t fetch_timeout_ms = 60'000;
    std::string code_search_path;  // named in "function not found" errors
    // Runs the functions, actor factories and methods the registry lacks: a Python worker's
    // (the airt package gives a callback that unpickles and calls them; a factory's outcome
    // holds the new instance, which later method calls get as `actor`). Null: such a task
    // fails as not found.
    Fallback fallback;
    // Interrupts a running task that is cancelled. Set, every task runs on the executor's
    // threads (never inline on the event loop, which must stay free to take the cancel). Null:
    // a running task cannot be interrupted (C++ code runs on).
    Interrupt interrupt;
    // Tasks run on the thread that calls RunQueued (a Python worker's main thread), not on a
    // thread the executor starts.
    bool on_caller_thread = false;
    // Pulls object arguments from other nodes (shared with the process's core worker, so that
    // each peer node gets one connection); must outlive the executor. Null: the executor makes
    // its own over `store`.
    objectstore::ObjectPuller* puller = nullptr;
  };

  // What Cancel did.
  enum class CancelOutcome {
    kDropped,      // it was queued: removed, its `done` called with a kCancelled failure
    kInterrupted,  // it was running: options.interrupt was called for it
    kRunsOn,       // it is running and cannot be interrupted
    kNotHere,      // not queued or running here (finished, or never submitted)
  };

  // `registry` and `store` must outlive the executor. Starts the executor's thread, unless
  // options.on_caller_thread.
  TaskExecutor(const internal::FunctionRegistry& registry, objectstore::StoreClient* store,
               Options options);
  // Lets the running task finish, drops the queued ones (their callbacks are destroyed, never
  // called), joins the thread. Blocks while user code runs.
  ~TaskExecutor();
  TaskExecutor(const TaskExecutor&) = delete;
  TaskExecutor& operator=(const TaskExecutor&) = delete;

  // With options.on_caller_thread: runs the queued tasks on the calling thread until Stop.
  void RunQueued();
  // Ends RunQueued (or the executor's thread) once the running task has finished; queued tasks
  // are dropped, their callbacks destroyed, never called. Thread-safe.
  void Stop();

  // Queues `task`; `done` is called with its outcome on the executor's thread. Thread-safe.
  // The task's object arguments on other nodes start arriving now (one batch per task, under
  // fetch_timeout_ms), while the tasks ahead of it run.
  void Submit(TaskToRun task, std::function<void(TaskOutcome)> done);
  // Calls `done` on the executor's thread once every task submitted before it has finished.
  void AfterQueued(std::function<void()> done);

  // Cancels the queued or running task `task`, as CancelOutcome says. Thread-safe; `done` of a
  // dropped task and options.interrupt are called on the calling thread.
  CancelOutcome Cancel(const TaskId& task);
  // Whether `task` runs on one of the executor's threads now. Thread-safe.
  bool IsRunning(const TaskId& task);
  // Whether `task` runs here and nothing else does (an actor may run several calls at once).
  // Thread-safe.
  bool RunsAlone(const TaskId& task);

  // Runs `task` on the calling thread (the executor's thread does this for each queued task).
  TaskOutcome Run(const TaskToRun& task);
  // Whether `task` may run on the calling thread now, in order with everything submitted before:
  // nothing is queued or running here, and no actor's methods run on several threads (an
  // actor's creation that asks for several must go through the queue, which starts them).
  bool CanRunInline(const TaskToRun& task);
  // Keeps one value `task` made as a return: inline when small, else put in the node's store as
  // `id` (a re-run finding it there already is fine). kResourceExhausted: the store is full.
  // Thread-safe.
  Result<TaskReturnValue> KeepValue(const ObjectId& id, std::string bytes,
                                    const std::string& owner = {});

 private:
  struct Item {
    std::optional<TaskToRun> task;  // none: a marker from AfterQueued
    std::function<void(TaskOutcome)> done;
    std::function<void()> marker;
    std::unique_ptr<objectstore::PullBatch> prefetch;  // the task's arguments arriving, if any
  };
  // Runs `task`, whose arguments `prefetch` (null: none) has started pulling.
  TaskOutcome RunPrefetched(const TaskToRun& task, objectstore::PullBatch* prefetch);
  // Starts pulling the task's object arguments that lie on other nodes; null when there are none.
  std::unique_ptr<objectstore::PullBatch> StartPulls(const TaskToRun& task);
  // Waits for `prefetch`, then pulls what is still missing in one batch. The failed objects and
  // why.
  std::unordered_map<ObjectId, Status> FetchArguments(const TaskToRun& task,
                                                      objectstore::PullBatch* prefetch);
  void Loop();
  // Invokes the task's function, factory or method on `args`.
  internal::InvokeOutcome Invoke(const TaskToRun& task, std::span<const std::string_view> args,
                                 std::optional<TaskFailure>* refused);
  Result<objectstore::ObjectPin> Fetch(const TaskArgument& arg,
                                       const std::unordered_map<ObjectId, Status>& failed);
  // A list argument's msgpack array, from its elements' bytes.
  Result<std::string> AssembleList(const TaskArgument& list,
                                   const std::unordered_map<ObjectId, Status>& failed);
  Status StoreReturns(const TaskToRun& task, std::vector<std::string> values,
                      std::vector<TaskReturnValue>* out);

  const internal::FunctionRegistry& registry_;
  objectstore::StoreClient* store_;
  Options options_;
  std::unique_ptr<objectstore::ObjectPuller> own_puller_;  // when options_.puller is null
  objectstore::ObjectPuller* puller_;

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Item> queue_;  // guarded by mu_
  // queue_.size(), stored under mu_ at each change, so that an idle thread can poll it unlocked.
  std::atomic<size_t> queued_{0};
  int running_ = 0;         // guarded by mu_: queued tasks being run now
  std::vector<TaskId> running_ids_;  // guarded by mu_: those tasks' ids (markers have none)
  bool stopping_ = false;   // guarded by mu_
  std::thread thread_;
  std::vector<std::thread> extra_threads_;  // an actor's max_concurrency - 1; executor threads only
  std::shared_ptr<void> actor_;  // set by the creation task, before its method tasks are taken
};

}  // namespace airt::internal
