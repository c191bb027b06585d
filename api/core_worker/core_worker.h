// The core worker: the library every driver and every worker process embeds, one per process. It
// registers a job with the head (a driver) or joins its job (a worker), finds its node, submits
// tasks (a worker lease from the node, following spillbacks, then the task pushed straight to the
// leased worker), owns what its tasks return and what it puts, and gets values back from inline
// replies or from the nodes' stores. In a worker process it is the task receiver too: it serves
// proto::Worker (ServeWorker) on its loop and registers the worker with its node.
//
// Threads: a KJ event loop on a thread of its own holds every connection (one per peer, opened
// through a PeerConnector) and the served proto::Worker; calls from any user thread hand their
// work to it through KJ's cross-thread executor. Get and Wait block only the calling thread, which
// therefore must not be the loop's: user code never runs on the loop.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <capnp/capability.h>
#include <kj/async.h>

#include "api/core_worker/memory_store.h"
#include "api/core_worker/peer_connector.h"
#include "common/ids.h"
#include "common/scheduling_strategy.h"
#include "common/status.h"
#include "objectstore/object_store.h"

namespace airt::objectstore {
class ObjectPuller;
}  // namespace airt::objectstore

namespace airt::core_worker {

struct CoreWorkerOptions {
  std::string head_address;                // host:port; "" in a worker started without it
  std::string node_address = "127.0.0.1";  // this machine's node: the first alive one here
  uint16_t node_port = 0;                  // its service port; 0: any node at node_address
  // A worker's core worker joins the job of the tasks it runs (Nil: a driver registers a new job,
  // and finishes it at the end).
  JobId job;
  // A worker process's own id (registers it with its node, tells the node when a Get blocks);
  // Nil in a driver. A worker's core worker takes its node from node_address:node_port, its store
  // and transfer service from the fields below, and joins without asking the head (a worker
  // started without a job, job Nil, serves tasks but cannot submit any).
  WorkerId worker;
  std::string store_socket;      // a worker's: its node's store
  std::string transfer_address;  // a worker's: its node's transfer service, host:port
  // The job's own code (folders or libraries, ':'-separated): workers started for its tasks and
  // actors load it besides their node's code search path.
  std::string code_search_path;
  uint64_t inline_threshold = 100 * 1024;  // larger puts go to the node's store
  // Where this job's named actors live and are looked up; "" gives the job an anonymous one of
  // its own, as Ray does.
  std::string ns;
  // Opens every connection and a worker's port; null: TCP (TcpPeerConnector).
  std::shared_ptr<PeerConnector> connector;
  // Lineage (docs/fault_tolerance.md): the most bytes of task specs kept to rebuild lost objects
  // (Ray's max_lineage_bytes); past it the oldest are released. DefaultMaxLineageBytes() reads
  // AIRT_MAX_LINEAGE_BYTES.
  uint64_t max_lineage_bytes = 1ull << 30;
  // How long the owner asks the head whether a node it could not reach died, before it takes the
  // node for alive (and a copy there that cannot be read for lost).
  uint64_t node_death_wait_ms = 30'000;
};

// AIRT_MAX_LINEAGE_BYTES (a byte count, K/M/G suffixes allowed), else 1 GiB as Ray's default. A
// malformed value is logged and ignored.
uint64_t DefaultMaxLineageBytes();

// What a worker process's core worker serves (CoreWorker::ServeWorker).
struct WorkerServing {
  // Makes the proto::Worker server, on the loop thread. The server fulfills `on_exit` once its
  // exit() has answered; `cancel_children(force)` cancels, recursively, the normal tasks this
  // process submitted and has not finished (call it on the loop thread).
  std::function<capnp::Capability::Client(kj::Own<kj::PromiseFulfiller<void>> on_exit,
                                          std::function<void(bool force)> cancel_children)>
      make_service;
  uint64_t register_timeout_ms = 30'000;  // to bind the port and have the node answer
  uint64_t exit_grace_ms = 2'000;  // after exit's answer: how long callers may take to hang up
  // Called on the loop thread when the node's connection breaks after registering (a worker
  // does not outlive its node). Null: serving goes on.
  std::function<void()> on_node_lost;
};

// A generator's call (Ray's num_returns="streaming"): its one return is its completion (nil, or
// the generator's error), and the items it yields arrive as returns 2, 3, ... while it runs
// (CoreWorker::NextGeneratorItem).
struct StreamOptions {
  bool streaming = false;
  // The generator runs at most this many items ahead of what its consumer took (Ray's
  // _generator_backpressure_num_objects); <= 0: no limit (Ray's default).
  int64_t backpressure = -1;
};

struct TaskOptions {
  std::map<std::string, double> resources = {{"CPU", 1}};
  std::string accelerator_type;
  uint32_t num_returns = 1;
  int32_t max_retries = 3;  // re-runs when the worker dies; -1: without limit (Ray's -1)
  std::string name;
  bool python = false;  // runs on a Python worker (the function is a pickled Python one)
  StreamOptions stream;
  // Decided by the nodes' lease policy (worker/scheduling/scheduling.h LeasePolicy). A placement
  // group's bundle is asked for through `resources` (common/bundle_resources.h) instead.
  sched::SchedulingStrategy strategy{};
};

struct ActorOptions {
  // None by default: as in Ray, an actor holds no resources for its life unless it asks.
  std::map<std::string, double> resources;
  std::string accelerator_type;
  std::string name;          // "" for an unnamed actor
  std::string ns;            // "" for the job's namespace
  int32_t max_restarts = 0;  // -1: without limit
  uint32_t max_concurrency = 1;
  // Outlives its job (and is not restarted once its owner is gone). Needs a name.
  bool detached = false;
  // Resends of a call in flight when the actor's process died, to the restarted actor; -1: no
  // limit; 0 (Ray's default): such a call fails with kActorDied.
  int32_t max_task_retries = 0;
  bool python = false;  // lives on a Python worker (its class is a pickled Python one)
  // Decided by the head's actor placement (head/internal/actor_placement.h).
  sched::SchedulingStrategy strategy{};
};

// An argument: serialized bytes, or a reference to an object this worker owns.
struct TaskArgument {
  std::string value;
  // Refs written inside `value` (borrowed by the worker that reads it, docs/ownership.md): held
  // by this process until the task is done, so that the worker can register as their borrower.
  std::vector<ObjectId> contained;
  std::optional<ObjectId> ref;
  // Refs nested in a vector: the task receives the msgpack array of their values.
  std::vector<ObjectId> ref_list;
  bool is_list = false;
};

// A value got back: its bytes, or why there are none.
struct GotObject {
  std::shared_ptr<const std::string> value;  // inline values: shared with the memory store
  objectstore::ObjectPin pin;  // an object in the node's store: pinned while this lives
  std::optional<ObjectError> error;
  std::string_view bytes() const {
    if (value) return *value;
    return std::string_view(reinterpret_cast<const char*>(pin.data().data()), pin.data().size());
  }
};

// Who owns an object a reference inside a value names (Ray's owner address): where the owner's
// core worker serves proto::Owner (host:port), and its worker id.
struct OwnerAddress {
  std::string address;
  WorkerId worker;
};

// What this process knows of one object's references (for tests and the dashboard).
struct ReferenceSnapshot {
  bool referenced = false;  // some count holds it here (owned or borrowed)
  bool borrowed = false;    // this process borrows it from its owner
  size_t borrowers = 0;     // processes that borrow it from this one (its owner)
  // Its owner's: the Node service addresses (host:port) of the nodes holding copies of it beyond
  // the primary (nodes that pulled it), in the order they were told.
  std::vector<std::string> copies;
};

// One process's progress in a collective group (RecordCollectiveProgress).
struct CollectiveProgress {
  uint64_t entered = 0;  // the last operation it entered
  bool left = false;     // it has left the group since
};

class CoreWorker {
 public:
  // Registers a job with the head (or joins options.job) and connects to this machine's node and
  // its store. A worker's core worker (options.worker set) connects to its store only: its
  // connections open as they are used.
  // kUnavailable: the head, the node or the store cannot be reached; kNotFound: no alive node at
  // options.node_address.
  static Result<std::unique_ptr<CoreWorker>> Connect(CoreWorkerOptions options);
  // Marks the job finished and closes every connection.
  ~CoreWorker();
  CoreWorker(const CoreWorker&) = delete;
  CoreWorker& operator=(const CoreWorker&) = delete;

  // Submits `function` and returns the ids of its returns at once; the task runs when its object
  // arguments are ready. Errors of the run arrive in the returns (Get gives them).
  std::vector<ObjectId> SubmitTask(const std::string& function, std::vector<TaskArgument> args,
                                   const TaskOptions& options);
  // Stores `bytes` (inline when small, in the node's store when large) and returns its id.
  Result<ObjectId> Put(std::string bytes);
  // Stores an object of `size` bytes that `write` writes in place: straight into the node's
  // store when large, so the value is copied once.
  Result<ObjectId> Put(uint64_t size, const std::function<void(uint8_t* out)>& write);
  // Waits for every object, then calls `use(i, object)` for each in order with its bytes or its
  // error; an object of a store is pinned during its call, and after it while `use` keeps the
  // object (moves it away).
  // kDeadlineExceeded names the first object still missing after timeout_ms (< 0: no limit).
  Status GetEach(std::span<const ObjectId> ids, int64_t timeout_ms,
                 const std::function<void(size_t i, GotObject& object)>& use);
  // A reference to `id` held by user code (an ObjectRef) begins or ends. The object is freed
  // (from the memory store and every node's store) once no reference and no unfinished task
  // argument holds it. Any thread; never blocks.
  void AddLocalReference(const ObjectId& id);
  void RemoveLocalReference(const ObjectId& id);

  // References inside values (docs/ownership.md). OwnerOf: the owner a ref to `id` written into
  // a value names: this process for what it owns (it serves proto::Owner from the first call on),
  // else the owner it borrows `id` from. `escrow`: the value leaves with no other hold on its refs
  // (a task's return, a put): an object this process owns is kept until a process borrows it.
  // kUnavailable: the owner's port cannot be bound. Any thread but the loop's.
  Result<OwnerAddress> OwnerOf(const ObjectId& id, bool escrow);
  // A ref read from a value begins: a local reference to `id` (released with
  // RemoveLocalReference), borrowed from `owner` unless this process owns it. The first reference
  // registers this process with the owner and waits for its answer; an owner that cannot be
  // reached makes the object's Get fail with OWNER_DIED. Any thread but the loop's.
  void AddBorrowedReference(const ObjectId& id, const OwnerAddress& owner);
  ReferenceSnapshot References(const ObjectId& id);

  // Which of `ids` are ready now.
  std::vector<bool> Ready(std::span<const ObjectId> ids) const;
  // Waits until `num_ready` of `ids` are ready (an error counts as ready, as in Ray) or
  // timeout_ms passes (< 0: no limit); returns which are ready.
  std::vector<bool> Wait(std::span<const ObjectId> ids, size_t num_ready, int64_t timeout_ms);
  // Where each of `ids` lies as this process's memory store knows it (an owner's table, Ray's
  // object locations): the host:port of the Node service whose store holds the object, or "" for
  // an object held inline, not made yet, failed, or not known here (a borrowed one). Any thread;
  // never blocks.
  std::vector<std::string> NodeAddressesOf(std::span<const ObjectId> ids) const;

  // Cancels the task of this process that makes `object` (Ray's ray.cancel). Its returns fail at
  // once with kCancelled errors (Get raises TaskCancelledError), whatever the worker does next:
  // a task not yet pushed to a worker is dropped; a pushed one is cancelled at its worker
  // (dropped from its queue, or interrupted if it runs and its language allows: Python) or,
  // with `force`, its worker process is killed; it is never retried. `recursive`: the tasks the
  // running task submitted are cancelled as well (by its worker). A finished task, or one this
  // process did not submit, is left alone (Ok). An actor method's call is never forced: it
  // leaves the caller's queue, or its worker drops or interrupts it (ActorManager::Cancel), and
  // the actor stays. kInvalidArgument: `object` is a put, not a return, or `force` for an actor
  // method's return; kUnavailable: the loop is gone.
  Status CancelTask(const ObjectId& object, bool force, bool recursive);
  // Cancels every normal task this process submitted that has not finished, recursively (a
  // worker whose own task is cancelled does it).
  void CancelAllTasks(bool force);

  // Creates an actor: the head places it, and its factory runs on a worker leased on that node,
  // in the background. kAlreadyExists when its name is taken in its namespace; kInvalidArgument
  // for a detached actor without a name, or max_task_retries below -1; kUnavailable when the head
  // cannot be reached.
  Result<ActorId> CreateActor(const std::string& factory, std::vector<TaskArgument> args,
                              const ActorOptions& options);
  // Calls `method` on the actor; returns its returns' ids at once. Calls from this process run in
  // the order they were made. Errors arrive in the returns (kActorDied when the actor died).
  std::vector<ObjectId> SubmitActorTask(const ActorId& actor, const std::string& method,
                                        std::vector<TaskArgument> args, uint32_t num_returns,
                                        StreamOptions stream = {});

  // Streaming generators (the calls submitted with StreamOptions::streaming), by their completion
  // (return 1). The next item's id, waiting for it, or nullopt once the generator ended and every
  // item was taken; after an error the last item holds it. kDeadlineExceeded after timeout_ms
  // (< 0: no limit); kNotFound when `completed` is no open stream of this process. Any thread.
  Result<std::optional<ObjectId>> NextGeneratorItem(const ObjectId& completed,
                                                    int64_t timeout_ms);
  // The consumer is done with the stream: the items it did not take are freed and the generator
  // is no longer held back. Unknown streams are ignored. Any thread; never blocks.
  void DropGenerator(const ObjectId& completed);
  // The actor named `name` in `ns` ("" for this job's namespace). kNotFound when there is none.
  Result<ActorId> GetActor(const std::string& name, const std::string& ns);
  // Stops the actor's process now; with no_restart it is DEAD for good, else its owner restarts
  // it as after a crash. kNotFound for an unknown actor.
  Status KillActor(const ActorId& actor, bool no_restart);
  // How often the head's directory says `actor` has been restarted. kNotFound: no such actor.
  Result<uint32_t> ActorRestarts(const ActorId& actor);
  // Marks `actor` DEAD for good in the head's directory with `cause`, leaving its process alone:
  // what the actor's own worker does before it exits (ExitActor); its owner then finds it dead
  // and fails its calls instead of restarting it.
  Status MarkActorDead(const ActorId& actor, const std::string& cause);
  // The namespace this process's named actors live in (CoreWorkerOptions::ns, or the job's
  // anonymous one).
  const std::string& ns() const;

  // The head's internal KV (Ray's function table lives there). KvPut: false when `key` existed
  // and `overwrite` is false. kUnavailable when the head cannot be reached.
  Result<bool> KvPut(const std::string& ns, const std::string& key, const std::string& value,
                     bool overwrite);
  Result<std::optional<std::string>> KvGet(const std::string& ns, const std::string& key);
  // true: the key was there.
  Result<bool> KvDelete(const std::string& ns, const std::string& key);
  // Deletes every key of `ns` starting with `prefix` (not empty: kInvalidArgument); how many.
  Result<uint32_t> KvDeletePrefix(const std::string& ns, const std::string& prefix);

  // Collective groups' progress (collective/, docs/collective.md): the sequence number of the
  // last operation this process entered in `group`, kept in this process's memory only (nullopt:
  // the process left the group, which is remembered with its last number). Any thread; never
  // blocks on the loop.
  void RecordCollectiveProgress(const std::string& group, std::optional<uint64_t> entered);
  // Where other ranks read it (this process's proto::Owner, served from this call on), host:port.
  // kUnavailable: the port cannot be bound.
  Result<std::string> CollectiveProgressAddress();
  // What the process serving proto::Owner at `address` recorded for `group` (nullopt: it has no
  // such group). kUnavailable: it cannot be reached; kDeadlineExceeded after timeout_ms.
  Result<std::optional<CollectiveProgress>> QueryCollectiveProgress(const std::string& address,
                                                                    const std::string& group,
                                                                    int64_t timeout_ms);

  // Placement groups (docs/cluster.md "Placement groups"; placement_groups.cc). Strategy and
  // state are the schema's values (cluster.capnp PlacementStrategy, PlacementGroupState).
  struct PlacementGroupSpec {
    std::string name;
    std::vector<std::map<std::string, double>> bundles;
    int strategy = 0;  // PACK
    bool detached = false;
    // Bundle i only on nodes whose labels match entry i (Ray 2.60's bundle_label_selector).
    std::vector<sched::LabelSelector> bundle_label_selector;
  };
  struct PlacementGroupView {
    PlacementGroupId id;
    std::string name, ns;
    JobId job;
    int strategy = 0;
    std::vector<std::map<std::string, double>> bundles;
    int state = 0;                   // PENDING
    std::vector<NodeId> bundle_nodes;  // CREATED: by bundle index
    bool detached = false;
    std::string pending_reason;
    bool infeasible = false;
  };
  // Records the group with the head in this process's namespace and job; the head reserves it in
  // the background. kAlreadyExists: its name is taken; kInvalidArgument: a bad bundle.
  Result<PlacementGroupId> CreatePlacementGroup(const PlacementGroupSpec& spec);
  Status RemovePlacementGroup(const PlacementGroupId& id);
  Result<std::vector<PlacementGroupView>> ListPlacementGroups();
  // true once the group is CREATED; false when timeout_ms (< 0: no limit) passed first.
  // kFailedPrecondition: it was removed; kNotFound: unknown.
  Result<bool> WaitPlacementGroup(const PlacementGroupId& id, int64_t timeout_ms);

  // The head's view of the cluster's nodes (Ray's ray.nodes()).
  struct NodeView {
    NodeId id;
    std::string address;  // host:port of its Node service
    bool alive = false;
    std::map<std::string, double> total, available;
  };
  Result<std::vector<NodeView>> ClusterView();
  // This process's node (its host:port), as the cluster view names it.
  const std::string& node_address() const;

  const JobId& job_id() const;
  // This process's worker id (a driver's is made at Connect) and the head it joined, host:port.
  const WorkerId& worker_id() const;
  const std::string& head_address() const;

  // In a worker process (options.worker set): serves serving.make_service's proto::Worker server
  // on a free port of options.node_address, on this core worker's loop, then registers the
  // worker with its node over the node's connection (the one its leases and notifyWorkerBlocked
  // use); returns the port once the node has answered. kUnavailable: the port cannot be bound,
  // or the node cannot be reached or does not answer within serving.register_timeout_ms (nothing
  // is served then); kFailedPrecondition: a driver's core worker, or serving already.
  Result<uint16_t> ServeWorker(WorkerServing serving);
  // Blocks until serving has ended: the server's exit() answered, then its callers hung up or
  // exit_grace_ms passed; the server is destroyed by then. At once when nothing is served.
  void WaitServingEnded();
  // This process's connection to its node's store (a worker's task executor shares it); lives
  // as long as the core worker. Thread-safe.
  objectstore::StoreClient& store();
  // This process's puller of objects from other nodes, over store() (a worker's task executor
  // shares it, so that each peer node gets one pooled connection); lives as long as the core
  // worker. Thread-safe.
  objectstore::ObjectPuller& puller();

  class Impl;

 private:
  explicit CoreWorker(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace airt::core_worker
