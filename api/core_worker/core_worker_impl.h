// The core worker's insides, shared by its two source files: core_worker.cc (joining the cluster,
// connections, tasks and actors) and core_worker_objects.cc (objects: puts, gets, reference
// counting and freeing; and the head's KV and cluster view). Not part of any API.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include "api/core_worker/actor_manager.h"
#include "api/core_worker/core_worker.h"
#include "api/core_worker/generator_stream.h"
#include "api/core_worker/lineage.h"
#include "api/core_worker/memory_store.h"
#include "api/core_worker/reference_counter.h"
#include "api/core_worker/task_dispatcher.h"
#include "api/core_worker/task_spec.h"
#include "common/inbox.h"
#include "common/proto/cluster.capnp.h"
#include "objectstore/object_store.h"
#include "objectstore/transfer.h"

namespace airt::core_worker {

// A connection to one peer, reused for every call to it. `cap` queues calls until connected.
struct Peer {
  kj::Own<kj::AsyncIoStream> stream;
  kj::Own<capnp::TwoPartyClient> rpc;
  capnp::Capability::Client cap = nullptr;
  kj::Promise<void> gone = nullptr;  // drops it from the cache once its connection ends
};

class CoreWorker::Impl {
 public:
  explicit Impl(CoreWorkerOptions options)
      : options_(std::move(options)),
        connector_(options_.connector ? options_.connector
                                      : std::make_shared<TcpPeerConnector>()) {}
  ~Impl() { Stop(); }

  Status Start();
  void Stop();
  std::vector<ObjectId> Submit(const std::string& function, std::vector<TaskArgument> args,
                               const TaskOptions& options);
  Result<ObjectId> Put(std::string bytes);
  Result<ObjectId> Put(uint64_t size, const std::function<void(uint8_t*)>& write);
  Status GetEach(std::span<const ObjectId> ids, int64_t timeout_ms,
                 const std::function<void(size_t, GotObject&)>& use);
  std::vector<bool> Ready(std::span<const ObjectId> ids) const { return memory_.Ready(ids); }
  std::vector<std::string> NodeAddressesOf(std::span<const ObjectId> ids) const;
  // Also starts pulling the ready objects that lie on other nodes (one batch per call), so that
  // a Get after it finds them here.
  std::vector<bool> Wait(std::span<const ObjectId> ids, size_t n, int64_t timeout_ms);
  const JobId& job_id() const { return job_id_; }
  Result<ActorId> CreateActor(const std::string& factory, std::vector<TaskArgument> args,
                              ActorOptions options);
  std::vector<ObjectId> SubmitActorTask(const ActorId& actor, const std::string& method,
                                        std::vector<TaskArgument> args, uint32_t num_returns,
                                        StreamOptions stream);
  // Streaming generators: generator_calls.cc.
  Result<std::optional<ObjectId>> NextGeneratorItem(const ObjectId& completed, int64_t timeout_ms);
  void DropGenerator(const ObjectId& completed);
  Result<ActorId> GetActor(const std::string& name, const std::string& ns);
  Status KillActor(const ActorId& actor, bool no_restart);
  Result<uint32_t> ActorRestarts(const ActorId& actor);
  Status MarkActorDead(const ActorId& actor, const std::string& cause);
  const std::string& ns() const { return namespace_; }
  Status CancelTask(const ObjectId& object, bool force, bool recursive);
  void CancelAllTasks(bool force);
  void AddLocalReference(const ObjectId& id) {
    inbox_.Post([this, id] { refs_.AddLocal(id); });
  }
  void RemoveLocalReference(const ObjectId& id) {
    inbox_.Post([this, id] { refs_.RemoveLocal(id); });
  }
  // References inside values: core_worker_borrowing.cc.
  Result<OwnerAddress> OwnerOf(const ObjectId& id, bool escrow);
  void AddBorrowedReference(const ObjectId& id, const OwnerAddress& owner);
  ReferenceSnapshot References(const ObjectId& id);
  // Any thread: asks the owners of the borrowed ones among `ids` without an entry yet where they
  // are, so that the memory store gets their entries (a Get or Wait then finds them).
  void RequestBorrowed(std::span<const ObjectId> ids);
  Result<bool> KvPut(const std::string& ns, const std::string& key, const std::string& value,
                     bool overwrite);
  Result<std::optional<std::string>> KvGet(const std::string& ns, const std::string& key);
  Result<std::vector<CoreWorker::NodeView>> ClusterView();
  Result<bool> KvDelete(const std::string& ns, const std::string& key);
  Result<uint32_t> KvDeletePrefix(const std::string& ns, const std::string& prefix);
  // Collective groups' progress: collective_progress.cc.
  void RecordCollectiveProgress(const std::string& group, std::optional<uint64_t> entered);
  std::optional<CollectiveProgress> CollectiveProgressOf(const std::string& group);
  Result<std::string> CollectiveProgressAddress();
  Result<std::optional<CollectiveProgress>> QueryCollectiveProgress(const std::string& address,
                                                                    const std::string& group,
                                                                    int64_t timeout_ms);
  // Placement groups: placement_groups.cc.
  Result<PlacementGroupId> CreatePlacementGroup(const CoreWorker::PlacementGroupSpec& spec);
  Status RemovePlacementGroup(const PlacementGroupId& id);
  Result<std::vector<CoreWorker::PlacementGroupView>> ListPlacementGroups();
  Result<bool> WaitPlacementGroup(const PlacementGroupId& id, int64_t timeout_ms);
  const std::string& node_address() const { return node_address_; }
  const CoreWorkerOptions& options() const { return options_; }
  Result<uint16_t> ServeWorker(WorkerServing serving);
  // A worker's: reads its job's namespace (its driver's init(namespace=)) from the head into
  // namespace_; a head that cannot answer leaves the anonymous one (logged). Loop thread.
  kj::Promise<void> ReadJobNamespace();
  void WaitServingEnded();
  objectstore::StoreClient& store() { return *store_; }
  // Fetching from other nodes (core_worker_objects.cc): made at the first use, destroyed before
  // store_. Any thread.
  objectstore::ObjectPuller& Puller();

 private:
  // State confined to the loop thread.
  struct Loop {
    Loop(kj::AsyncIoContext& io, kj::TaskSet::ErrorHandler& errors) : io(io), tasks(errors) {}
    kj::AsyncIoContext& io;
    kj::TaskSet tasks;
    std::map<std::string, kj::Own<Peer>> peers;
    std::vector<kj::Own<Peer>> retired;  // kept until the loop ends: callbacks may point at them
    // What Head() gives a worker started without the head's address: an error naming that.
    proto::Head::Client no_head = nullptr;
    // Held while the driver runs: the head finishes the job when it is dropped.
    proto::JobLease::Client job_lease = nullptr;
    kj::Own<TaskDispatcher> dispatcher;  // once joined
    kj::Own<ActorManager> actors;        // once joined
    // A worker's proto::Worker, while served (ServeWorker until its exit has drained).
    kj::Own<capnp::TwoPartyServer> server;
    kj::Own<kj::ConnectionReceiver> listener;
    kj::Promise<void> accepting = nullptr;
    // proto::Owner, served from the first ref this process writes into a value.
    kj::Own<capnp::TwoPartyServer> owner_server;
    kj::Own<kj::ConnectionReceiver> owner_listener;
    kj::Promise<void> owner_accepting = nullptr;
    std::map<std::string, capnp::Capability::Client> borrow_leases;  // by owner address
  };

  // Runs `fn` on the loop thread (after everything posted before) and waits for it.
  template <typename Fn>
  auto OnLoop(Fn&& fn) {
    return executor_->executeSync([this, &fn] {
      inbox_.RunPending();
      return fn();
    });
  }

  // In a worker, tells its node while the calling thread waits for objects, so that the node
  // lends the lease's CPUs to the tasks being waited for. Nothing in a driver.
  class Blocked {
   public:
    explicit Blocked(Impl& impl) : impl_(impl) { impl_.NotifyBlocked(true); }
    ~Blocked() { impl_.NotifyBlocked(false); }
    Blocked(const Blocked&) = delete;
    Blocked& operator=(const Blocked&) = delete;

   private:
    Impl& impl_;
  };
  void NotifyBlocked(bool blocked);

  // Loop thread.
  // Where a worker's core worker joins: its node and store from the options, no call to the head.
  void JoinAsWorker();
  // Makes the task dispatcher and the actor manager, once the node and the job are known.
  void MakeSubmitters();
  // Serving ended (or never began): drops the server and wakes WaitServingEnded.
  void EndServing();
  void CancelAll(bool force);
  capnp::Capability::Client Connect(const std::string& address);
  // Drops the cached connection to `address` (only if it is `only`, when given).
  void Forget(const std::string& address, const Peer* only = nullptr);
  kj::Promise<void> Run(PendingTask* task);
  void Cancel(PendingTask& task, bool force, bool recursive);
  // Counts the task's reference arguments as held until the task is destroyed.
  void HoldArguments(PendingTask& task);
  // The last reference to `id` went: drops it from the memory store and from the stores of the
  // nodes that hold it (when it arrives, if it is not there yet).
  void Free(const ObjectId& id);
  void FlushRemoteFrees();
  // Borrowing (core_worker_borrowing.cc), loop thread. The owner's service and its address.
  kj::Promise<void> ServeOwner();
  // The borrow of `id` ended: its entry leaves the memory store and the owner is told.
  void ReleaseBorrowed(const ObjectId& id);
  // Asks the owner of borrowed `id` where it is and records the answer in the memory store.
  void AskOwner(const ObjectId& id);
  // The connection to the owner at `address` ended: what this process borrows from it fails with
  // OWNER_DIED from now on (even where a Get had found it before).
  void OwnerLost(const std::string& address);
  // The error of a borrowed object whose owner cannot be reached (`why`).
  ObjectError OwnerDied(const ObjectId& id, const OwnerAddress& owner, const std::string& why);
  friend class OwnerService;
  // Evacuation (core_worker_relocation.cc). Any thread but the loop's: this process's
  // proto::Owner address, served at the first call, which its primary copies name in the store;
  // "" (logged once) when the port cannot be bound.
  std::string OwnerTag();
  // Loop thread: Owner.heldObjects and Owner.objectsMoved (a node that leaves moved its primary
  // copies of objects this process owns): whether each is still referenced; whether each took
  // its new location (it is referenced and its location was `from_node`).
  std::vector<bool> HeldObjects(std::span<const ObjectId> ids) const;
  std::vector<bool> ObjectsMoved(const std::string& from_node, std::span<const ObjectId> ids,
                                 const std::string& node_address,
                                 const std::string& transfer_address);
  friend class BorrowLeaseServer;
  // Makes `task` a streaming one (StreamOptions): its stream is open from now on. Any thread,
  // before the task is posted to the loop.
  void OpenStream(PendingTask& task, const StreamOptions& stream);
  // Frees the copy of `id` in the store of the node at `node`, leaving the owner's entry alone.
  void FreeAt(const std::string& node, const ObjectId& id);
  // Node death and lineage (core_worker_recovery.cc, docs/fault_tolerance.md), loop thread.
  // Follows the head's cluster change feed (waitClusterChange, membership only) until it shows
  // the node whose Node service is at `node` dead (then NodeDied), or node_death_wait_ms passes;
  // resolves whether it died. One watch per node at a time. A failed call is retried with the
  // same version after 100 ms, on a new connection when the head's dropped (a restarted head
  // answers with its full view); a head without the feed is polled with clusterView.
  kj::Promise<bool> WatchNode(const std::string& node);
  kj::Promise<bool> AskHeadUntilDead(const std::string& node, kj::TimePoint deadline,
                                     uint64_t epoch, uint64_t since);
  kj::Promise<bool> PollHeadUntilDead(const std::string& node, kj::TimePoint deadline);
  // Follows the head's cluster change feed (membership only, which includes drains) from the
  // first lease on, telling the dispatcher of every node that drains (TaskDispatcher::
  // NodeDraining), until the core worker stops. A failed call is retried after 100 ms, on a new
  // connection when the head's dropped; a head without the feed ends the watch.
  kj::Promise<void> WatchDrains(uint64_t epoch, uint64_t since);
  // Drops the head's connection from the cache: the next Head() connects again.
  void ReconnectHead();
  // The head, on the connection cached for its address. A connection that ended (the head was
  // killed and restarted, or the network failed) left the cache, so every call after it goes to
  // a new one: nothing here holds the head's capability of an old connection (the job lease
  // aside). Loop thread.
  proto::Head::Client Head();
  // The node died: the copies there leave the location table, and each owned object that lay
  // there is rebuilt or given its error (Recover).
  void NodeDied(const std::string& node);
  // Owned `id`'s copy on `node` is gone (`gone` says why, after the node's address in the
  // errors): another node's copy becomes its primary (Promote), else its task runs again (its
  // entry leaves the memory store until the re-run answers), or its entry becomes why it cannot
  // (ObjectLost for a put, the lineage errors). Nothing when its entry no longer lies on `node`.
  void Recover(const ObjectId& id, const std::string& node,
               const std::string& gone = "which died");
  // Copies beyond the primary (core_worker_locations.cc), loop thread. Records `copies` (nodes
  // that pulled objects): an owned object's in copies_, a borrowed one's sent to its owner
  // (Owner.addObjectLocations, once per object and node).
  void AddCopies(const std::vector<ObjectLocation>& copies);
  // Any thread: this node now holds copies of `ids` that lay elsewhere (a Get pulled them).
  void ReportLocalCopies(std::vector<ObjectId> ids);
  // Whether `where` names another node than this one (a copy read here is a secondary one).
  bool Elsewhere(const ObjectLocation& where) const;
  std::vector<ObjectLocation> CopiesOf(const ObjectId& id) const;
  // `node` died: it leaves every object's copies.
  void DropCopiesAt(const std::string& node);
  // `id` was freed: its copies leave the table and the stores of their nodes.
  void FreeCopies(const ObjectId& id);
  // `id`'s primary at `from` is gone: the copy on a live node (this one's first) becomes its
  // entry's location and that node is asked to keep it as the primary copy. False when no copy
  // is left.
  bool Promote(const ObjectId& id, const std::string& from);
  // Runs lineage task `task` again, rebuilding its lost or freed arguments first.
  void Resubmit(LineageTask& task);
  // What a re-run needs of argument `id`: rebuilt when lost or freed; an error entry when it
  // cannot be (so that the re-run fails instead of waiting).
  void EnsureArgument(const ObjectId& id);
  // After a normal task finished: its spec enters the lineage when a return lies in a store.
  void KeepLineage(const PendingTask& task);
  // After Dispatch: a task whose worker could not fetch an argument runs again once the
  // argument's node is known dead and the argument rebuilt; else the error is recorded.
  kj::Promise<void> AfterDispatch(PendingTask* task);
  // Any thread: a Get's copy of `id` at `where` could not be read. Once the head shows that node
  // dead, the entry of the rebuilt object (or its error); none when the node is alive. A borrowed
  // `id`: its owner is asked again, and its answer is the entry when it names another copy (the
  // node left and handed it on, or it was rebuilt) or an error; none when it names `where` again.
  // kDeadlineExceeded past timeout_ms.
  Result<std::optional<ObjectEntry>> Rebuilt(const ObjectId& id, const ObjectLocation& where,
                                             int64_t timeout_ms);
  // Replaces `id`'s entry with `error`.
  void SetError(const ObjectId& id, ObjectError error);
  // A new task of `kind` with `num_returns` return ids (at least one).
  kj::Own<PendingTask> NewTask(proto::TaskKind kind, const ActorId& actor, std::string function,
                               std::vector<TaskArgument> args, uint32_t num_returns);

  CoreWorkerOptions options_;
  std::shared_ptr<PeerConnector> connector_;
  MemoryStore memory_;
  std::thread thread_;
  kj::Own<const kj::Executor> executor_;
  airt::Inbox inbox_;  // submissions, run on the loop without their caller waiting
  kj::Own<kj::PromiseFulfiller<void>> stop_;  // loop thread
  Loop* loop_ = nullptr;                      // loop thread
  JobId job_id_;
  std::string namespace_;
  TaskId driver_task_;
  std::string node_address_, transfer_address_, store_socket_;
  std::unique_ptr<objectstore::StoreClient> store_;
  std::once_flag puller_once_;
  std::unique_ptr<objectstore::ObjectPuller> puller_;
  uint64_t store_capacity_ = 0;  // set with puller_
  std::mutex prefetch_mu_;
  std::vector<std::unique_ptr<objectstore::PullBatch>> prefetches_;  // guarded by prefetch_mu_
  std::atomic<uint32_t> put_index_{0};
  // Loop thread.
  ReferenceCounter refs_{[this](const ObjectId& id) { Free(id); }};
  std::map<std::string, std::vector<ObjectId>> remote_frees_;  // by node, sent once per loop turn
  std::unordered_map<TaskId, PendingTask*> live_tasks_;  // normal tasks submitted, not yet done
  bool stopping_ = false;  // no frees once the connections are closing
  // Who this process is to the owners it borrows from (a driver's is drawn here).
  WorkerId self_ = options_.worker.IsNil() ? WorkerId::FromRandom() : options_.worker;
  // Loop thread: what this process borrows, and from whom; whether its owner was asked where it
  // is (RequestBorrowed).
  struct Borrowed {
    OwnerAddress owner;
    bool asked = false;
    std::unordered_set<std::string> copy_reported;  // nodes whose copies the owner was told of
  };
  std::unordered_map<ObjectId, Borrowed> borrowed_;
  std::atomic<size_t> num_borrowed_{0};  // borrowed_.size(), for RequestBorrowed's fast path
  std::string owner_address_;            // loop thread: proto::Owner's host:port once served
  std::mutex owner_tag_mu_;
  std::string owner_tag_;       // guarded by owner_tag_mu_: owner_address_ once OwnerTag served it
  bool owner_tag_failed_ = false;  // guarded by owner_tag_mu_: serving failed (logged once)
  std::unordered_map<WorkerId, uint32_t> borrow_leases_;  // loop thread: leases out, by borrower
  std::mutex serving_mu_;
  std::condition_variable serving_cv_;
  bool serving_ = false;  // guarded by serving_mu_: ServeWorker succeeded, serving not ended
  GeneratorStreams generators_;  // the open streams (thread-safe)
  // Loop thread: lineage kept, nodes known dead (by Node service address), the watches asking
  // the head, the tasks being re-run to rebuild their returns.
  Lineage lineage_{options_.max_lineage_bytes};
  std::unordered_set<std::string> dead_nodes_;
  std::map<std::string, kj::ForkedPromise<bool>> node_watches_;
  std::unordered_set<TaskId> rebuilding_;
  // Loop thread: the copies of owned objects beyond their primary (the entry's location), by
  // object; a node appears once per object.
  std::unordered_map<ObjectId, std::vector<ObjectLocation>> copies_;
  uint64_t tasks_rebuilt_ = 0;  // loop thread: re-runs started to rebuild lost objects
  std::mutex progress_mu_;
  std::map<std::string, CollectiveProgress> progress_;  // guarded by progress_mu_: by group
};

}  // namespace airt::core_worker
