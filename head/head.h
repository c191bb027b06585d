// airt-head's service: the Head interface of common/proto/cluster.capnp (node table and liveness,
// internal KV, job table and job leases, actor directory and actor placement) over tables kept in
// a MetadataStore.
// head/head_main.cc serves it over TCP; tests serve it over loopback. Confined to the thread whose
// KJ event loop serves it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <kj/async.h>
#include <kj/timer.h>

#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "common/status.h"
#include "head/clock.h"
#include "head/internal/change.h"
#include "head/metadata_store.h"

namespace airt::head {

namespace internal {
class ActorTable;
class ClusterFeed;
class JobTable;
class KvTable;
class NodeTable;
class NodeConnector;
class PlacementGroupManager;
struct ActorRecord;
struct DemandRecord;
struct NodeInfo;
struct ResourceRequest;
}  // namespace internal

struct HeadOptions {
  // Told to each node when it registers: how often it heartbeats.
  uint32_t heartbeat_interval_ms = 1000;
  // A node with no heartbeat for this long is dead.
  uint32_t node_timeout_ms = 10000;
  // Dead nodes kept in the view; beyond this the earliest registered are forgotten.
  size_t max_dead_nodes = 1000;
  // A node whose connection to the head dropped is dead unless it registers again within this.
  uint32_t node_disconnect_grace_ms = 1000;
  // DEAD actors kept in the directory; beyond this the earliest registered are forgotten.
  size_t max_dead_actors = 10000;
  // How long placeActor waits, from an actor's first ask, for a node that can hold it to join
  // before it answers infeasible (the nodes' --infeasible-grace-ms does the same for tasks).
  uint32_t infeasible_grace_ms = 10000;
};

// Each method validates its message (a bad field is kInvalidArgument naming it) and fails with a
// Status carried by ToKjException (common/rpc_status.h): kNotFound for an unknown node, job or
// actor, the store's error (context added) when the MetadataStore fails. The actor directory's
// other errors are ActorTable's (head/internal/actor_table.h).
//
// Every change to the tables is one MetadataStore write (one WriteBatch, however many rows it
// touches), made one at a time in the order the calls arrived: a call that changes something
// answers once the store confirmed its write, and its change shows in memory only then; a call
// whose write failed answers the store's error (kUnavailable for a Redis that went away) and
// changes nothing. Reads answer from memory at once; the loop never waits on the store.
//
// Finishing a job (finishJob, or its driver dropping the JobLease that registerJob returned)
// marks the job's actors that are not detached DEAD and numbers the finish (one write), and each
// heartbeat answers with the jobs finished since the node's last one, so that nodes stop their
// workers. A job whose driver went away while the store failed is finished by the next liveness
// check whose write succeeds.
//
// The head restarts every actor (head/actor_restarts.cc), as Ray's control service does: once an
// owner recorded its actor ALIVE with its creation task, the head watches its worker (a
// connection to its Worker service) and its node, and when either dies restarts it within
// maxRestarts (RESTARTING, placed by placeActor's policy, a lease on that node, its creation task
// pushed to the new worker, ALIVE with the new address), or records it DEAD; each step is one
// MetadataStore write, so a restarted head goes on from the rows it reads. Owners and holders
// learn of it from the directory. An actor that is not detached shares its job's fate: when the
// job finishes the head records it DEAD and stops its worker.
class HeadServer final : public proto::Head::Server {
  struct Token {};
  class JobLeaseServer;

 public:
  // Loads the tables an earlier head left in `store`. `store` and `clock` must outlive the
  // server, which lives as long as a capability to it does. The store's error when loading fails.
  // `nodes` (may be null: placement groups then stay PENDING) is how the head reaches the nodes'
  // services; it must outlive the server.
  static Result<kj::Own<HeadServer>> Open(const HeadOptions& options, MetadataStore& store,
                                          Clock& clock, internal::NodeConnector* nodes = nullptr);
  HeadServer(Token, const HeadOptions& options, MetadataStore& store, Clock& clock,
             internal::NodeConnector* nodes);
  ~HeadServer();

  // Records dead the nodes whose last heartbeat is node_timeout_ms old (they show dead to every
  // call at once) and finishes the jobs whose driver left while the store failed; resolves with
  // the nodes recorded dead (none when the store failed: the next check retries).
  kj::Promise<std::vector<NodeId>> CheckLiveness();
  // Runs CheckLiveness every `interval` until the promise is dropped.
  kj::Promise<void> WatchLiveness(kj::Timer& timer, kj::Duration interval);
  // The cluster change feed's state (waitClusterChange; tests and the dashboard).
  struct FeedSnapshot {
    uint64_t epoch = 0;
    uint64_t version = 0;
    uint64_t membership_version = 0;
    size_t nodes = 0;
    size_t waiters = 0;  // waitClusterChange calls pending
  };
  FeedSnapshot ClusterFeedSnapshot() const;
  // The long-poll calls pending now (a caller that went away is not counted: its call was
  // cancelled), and the actors whose workers the head watches (tests and the dashboard).
  struct WaitersSnapshot {
    size_t demand = 0;            // waitDemand
    size_t placement_groups = 0;  // waitPlacementGroup
    size_t cluster_changes = 0;   // waitClusterChange
    size_t actors_watched = 0;    // actors whose worker the head watches (to restart them)
  };
  WaitersSnapshot Waiters();

 protected:
  kj::Promise<void> registerNode(RegisterNodeContext context) override;
  kj::Promise<void> heartbeat(HeartbeatContext context) override;
  kj::Promise<void> unregisterNode(UnregisterNodeContext context) override;
  kj::Promise<void> clusterView(ClusterViewContext context) override;
  kj::Promise<void> kvPut(KvPutContext context) override;
  kj::Promise<void> kvGet(KvGetContext context) override;
  kj::Promise<void> kvDelete(KvDeleteContext context) override;
  kj::Promise<void> kvKeys(KvKeysContext context) override;
  kj::Promise<void> kvDeletePrefix(KvDeletePrefixContext context) override;
  kj::Promise<void> registerJob(RegisterJobContext context) override;
  kj::Promise<void> finishJob(FinishJobContext context) override;
  kj::Promise<void> listJobs(ListJobsContext context) override;
  kj::Promise<void> registerActor(RegisterActorContext context) override;
  kj::Promise<void> updateActor(UpdateActorContext context) override;
  kj::Promise<void> getActor(GetActorContext context) override;
  kj::Promise<void> listActors(ListActorsContext context) override;
  kj::Promise<void> killActor(KillActorContext context) override;
  kj::Promise<void> placeActor(PlaceActorContext context) override;
  // Placement groups: head/placement_groups.cc.
  kj::Promise<void> createPlacementGroup(CreatePlacementGroupContext context) override;
  kj::Promise<void> removePlacementGroup(RemovePlacementGroupContext context) override;
  kj::Promise<void> listPlacementGroups(ListPlacementGroupsContext context) override;
  kj::Promise<void> waitPlacementGroup(WaitPlacementGroupContext context) override;
  // Demand: head/demand.cc.
  kj::Promise<void> requestResources(RequestResourcesContext context) override;
  kj::Promise<void> waitDemand(WaitDemandContext context) override;
  // Draining a node: head/drain.cc.
  kj::Promise<void> drainNode(DrainNodeContext context) override;
  // The cluster change feed: head/cluster_changes.cc.
  kj::Promise<void> waitClusterChange(WaitClusterChangeContext context) override;

 private:
  struct PendingCommit;
  class TaskErrors final : public kj::TaskSet::ErrorHandler {
    void taskFailed(kj::Exception&& exception) override;
  };

  // Queues `stage`; when every change queued before it is applied or failed, runs it, writes the
  // rows of the change it returns and applies it once the store confirmed them. Resolves with
  // stage's error, or the store's (with the change's context), or ok once applied. A call dropped
  // before its turn is skipped; once written, a change is applied even if nobody waits.
  kj::Promise<Status> Commit(std::function<Result<internal::Change>()> stage);
  void RunCommits();
  // Finishes the job and marks its actors that are not detached DEAD, in one write.
  kj::Promise<Status> FinishJob(const JobId& id);
  // FinishJob for a driver that went away: on a failed write, retried by CheckLiveness.
  void FinishJobOfLostDriver(const JobId& id);
  // Keeps a hold call pending on the session a node registered with; when it fails (the node's
  // connection dropped) and the node has not registered again since, the node is Disconnected
  // (node_table.h): dead after the grace unless it registers again.
  void WatchSession(const NodeId& id, proto::NodeSession::Client session);
  // The demand of the tables now, and its numbering: a demand unlike the last one numbered gets
  // the next version and wakes the waitDemand calls pending. Called after every call that may
  // change it and by each liveness check (placement groups change state on their own).
  internal::DemandRecord CurrentDemand() const;
  void DemandMayHaveChanged();
  // Reads the standing request_resources call an earlier head left in the store (Open). A
  // corrupt row is logged and skipped; the store's error when it cannot be read.
  Status LoadResourceRequest();
  // The node types the autoscaler published (none when no autoscaler runs), parsed again only
  // when its KV value changed.
  const std::vector<internal::NodeInfo>& NodeTypes();
  // Publishes the view to the cluster change feed (cluster_feed.h): after every change applied
  // (RunCommits), so after each registration, death, liveness check, placement group and KV
  // write; NodeMayHaveChanged publishes one node's entry, after its heartbeat.
  void ClusterMayHaveChanged();
  void NodeMayHaveChanged(const NodeId& id);

  // placeActor's policy for `actor` (head/internal/actor_placement.h), its grace counted from its
  // first ask: where, or why it waits (no node yet, or only an autoscaler node type holds it), or
  // why it can never be placed.
  struct ActorNodeChoice {
    enum class Kind { kPlace, kWait, kCannot } kind = Kind::kWait;
    NodeId node;
    std::string address;  // the node's Node service, for kPlace
    std::string message;  // why it waits, or cannot be placed
  };
  ActorNodeChoice ChooseActorNode(const internal::ActorRecord& actor,
                                  const std::set<NodeId>& avoid);
  // The restarts of actors (head/actor_restarts.cc). WatchActors calls LookAfter for each actor:
  // it watches an ALIVE one's worker, handles the death of one whose node is dead, restarts a
  // RESTARTING one whose creation task the head holds, and records DEAD a PENDING one whose job
  // finished (a detached actor nobody will create). Called after loading, after a job finishes,
  // and after a liveness check that recorded nodes dead or while a restart waits (for a node, or
  // after a failed write); LookAfter alone after each updateActor.
  struct KeptActor;
  void WatchActors();
  void LookAfter(const internal::ActorRecord& actor);
  void WatchWorker(const internal::ActorRecord& actor);
  // Its worker `worker` died: RESTARTING (one restart more) within max_restarts, else DEAD.
  void WorkerDied(const ActorId& id, const std::optional<WorkerId>& worker, const std::string& why);
  // `actor` (ALIVE or RESTARTING) died once more: RESTARTING with one restart more and placed
  // again within max_restarts and when its creation task is kept, else DEAD.
  void CountDeath(const internal::ActorRecord& actor, const std::string& why);
  void RestartActor(const ActorId& id);
  void LeaseForRestart(const ActorId& id, const NodeId& node, const std::string& address);
  void RestartRefused(const ActorId& id, const NodeId& node, const std::string& why);
  void PushCreation(const ActorId& id, const std::string& node_address, uint64_t lease_id,
                    const WorkerId& worker, const std::string& worker_address, int32_t pid,
                    capnp::Capability::Client holder);
  // Gives back the lease the head holds for the actor (its worker is stopped), if any.
  void ReleaseLease(KeptActor& kept);
  // `actor` was recorded DEAD by a kill or its job's end: its worker is stopped (the lease the
  // head holds given back, else its node told to kill the worker) and no longer watched.
  void ActorEnded(const internal::ActorRecord& actor);
  // Records the actor DEAD with `cause` and gives back the lease the head held for it.
  void RecordDead(const ActorId& id, const std::string& cause);

  HeadOptions options_;
  Clock& clock_;
  std::unique_ptr<internal::NodeTable> nodes_;
  std::unique_ptr<internal::KvTable> kv_;
  std::unique_ptr<internal::JobTable> jobs_;
  std::unique_ptr<internal::ActorTable> actors_;
  std::unique_ptr<internal::PlacementGroupManager> groups_;
  internal::NodeConnector* node_connector_;  // may be null: drainNode then fails kUnavailable
  // When each actor waiting for a node that can hold it first asked placeActor (Clock
  // MonotonicMs); forgotten once it is placed or found infeasible.
  std::unordered_map<ActorId, int64_t> placing_since_;
  // The standing request_resources call, the demand last numbered and its version (0: none yet),
  // and the waitDemand calls waiting for the next.
  std::unique_ptr<internal::ResourceRequest> requested_;
  std::unique_ptr<internal::DemandRecord> last_demand_;
  uint64_t demand_version_ = 0;
  std::set<NodeId> nodes_with_queue_;
  std::string node_types_text_;
  std::shared_ptr<std::vector<internal::NodeInfo>> node_types_;  // whose last heartbeat reported queued requests
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> demand_waiters_;
  std::unique_ptr<internal::ClusterFeed> feed_;
  MetadataStore& store_;
  struct KeptActor {
    std::optional<WorkerId> watched;  // the worker whose connection `watch` waits on
    kj::Promise<void> watch = nullptr;
    bool restarting = false;  // a restart's step is under way
    std::set<NodeId> refused;  // nodes that refused this restart's lease
    // The lease the head took for its restarted worker: its node, id and LeaseHolder.
    std::string lease_node;
    uint64_t lease_id = 0;
    capnp::Capability::Client holder = nullptr;
  };
  std::unordered_map<ActorId, KeptActor> kept_;
  bool restarts_waiting_ = false;  // a restart waits for a node: the next liveness check retries
  // Jobs whose driver went away and whose finish could not be written yet.
  std::set<JobId> lost_drivers_;
  std::deque<PendingCommit> commits_;
  bool writing_ = false;  // a change's rows are being written
  // Null once this is destroyed: the job leases it handed out (which may outlive it) check it.
  std::shared_ptr<HeadServer*> self_;
  // The latest registration's session watch of each node that gave a session.
  std::unordered_map<NodeId, uint64_t> sessions_;
  uint64_t session_generation_ = 0;
  TaskErrors task_errors_;
  kj::TaskSet session_watches_{task_errors_};
  kj::TaskSet tasks_{task_errors_};  // the writes in flight; last, so destroyed first
};

}  // namespace airt::head
