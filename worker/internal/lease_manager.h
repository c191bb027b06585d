// The node's worker leases (DESIGN.md "Scheduling", level 1): each request is decided by the
// scheduling library's LeaseQueue (grant here, spill back to the node the head's view says has
// room, queue, or infeasible after the grace period), a grant takes the shape's resources and GPU
// ids from the node's NodeResources and a worker from the WorkerPool, and every release, view
// change and grace period's end dispatches the queue again. It is also what the node's heartbeat
// reports as available (a ResourceReporter).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <kj/async.h>
#include <kj/timer.h>

#include "common/ids.h"
#include "common/status.h"
#include "worker/internal/memory_monitor.h"
#include "worker/internal/resource_report.h"
#include "worker/internal/worker_pool.h"
#include "worker/scheduling/scheduling.h"

namespace airt::worker {

// What a lease request asks for, validated at the edge.
struct LeaseAsk {
  worker::scheduling::ResourceShape shape;
  JobId job;
  WorkerLanguage language = WorkerLanguage::kCpp;
  std::string code_search_path;  // the job's own code, loaded besides the node's
  bool placed = false;    // the head placed it here: never spilled back (LeaseRequest::placed)
  bool detached = false;  // a detached actor's: the lease and its worker outlive the job
  sched::SchedulingStrategy strategy{};  // decided by the LeasePolicy (LeaseRequest::strategy)
  bool spilled = false;         // another node spilled it here (LeaseRequest::spilled)
  bool retriable = false;       // its tasks are retried or its actor restarts (the memory monitor's)
};

struct LeaseGranted {
  uint64_t lease_id = 0;
  WorkerAddress worker;
  std::vector<uint32_t> gpu_ids;  // the worker's CUDA_VISIBLE_DEVICES
};
struct LeaseSpilled {
  NodeId node;
  std::string node_address;  // "host:nodePort"
};
struct LeaseInfeasible {
  std::string message;  // names the shape and the nodes' totals
};
using LeaseOutcome = std::variant<LeaseGranted, LeaseSpilled, LeaseInfeasible>;

// One bundle of a placement group to reserve here (node.capnp BundleSpec), validated.
struct BundleAsk {
  uint32_t index = 0;
  worker::scheduling::ResourceSet resources;
};

// The head's cluster view as the lease manager uses it.
struct RemoteNodes {
  worker::scheduling::ClusterView view;
  std::map<NodeId, std::string> addresses;  // "host:nodePort" of each node in the view
};

struct LeaseManagerOptions {
  NodeId local_node;
  kj::Duration infeasible_grace = 10 * kj::SECONDS;
  // Per GPU id: what CUDA_VISIBLE_DEVICES names it by (default: the id), and its memory in bytes
  // (a fractional share's worker gets AIRT_GPU_MEMORY_LIMIT_BYTES = share x memory).
  std::map<uint32_t, std::string> gpu_visible_names;
  std::map<uint32_t, uint64_t> gpu_memory;
};

// Why the node stopped a worker (LeaseManager::StopWorker).
struct WorkerExit {
  std::string reason;
  bool out_of_memory = false;  // the memory monitor stopped it: its task fails with kOutOfMemory
};

// A lease's hold on GPUs, for the GPU monitor.
struct GpuLease {
  WorkerId worker;
  int32_t pid = 0;
  std::vector<uint32_t> gpu_ids;
  double gpu_amount = 0;  // the shape's GPU: a fraction of its one id, or whole ids
};

struct LeaseManagerSnapshot {
  worker::scheduling::NodeResourcesSnapshot resources;
  std::vector<worker::scheduling::QueuedShape> queued;
  size_t num_queued = 0;
  size_t num_granting = 0;  // granted here, waiting for a worker
  size_t num_leases = 0;
  size_t view_nodes = 0;
  WorkerPoolSnapshot pool;
};

// Event-loop confined. `pool` and `timer` must outlive it; it sets the pool's OnLeasedExit.
class LeaseManager final : public ResourceReporter, private kj::TaskSet::ErrorHandler {
 public:
  LeaseManager(LeaseManagerOptions options, worker::scheduling::NodeResources resources,
               WorkerPool& pool, kj::Timer& timer);
  // Rejects every waiting request with kUnavailable.
  ~LeaseManager() noexcept override;
  LeaseManager(const LeaseManager&) = delete;
  LeaseManager& operator=(const LeaseManager&) = delete;

  // Resolves once the request is granted (a worker registered), spilled back or found
  // infeasible. Rejects with kUnavailable naming the worker's log when its worker fails to start
  // or register; kUnimplemented for Python (no Python worker yet). Dropping the promise cancels
  // the request: out of the queue, or its resources released while its worker starts (the
  // worker then goes idle).
  kj::Promise<LeaseOutcome> RequestLease(LeaseAsk ask);
  // Releases the lease's resources; its worker goes idle for reuse, or is stopped when
  // `disconnect_worker`; then dispatches the queue. Ok, doing nothing, for a lease this node ended
  // itself (KillWorker, EndJob). kNotFound: no such lease (returned already, or its worker died).
  Status ReturnLease(uint64_t lease_id, bool disconnect_worker);
  // The lease's holder is gone (its requester dropped it or died) while the lease may still be
  // held: a held lease that is not detached is returned with its worker stopped (it may be
  // mid-task for a dead owner). A lease returned or ended already, or a detached one, is left as
  // it is. Never throws; safe to call from a destructor on the loop.
  void AbandonLease(uint64_t lease_id) noexcept;
  // See WorkerPool::Register.
  Status RegisterWorker(const WorkerAddress& address);
  // A new view from the head; dispatches the queue.
  void UpdateView(RemoteNodes nodes);
  // Called (on the loop) each time a request is queued here: the node's heartbeat then reports
  // its queue soon (HeadSession::ReportSoon), so that an autoscaler hears of it at once.
  void SetOnQueued(std::function<void()> on_queued) { on_queued_ = std::move(on_queued); }
  // `job` has finished: rejects its waiting requests (but a detached actor's, which the head
  // sends to restart it after its job) with kFailedPrecondition, ends its leases
  // (their resources come back at once) and stops every worker of the job (WorkerPool::StopJob),
  // except the workers of its detached leases, which keep running (a detached actor outlives its
  // job) until they are returned, killed or exit. Resolves once every worker of the job has
  // exited, those included.
  kj::Promise<void> EndJob(const JobId& job);
  // SIGKILLs worker `worker` now and ends its lease, if any, giving its resources back. false: no
  // such worker (it has exited).
  bool KillWorker(const WorkerId& worker);
  // The leased worker waits in Get (true) or goes on (false): its lease's CPUs are lent to other
  // requests meanwhile (NodeResources::LendCpus). A worker without a lease is ignored.
  void WorkerBlocked(const WorkerId& worker, bool blocked);

  // Placement groups, two-phase (node.capnp prepareBundles, commitBundles, cancelBundles;
  // lease_manager_bundles.cc). Prepare takes every bundle's resources now, or none:
  // kResourceExhausted naming the bundle that does not fit (kInvalidArgument for one that never
  // can). A group prepared again keeps the bundles it holds here; a bundle index held already is
  // first given back. Commit adds the formatted bundle resources (common/bundle_resources.h) of
  // every prepared bundle of the group not committed yet and dispatches the queue;
  // kFailedPrecondition when nothing of the group is prepared here. Cancel stops the workers
  // leased in the group's bundles (those of `indices` when not empty: leases naming them by index)
  // and gives those bundles back; an unknown group is ignored.
  Status PrepareBundles(const PlacementGroupId& group, const std::vector<BundleAsk>& bundles);
  Status CommitBundles(const PlacementGroupId& group);
  void CancelBundles(const PlacementGroupId& group, const std::vector<uint32_t>& indices = {});
  // The committed bundles, by group (what a registration tells the head).
  std::vector<HeldBundles> CommittedBundles() const;
  // A failed health check: GPU `gpu_id` leaves the schedulable resources and the workers of the
  // leases holding it are stopped (their owners retry the tasks elsewhere, within their
  // retries); `reason` is each such worker's ExitReason. kNotFound: no such GPU.
  Status QuarantineGpu(uint32_t gpu_id, const std::string& reason);
  // Puts a quarantined GPU back. kNotFound: no such GPU.
  Status RestoreGpu(uint32_t gpu_id);
  // Cordoned: nothing new is granted here (requests spill back to other nodes, wait, or are
  // infeasible here when the head placed them), and the heartbeat reports nothing available.
  // Leases held go on.
  void SetCordoned(bool cordoned);
  bool cordoned() const { return cordoned_; }
  // Draining (node_drain.h): as cordoned, for good, and apart from the GPU monitor's cordon (which
  // it may lift). Leases held go on.
  void SetDraining();
  bool draining() const { return draining_; }
  // Stops worker `worker` as KillWorker does, remembering `reason` as its ExitReason.
  bool StopWorker(const WorkerId& worker, const std::string& reason, bool out_of_memory = false);
  // Why the node stopped worker `worker` (QuarantineGpu, StopWorker); nullopt for any other
  // exit. The latest few hundred are kept.
  std::optional<WorkerExit> ExitReason(const WorkerId& worker) const;
  // Every held lease's worker, for the memory monitor (memory_monitor.h).
  std::vector<KillCandidate> Leased() const;
  std::vector<GpuLease> GpuLeases() const;

  // Available amounts of every resource the node has, GPU ids in use and quarantined.
  ResourceReport Report() const override;
  LeaseManagerSnapshot Snapshot() const;

 private:
  struct Request;

  void Dispatch();
  void ScheduleDispatch();
  void ArmGraceTimer();
  // Takes the resources and asks the pool for a worker.
  void StartGrant(uint64_t id, Request& request);
  void OnWorkerReady(uint64_t id, const WorkerAddress& worker);
  void OnWorkerFailed(uint64_t id, kj::Exception&& exception);
  void OnRequestDropped(uint64_t id);
  void OnLeasedWorkerExit(const WorkerId& worker, const std::string& why);
  // Ends lease `lease_id` here: its resources come back and a later ReturnLease of it is a no-op.
  void EndLease(uint64_t lease_id);
  void Release(const worker::scheduling::Allocation& allocation);
  LeaseSpilled SpillTarget(const NodeId& node) const;
  worker::scheduling::TimePoint Now() const;
  void taskFailed(kj::Exception&& exception) override;

  struct Lease {
    WorkerId worker;
    worker::scheduling::Allocation allocation;
    bool detached = false;
    int32_t pid = 0;
    bool retriable = false;
  };
  // The CUDA_VISIBLE_DEVICES and memory-limit variables of a worker holding `allocation`.
  std::string VisibleDevices(const worker::scheduling::Allocation& allocation) const;
  WorkerEnv GpuEnv(const worker::scheduling::Allocation& allocation) const;
  // The GPU ids of a lease: its allocation's, or those lent from its placement-group bundle.
  std::vector<uint32_t> GpuIdsOf(const worker::scheduling::Allocation& allocation) const;
  // The GPU share of a lease (its GPU, or its bundle's GPU resource): 0 when none.
  double GpuAmountOf(const worker::scheduling::Allocation& allocation) const;
  // A lease asking for a bundle's GPU (GPU_group_<i>_<hex>, or GPU_group_<hex> for any bundle)
  // gets ids of that bundle's reserved GPUs: whole ones for a whole amount, a shared one for a
  // fraction (lease_manager_bundles.cc). Given back by ReturnBundleGpus (Release calls it).
  void LendBundleGpus(const worker::scheduling::Allocation& allocation);
  void ReturnBundleGpus(uint64_t allocation_id);

  LeaseManagerOptions options_;
  worker::scheduling::NodeResources resources_;
  worker::scheduling::LeaseQueue queue_;
  WorkerPool& pool_;
  kj::Timer& timer_;

  // Event-loop confined.
  RemoteNodes remote_;
  std::map<uint64_t, std::unique_ptr<Request>> requests_;  // queued or granting, by request id
  std::map<uint64_t, Lease> leases_;
  std::map<WorkerId, uint64_t> lease_of_worker_;
  struct ReservedBundle {
    uint32_t index = 0;
    worker::scheduling::Allocation allocation;
    worker::scheduling::ResourceSet committed;  // the formatted names, once committed
    std::map<uint32_t, worker::scheduling::Amount> gpu_used;  // of allocation.gpu_ids, lent out
  };
  struct BundleGpuLoan {
    PlacementGroupId group;
    uint32_t index = 0;
    std::vector<uint32_t> ids;
    worker::scheduling::Amount amount;  // per id: the fraction, or 1 for each whole id
  };
  std::map<uint64_t, BundleGpuLoan> bundle_gpu_loans_;  // by allocation id
  std::map<PlacementGroupId, std::vector<ReservedBundle>> bundles_;
  std::set<uint64_t> ended_leases_;  // ended here and not returned yet; the latest few
  bool cordoned_ = false;
  bool draining_ = false;
  bool Closed() const { return cordoned_ || draining_; }  // nothing new is granted here
  std::function<void()> on_queued_;
  std::set<uint32_t> quarantined_;  // GPU ids
  worker::scheduling::NodeResources none_;  // what a closed node offers new requests
  std::map<WorkerId, WorkerExit> exit_reasons_;
  std::vector<WorkerId> exit_reason_order_;
  uint64_t next_request_id_ = 1;
  uint64_t next_lease_id_ = 1;
  bool dispatch_scheduled_ = false;
  std::optional<worker::scheduling::TimePoint> grace_timer_at_;
  // Null once this is destroyed: the cancel hooks attached to callers' promises check it.
  std::shared_ptr<LeaseManager*> self_;
  kj::TaskSet tasks_;  // last: cancelled first
};

}  // namespace airt::worker
