// Runs tasks on leased workers, reusing each lease for many tasks: tasks wait in a queue per
// resource shape, each leased worker takes up to kMaxInFlight of them pipelined, more leases are
// asked for while tasks wait, and a lease goes back after it has been idle for kIdleReturn. A
// lease on a node that drains takes no new task: it goes back once its tasks are done.
// Confined to the core worker's loop thread.
#pragma once

#include <deque>
#include <functional>
#include <list>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include <capnp/capability.h>
#include <kj/async.h>
#include <kj/timer.h>

#include "api/core_worker/core_worker.h"
#include "api/core_worker/lease_client.h"
#include "api/core_worker/memory_store.h"
#include "api/core_worker/task_spec.h"
#include "common/proto/node.capnp.h"

namespace airt::core_worker {

class TaskDispatcher {
 public:
  using ForgetFn = std::function<void(const std::string& address)>;

  TaskDispatcher(kj::Timer& timer, kj::TaskSet& background, MemoryStore& memory, ConnectFn connect,
                 ForgetFn forget, std::string local_node, JobId job, std::string code_search_path)
      : timer_(timer),
        background_(background),
        memory_(memory),
        connect_(std::move(connect)),
        forget_(std::move(forget)),
        local_node_(std::move(local_node)),
        job_(job),
        code_search_path_(std::move(code_search_path)) {}

  // Takes a task whose object arguments are resolved; resolves once its returns (or its error)
  // are in the memory store.
  kj::Promise<void> Dispatch(PendingTask* task);
  // Gives every held lease back to its node (at shutdown).
  kj::Promise<void> ReturnAll();

  // Stops `task`, which MarkCancelled marked: one waiting here leaves its queue and its `done` is
  // fulfilled; one pushed to a worker is cancelled there (Worker.cancelTask, with `recursive`),
  // or with `force` its worker is killed through its node (the worker's other tasks are re-run
  // without spending a retry) after, when `recursive`, the worker has cancelled its own tasks or
  // kCancelChildrenGrace passed. A task not here (its arguments are being resolved) is left to
  // its caller, which must not dispatch it.
  void Cancel(PendingTask& task, bool force, bool recursive);

  // Called with the node of a lease whose worker died (or whose connection broke) while it ran a
  // task: the owner asks whether that node died (docs/fault_tolerance.md).
  void OnWorkerLost(std::function<void(const std::string& node)> on_lost) {
    on_worker_lost_ = std::move(on_lost);
  }

  // Called with the copies of arguments the workers' nodes pulled (the owner records them).
  void OnCopies(CopiesFn on_copies) { on_copies_ = std::move(on_copies); }
  // Called once, when the first lease is granted: the owner starts following the head's drains
  // (NodeDraining).
  void OnFirstLease(std::function<void()> on_first) { on_first_lease_ = std::move(on_first); }
  // The node whose Node service is at `node` drains (the head's cluster change feed said so):
  // its leases take no new task (those waiting get leases elsewhere), and go back once idle.
  void NodeDraining(const std::string& node);

  // Records `message` as the error of every return of `task`.
  void Fail(PendingTask& task, ErrorKind kind, const std::string& message,
            const std::string& data = "") {
    FailTask(memory_, task, kind, message, data);
  }

 private:
  static constexpr int kMaxInFlight = 8;
  static constexpr int kMaxLeasesPerShape = 64;
  // Lease requests in flight per shape. Requests a node cannot grant yet wait in its queue and
  // are granted later, when the tasks may be gone; asking a few at a time avoids that churn
  // (Ray caps pending lease requests per scheduling class the same way).
  static constexpr int kMaxPendingLeaseRequests = 2;

  struct Lease {
    std::string node;  // host:port of the node that granted it
    uint64_t id = 0;
    std::string worker;  // host:port
    int in_flight = 0;
    uint64_t generation = 0;  // bumped by every push: an idle timer of an older one is stale
    bool dead = false;
    std::string worker_id;  // 28 bytes, as the node knows the worker
    bool killed = false;    // killed to force-cancel one of its tasks
    bool draining = false;  // its node drains: no new task
    capnp::Capability::Client holder = nullptr;  // LeaseOutcome::holder, until returned
  };
  struct ShapeQueue {
    std::deque<PendingTask*> waiting;
    std::list<Lease> leases;
    int requesting = 0;
    // The first of the lease requests in a row whose spillback target could not be reached.
    kj::Maybe<kj::TimePoint> unreachable_since;
    // SPREAD: each lease runs one task and goes back after it, so that the node's policy places
    // every task.
    bool one_task_per_lease = false;
  };
  static std::string ShapeKey(const TaskOptions& options);
  void Pump(const std::string& key);
  void Push(const std::string& key, Lease& lease, PendingTask* task);
  // Asks for the lease again later, or past kSpillbackRetryWindow fails the waiting tasks.
  void RetryUnreachableSpillback(const std::string& key, const std::string& why);
  void AfterTask(const std::string& key, Lease& lease);
  void ScheduleIdleReturn(const std::string& key, uint64_t lease_id, uint64_t generation);
  void Remove(const std::string& key, uint64_t lease_id, bool disconnect);
  Lease* FindLease(const std::string& key, uint64_t lease_id);
  kj::Promise<void> KillWorker(const Lease& lease);

  kj::Timer& timer_;
  kj::TaskSet& background_;
  MemoryStore& memory_;
  ConnectFn connect_;
  ForgetFn forget_;
  std::string local_node_;
  JobId job_;
  std::string code_search_path_;  // the job's code, for the workers its leases start
  std::map<std::string, ShapeQueue> queues_;
  std::unordered_map<const PendingTask*, uint64_t> pushed_;  // tasks on a worker: their lease
  std::function<void(const std::string& node)> on_worker_lost_;
  CopiesFn on_copies_;
  std::function<void()> on_first_lease_;
  std::set<std::string> draining_nodes_;
};

}  // namespace airt::core_worker
