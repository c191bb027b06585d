// A task on its way from a submitter to a worker (a remote function, an actor's creation, or an
// actor method), and the two ends of its trip: the TaskSpec it is pushed as, and its reply
// recorded into the owner's memory store. Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <kj/async.h>

#include "api/core_worker/core_worker.h"
#include "api/core_worker/generator_stream.h"
#include "api/core_worker/lease_client.h"
#include "api/core_worker/memory_store.h"
#include "common/ids.h"
#include "common/proto/node.capnp.h"

namespace airt::core_worker {

struct PendingTask {
  TaskId id;
  proto::TaskKind kind = proto::TaskKind::NORMAL;
  ActorId actor_id;              // actor creation and methods
  uint32_t max_concurrency = 1;  // actor creation
  std::string function;
  std::vector<TaskArgument> args;
  std::vector<ObjectEntry> resolved;  // by argument index, for reference arguments
  std::vector<std::vector<ObjectEntry>> resolved_lists;  // by argument index, for ref lists
  TaskOptions options;
  std::vector<ObjectId> returns;
  uint32_t attempts = 0;    // runs that failed because the worker died (an actor call: resends)
  uint64_t actor_seq = 0;   // an actor call: its place in this process's calls to the actor
  // CancelTask marked it: its returns hold kCancelled errors already; it is not (re)pushed, and
  // what its worker answers is dropped.
  bool cancelled = false;
  bool args_ready = false;  // every reference argument's entry is in `resolved`
  std::optional<ObjectError> arg_error;  // once ready: the first argument that failed
  // Keeps the task's reference arguments counted until the task is destroyed (done).
  std::shared_ptr<void> holds;
  kj::Own<kj::PromiseFulfiller<void>> done;  // set by whoever dispatches it
  // A streaming generator's call: where its items go (each push carries a sink over it).
  std::shared_ptr<GeneratorStream> stream;
  // Set by whoever runs it: a reply saying an argument could not be fetched (OBJECT_LOST) is not
  // recorded but kept here, and `done` fulfilled, so that the runner can learn whether the
  // argument's node died, rebuild it and run the task again (docs/fault_tolerance.md).
  bool intercept_lost_arguments = false;
  std::optional<ObjectError> lost_argument;
  uint32_t argument_rebuilds = 0;  // runs again after an argument was rebuilt (not retries)
  // The submitter's proto::Owner address, which the worker names as its returns' owner in its
  // store (TaskSpec.ownerAddress); "" when not served.
  std::string owner;
};

// Resolves once every reference argument of `task` has an entry in the memory store, copied into
// `task.resolved`; sets args_ready. The error of the first failed argument, or none.
kj::Promise<std::optional<ObjectError>> ResolveArguments(MemoryStore& memory, PendingTask& task);

// Writes `task` (its object arguments resolved) as the spec a worker runs.
void FillTaskSpec(const PendingTask& task, const JobId& job, proto::TaskSpec::Builder spec);

// Records a worker's answer: each return's value or location, or the task's error in every one.
void RecordTaskReply(MemoryStore& memory, PendingTask& task,
                     proto::Worker::PushTaskResults::Reader reply);

// Called with the copies a worker's node pulled of a task's arguments (pushTask's `copies`),
// when there are any.
using CopiesFn = std::function<void(std::vector<ObjectLocation>)>;
// Passes the reply's copies to `on_copies` (nothing when it lists none or `on_copies` is empty).
void ReportCopies(const CopiesFn& on_copies, proto::Worker::PushTaskResults::Reader reply);

// Drops the answer of a task that was cancelled meanwhile: the returns it put in its node's
// store are freed there (in the background); nothing is recorded.
void DropTaskReply(const ConnectFn& connect, kj::TaskSet& background,
                   proto::Worker::PushTaskResults::Reader reply);

// Records `message` (and `data`: ObjectError::data) as the error of every return of `task` and
// fulfills its `done`.
void FailTask(MemoryStore& memory, PendingTask& task, ErrorKind kind, const std::string& message,
              const std::string& data = "");

// Marks `task` cancelled and records kCancelled errors in its returns, leaving its `done` alone
// (whoever holds the task still finishes it). False when it was marked already.
bool MarkCancelled(MemoryStore& memory, PendingTask& task);

}  // namespace airt::core_worker
