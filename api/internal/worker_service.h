// proto::Worker served by airt-worker on its core worker's loop: validates each pushed task at the
// edge, hands it to the TaskExecutor's thread and answers once it is done. Tasks never run on the
// loop: a task that submits tasks waits in Get for replies it receives. When the loop has nothing
// else to do and one task is out, it waits up to 100 us for that task's answer (so that a small
// task's answer goes out at once, without the loop going to sleep and being woken); calls that
// are already queued on the loop are read first, so pipelined calls are never held back.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include <kj/async.h>

#include "api/internal/generator_emitter.h"
#include "api/internal/task_executor.h"
#include "common/ids.h"
#include "common/inbox.h"
#include "common/proto/node.capnp.h"
#include "common/status.h"

namespace airt::internal {

// Limits on what a pushed task may carry.
inline constexpr size_t kMaxFunctionNameBytes = 4096;
inline constexpr size_t kMaxTaskArgs = 1 << 16;
inline constexpr uint32_t kMaxTaskReturns = 1 << 10;
inline constexpr uint32_t kMaxActorConcurrency = 1000;
inline constexpr size_t kMaxTaskResources = 1 << 10;  // names in a TaskSpec's resources

// A TaskSpec off the wire as a TaskToRun. kInvalidArgument naming the field for a malformed one
// (id sizes, an empty or overlong function name, too many arguments or returns).
// kFailedPrecondition when it belongs to another job than `job` (Nil: any job).
Result<TaskToRun> ParseTaskSpec(proto::TaskSpec::Reader spec, const JobId& job);

// Where this worker's node keeps the returns it puts in the store: its transfer service (to pull
// them from) and its Node service (to free them at).
struct ReturnsAt {
  std::string transfer_address;  // host:port
  std::string node_address;      // host:port
};

// Writes `outcome` into pushTask's results: its returns, or its failure as a TaskError (kind, message,
// data).
void FillTaskResults(const TaskOutcome& outcome, const std::string& function_name,
                     const ReturnsAt& returns_at, proto::Worker::PushTaskResults::Builder results);

// Cancels the normal tasks this process submitted that have not finished (the children of a
// cancelled task), with `force`; a worker's core worker does it. Called on the event loop's thread.
using CancelChildren = std::function<void(bool force)>;

// Lives on the core worker's loop thread; `executor` must outlive it.
class WorkerService final : public proto::Worker::Server, private kj::TaskSet::ErrorHandler {
 public:
  // `on_exit` is fulfilled as an exit() call answers (every task pushed before it has finished);
  // its owner then stops serving, leaving the event loop running until the answer is written.
  // `cancel_children` serves cancelTask's `recursive` (null: nothing to cancel).
  WorkerService(TaskExecutor& executor, JobId job, ReturnsAt returns_at,
                kj::Own<kj::PromiseFulfiller<void>> on_exit,
                CancelChildren cancel_children = nullptr);
  ~WorkerService();

 protected:
  // An RPC error (not a TaskError) for a malformed spec, a task of another job, a task pushed
  // after exit, an object argument that cannot be fetched, or returns that cannot be stored.
  kj::Promise<void> pushTask(PushTaskContext context) override;
  // Answers once the tasks pushed before it have finished; then fulfills `on_exit`. Tasks pushed
  // after it fail with kUnavailable.
  kj::Promise<void> exit(ExitContext context) override;
  // Drops the task if it is queued, interrupts it if it runs (where the executor can), then
  // cancels this process's own unfinished tasks when asked to recurse and it is the only task
  // running here. With force (the owner kills this process next) only the latter.
  // kInvalidArgument for a malformed taskId.
  kj::Promise<void> cancelTask(CancelTaskContext context) override;

 private:
  void taskFailed(kj::Exception&& exception) override;
  // Run by kj::evalLast once the loop has nothing else queued: while the task `spin_for_` is the
  // only one out, waits up to kAnswerWait for it to finish, then answers what has finished.
  void AwaitLoneAnswer();

  TaskExecutor& executor_;
  // Finished tasks come back to this loop through `finished_` (one wake-up for a burst of them),
  // each fulfilling its pushTask's entry in `running_`. Loop thread only, but for Post.
  std::shared_ptr<Inbox> finished_ = std::make_shared<Inbox>();  // outlives this for the executor
  std::unordered_map<uint64_t, kj::Own<kj::PromiseFulfiller<void>>> running_;
  uint64_t next_task_ = 0;
  // The last task pushed with nothing ahead of it, and whether its outcome is written (set by
  // the executor's thread); spin_scheduled_: an AwaitLoneAnswer is queued. Loop thread only.
  uint64_t spin_for_ = 0;
  std::shared_ptr<std::atomic<bool>> spin_done_;
  bool spin_scheduled_ = false;
  kj::TaskSet tasks_;
  JobId job_;
  ReturnsAt returns_at_;
  kj::Own<kj::PromiseFulfiller<void>> on_exit_;
  bool exiting_ = false;
  CancelChildren cancel_children_;
  GeneratorSinks generators_;  // the streaming tasks' sinks
};

}  // namespace airt::internal
