// Actors, from a submitter's side. The owner (the process that created an actor) registers it in
// the head's directory, asks the head where to place it (placeActor), leases a worker on that node
// only (asking the head again, avoiding it, when the node refuses or cannot be reached), runs its
// factory there, and records it ALIVE with its creation task. From then on the head restarts it
// (placed again, the factory on a new worker) when its process or node dies, up to max_restarts
// (head/actor_restarts.cc); only an actor whose process died in its first constructor is placed
// again by its owner. Any process holding a handle sends method calls straight to the actor's
// worker, in submission order, over one connection; a holder (the owner too, once its actor's
// worker died) learns where the actor lives from the head.
//
// A call in flight when the actor's process dies is sent again, in submission order, to the
// restarted actor up to max_task_retries times (-1: always). Otherwise (Ray's default
// max_task_retries=0) it fails as Ray's does once the actor's fate is known: kActorDied when the
// actor will not come back (killed, out of restarts), kActorUnavailable when it is restarting or
// comes back, or when no word of its death came within a grace period (Ray's
// timeout_ms_task_wait_for_death_info: a broken connection to a live worker). Calls made after
// wait for the restart, and fail with kActorDied once the actor is DEAD (the directory's death
// cause in the message). A detached actor outlives its owner's job; one that is not shares its
// fate: the head records it DEAD and stops its worker when the job finishes. A holder that finds
// its worker gone polls the directory until it shows the new worker, or DEAD.
//
// Cancel (Ray's ray.cancel of an actor call, never with force) fails the call's returns with
// kCancelled at once. A call not yet sent leaves the queue (the calls after it go on, in order); a
// sent one is marked, so that its answer is dropped and it is never resent after a restart, and
// its worker is asked (cancelTask) to drop it or interrupt it. The actor lives on either way.
// Loop thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <kj/async.h>
#include <kj/timer.h>

#include "api/core_worker/core_worker.h"
#include "api/core_worker/lease_client.h"
#include "api/core_worker/memory_store.h"
#include "api/core_worker/task_spec.h"
#include "common/ids.h"
#include "common/proto/cluster.capnp.h"

namespace airt::core_worker {

class ActorManager {
 public:
  using ForgetFn = std::function<void(const std::string& address)>;
  // The head as this process reaches it now, and a way to open a new connection once that one
  // broke (the head restarted): the process keeps one connection to it, so both go through it.
  struct HeadLink {
    std::function<proto::Head::Client()> current;
    std::function<void()> reconnect;
  };

  ActorManager(kj::Timer& timer, kj::TaskSet& background, MemoryStore& memory, ConnectFn connect,
               ForgetFn forget, HeadLink head, std::string local_node, JobId job,
               std::string code_search_path)
      : timer_(timer),
        background_(background),
        memory_(memory),
        connect_(std::move(connect)),
        forget_(std::move(forget)),
        head_(std::move(head)),
        local_node_(std::move(local_node)),
        job_(job),
        code_search_path_(std::move(code_search_path)) {}

  // Registers the actor `creation` creates (its id, factory and arguments) in the head's
  // directory, then places and constructs it in the background. Rejects with kAlreadyExists when
  // its name is taken. `creation` resolves (its one return) once the constructor ran, or failed.
  kj::Promise<void> Create(kj::Own<PendingTask> creation, const ActorOptions& options);

  // Queues a method call; it is sent when the calls before it have been and the actor is alive.
  void Submit(kj::Own<PendingTask> call);

  // Cancels the call `task` made by this process, as the header says; nothing when it has
  // finished, is not an actor call of this process, or its actor is dead (its returns hold that).
  // `recursive`: the worker also cancels the tasks the call submitted, when it runs no other call.
  void Cancel(const TaskId& task, bool recursive);

  // The directory's entry for `name` in `ns` (an actor not DEAD). kNotFound when there is none.
  kj::Promise<ActorId> Lookup(const std::string& name, const std::string& ns);

  // Ray's kill. no_restart: marks the actor DEAD in the directory first, so the head does not
  // restart it; either way its worker is stopped at once. kNotFound for an unknown actor.
  kj::Promise<void> Kill(const ActorId& id, bool no_restart);

  // The owner's non-detached actors' workers are stopped and their leases given back (Shutdown).
  kj::Promise<void> StopOwned();

  // Called with the copies of arguments the actors' nodes pulled (the owner records them).
  void OnCopies(CopiesFn on_copies) { on_copies_ = std::move(on_copies); }

 private:
  enum class State { kUnknown, kPending, kAlive, kRestarting, kDead };

  struct Actor {
    ActorId id;
    bool owned = false;
    State state = State::kUnknown;
    uint64_t incarnation = 0;  // bumped by each placement; a death of an older one is stale
    uint64_t died = 0;         // the last incarnation whose death was handled
    std::string worker;        // host:port, when alive
    std::string node;          // the node that leased the worker
    std::string worker_id;
    uint64_t lease_id = 0;
    capnp::Capability::Client holder = nullptr;  // the lease's LeaseHolder, until returned
    int32_t pid = 0;
    std::string death_cause;
    int32_t max_task_retries = 0;            // the owner's option; a holder's from the directory
    bool resolving = false;                  // a holder asking the head where the actor lives
    std::deque<kj::Own<PendingTask>> queue;  // calls not yet sent, in submission order
    std::map<uint64_t, kj::Own<PendingTask>> in_flight;  // sent, by PendingTask::actor_seq
    // Cancelled before they were sent, their arguments still resolving (which writes into them):
    // kept until that is done, out of the queue so that the calls after them go on.
    std::vector<kj::Own<PendingTask>> dropped;
    // Sent calls that failed and will not be sent again, waiting to learn whether the actor died
    // for good (kActorDied) or restarts (kActorUnavailable); the grace period ends at `until`.
    struct Unsettled {
      kj::Own<PendingTask> call;
      std::string why;
      kj::TimePoint until;
    };
    std::vector<Unsettled> unsettled;
    uint64_t next_seq = 0;
    // Holder: the worker that died under it, and how often the directory still showed it since.
    std::string dead_worker_id;
    int stale_polls = 0;
    // Owner only.
    kj::Own<PendingTask> creation;
    ActorOptions options;
    uint32_t restarts = 0;  // before its first start (later ones are the head's)
    bool started = false;   // its constructor ran once: the head restarts it from now on
    std::vector<std::string> refused_by;  // nodes (28-byte ids) that refused this placement
    int head_retries = 0;                 // placeActor calls the restarting head failed in a row
  };

  Actor& Entry(const ActorId& id);
  // Owner: enters the actor in the head's directory (PENDING), asking again over a new
  // connection while the head is restarting.
  kj::Promise<void> Register(const ActorId& id, const ActorOptions& options,
                             const std::string& class_name, int attempt);
  // Whether a callback of `incarnation` still concerns the actor (not superseded, not DEAD).
  static bool Current(const Actor& actor, uint64_t incarnation) {
    return actor.incarnation == incarnation && actor.state != State::kDead;
  }
  // Owner: asks the head for a node (again while it answers `waiting`), then Lease there.
  void Place(Actor& actor);
  // Owner: leases a worker on the node the head chose and runs the factory on it. A refusal
  // (infeasible there, or unreachable) places the actor again without that node, a few times.
  void Lease(const ActorId& id, uint64_t incarnation, const std::string& node_id,
             const std::string& node_address);
  void Refused(const ActorId& id, uint64_t incarnation, const std::string& node_id, ErrorKind kind,
               const std::string& why);
  // Owner: the creation fails and the actor is DEAD for good.
  void FailCreation(Actor& actor, ErrorKind kind, const std::string& why);
  void OnCreated(const ActorId& id, uint64_t incarnation,
                 proto::Worker::PushTaskResults::Reader reply);
  // The actor's process died (or could not be reached) in `incarnation`.
  void OnDied(const ActorId& id, uint64_t incarnation, const std::string& why);
  void MarkDead(Actor& actor, const std::string& cause);
  // Fails every queued call with the actor's death cause.
  void FailQueued(Actor& actor);
  // Fails the unsettled calls whose fate is known (DEAD: kActorDied; restarting or back:
  // kActorUnavailable) or whose grace period ended (kActorUnavailable); the others wait on.
  // `restarting`: the head said the actor is pending or restarting.
  void Settle(Actor& actor, bool restarting = false);
  // Holder: asks the head where the actor is, polling while it is pending or restarting.
  void Resolve(const ActorId& id);
  // Holder: the directory shows the worker that died. Polls until the head updates it; after a
  // long wait marks it DEAD here only.
  kj::Promise<void> OnStaleDirectory(const ActorId& id, bool job_alive);
  // Sends queued calls whose arguments are ready, in order, while the actor is alive.
  void Pump(Actor& actor);
  void Send(Actor& actor, kj::Own<PendingTask> call);
  // A sent call got no answer: the actor's process died. Queued again (in submission order) while
  // max_task_retries allows, else unsettled until Settle fails it.
  void OnCallFailed(const ActorId& id, uint64_t seq, uint64_t incarnation, const std::string& why);
  // Writes the actor's state to the head's directory. A head that cannot be reached (it is
  // restarting) is asked again, over a new connection, for a while (kHeadRetries).
  kj::Promise<void> UpdateDirectory(const Actor& actor, proto::ActorState state);
  kj::Promise<void> SendUpdate(const ActorId& id, uint64_t incarnation, proto::ActorState state,
                               int attempt);
  proto::Head::Client head() const { return head_.current(); }

  kj::Timer& timer_;
  kj::TaskSet& background_;
  MemoryStore& memory_;
  ConnectFn connect_;
  ForgetFn forget_;
  CopiesFn on_copies_;
  HeadLink head_;
  std::string local_node_;
  JobId job_;
  std::string code_search_path_;  // the job's code, for the workers its actors start on
  std::unordered_map<ActorId, std::unique_ptr<Actor>> actors_;
};

}  // namespace airt::core_worker
