// Ray's local mode (Config::local_mode): tasks and actors run in the driver's own process, over
// the function registry, with no cluster. For debugging: a breakpoint in a remote function is hit
// in the driver, and no daemon is needed.
//
// Semantics kept from the cluster: Put, Get (values, errors, timeouts), Wait; a task waits for its
// reference arguments and fails with the error of one that failed; an actor's calls run in the
// order they were made (max_concurrency at once), a constructor that throws makes it dead, Kill,
// restarts (max_restarts), ExitActor, named actors in namespaces. What differs: each task runs on
// a thread of its own (nothing limits how many run at once; resources are not counted), objects
// are kept until Shutdown (no reference counting), and nothing is retried.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/core_worker/core_worker.h"
#include "common/ids.h"
#include "common/status.h"

namespace airt::local {

// An object's outcome: its bytes, or why there are none.
struct LocalObject {
  std::shared_ptr<const std::string> value;
  std::optional<core_worker::ObjectError> error;
};

// Thread-safe. The destructor fails every queued actor call, then waits for the running tasks and
// calls to finish (it blocks while user code runs).
class LocalRuntime {
 public:
  // `ns`: this job's namespace ("": an anonymous one of its own).
  explicit LocalRuntime(const std::string& ns);
  ~LocalRuntime();
  LocalRuntime(const LocalRuntime&) = delete;
  LocalRuntime& operator=(const LocalRuntime&) = delete;

  const std::string& ns() const { return ns_; }
  const JobId& job_id() const { return job_; }

  ObjectId Put(std::string bytes);
  // The objects once all exist; kDeadlineExceeded naming the first missing one after timeout_ms
  // (< 0: no limit).
  Result<std::vector<LocalObject>> Get(std::span<const ObjectId> ids, int64_t timeout_ms);
  // Which of `ids` exist once `num_ready` of them do or timeout_ms passed (< 0: no limit).
  std::vector<bool> Wait(std::span<const ObjectId> ids, size_t num_ready, int64_t timeout_ms);

  // Runs `function` (a registered free function) on a thread of its own once its reference
  // arguments exist; returns its returns' ids at once.
  std::vector<ObjectId> SubmitTask(const std::string& function,
                                   std::vector<core_worker::TaskArgument> args,
                                   uint32_t num_returns);
  // Creates an actor: its factory runs on the actor's first thread. kAlreadyExists when its name
  // is taken in its namespace.
  Result<ActorId> CreateActor(const std::string& factory,
                              std::vector<core_worker::TaskArgument> args,
                              const core_worker::ActorOptions& options);
  // Queues a call of `method`; errors arrive in the returns (kActorDied once the actor is dead).
  std::vector<ObjectId> SubmitActorTask(const ActorId& actor, const std::string& method,
                                        std::vector<core_worker::TaskArgument> args,
                                        uint32_t num_returns);
  // The live actor named `name` in `ns` ("": this job's). kNotFound when there is none.
  Result<ActorId> Lookup(const std::string& name, const std::string& ns);
  // Ends the actor: its queued calls fail, and so does the one running (when it ends). Without
  // no_restart it is restarted instead while its max_restarts allow (the factory runs again).
  // kNotFound for an unknown actor.
  Status Kill(const ActorId& actor, bool no_restart);

  // ExitActor, called from a method of one of these actors: the actor ends after the current call
  // (which fails with kActorDied). False when the calling thread runs no actor's call here.
  bool RequestExit();
  // Whether the calling thread runs a call (or the constructor) of an actor restarted before.
  bool CurrentActorRestarted() const;

 private:
  struct Actor;
  struct Call {
    TaskId task;
    std::string function;  // the factory for the creation, else the method
    std::vector<core_worker::TaskArgument> args;
    std::vector<ObjectId> returns;
    bool creation = false;
  };

  void Store(const ObjectId& id, LocalObject object);
  void Fail(const std::vector<ObjectId>& ids, core_worker::ErrorKind kind,
            const std::string& function, const std::string& message);
  // The arguments' bytes (reference arguments waited for), or the error of the first that failed.
  Result<std::vector<std::string>> Resolve(const std::vector<core_worker::TaskArgument>& args,
                                           std::optional<core_worker::ObjectError>* failed);
  // Runs one normal task on the calling thread and stores its returns.
  void RunTask(const TaskId& task, const std::string& function,
               const std::vector<core_worker::TaskArgument>& args,
               const std::vector<ObjectId>& returns);
  void ActorThread(Actor* actor);
  void RunCall(Actor* actor, Call& call);
  // Marks the actor dead (mu_ held): its queued calls fail with `cause`.
  void MarkDead(Actor& actor, const std::string& cause);
  void ReapFinished();  // mu_ held

  // The actor whose call (or constructor) the calling thread runs, if any.
  static thread_local Actor* t_actor;

  const JobId job_;
  const std::string ns_;
  const TaskId driver_task_;
  std::atomic<uint32_t> put_index_{0};

  mutable std::mutex mu_;
  std::condition_variable changed_;  // an object stored, or an actor's queue or state changed
  std::map<ObjectId, LocalObject> objects_;                       // guarded by mu_
  std::map<ActorId, std::unique_ptr<Actor>> actors_;              // guarded by mu_
  std::map<std::pair<std::string, std::string>, ActorId> names_;  // guarded by mu_: (ns, name)
  std::map<uint64_t, std::thread> task_threads_;                  // guarded by mu_
  std::vector<uint64_t> finished_;  // guarded by mu_: task threads that have returned
  uint64_t next_thread_ = 0;        // guarded by mu_
  bool stopping_ = false;           // guarded by mu_
};

}  // namespace airt::local
