// The autoscaler (docs/autoscaler.md): hears of demand from the head as it changes (one
// Head.waitDemand call kept pending) and of nodes joining, dying and leaving (one
// Head.waitClusterChange call, membership only), reads the cluster (clusterView, listActors,
// listPlacementGroups), decides with Decide (planner.h) and launches and stops nodes through a
// NodeProvider. Failed launches (the provider's error, a node that never registered within
// launch_timeout_ms, or that died soon after) are retried with backoff per node type. What it is
// doing is written to the head's KV (namespace "autoscaler", key "status"), which `airt status`
// prints, and the node types to key "node_types" (the head's infeasibility rule reads them).
// Talks to the head only over RPC. Runs on one KJ event loop; every method is called on its
// thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <kj/async-io.h>
#include <kj/async.h>
#include <kj/timer.h>

#include "autoscaler/config.h"
#include "autoscaler/planner.h"
#include "autoscaler/provider.h"
#include "common/proto/cluster.capnp.h"
#include "common/proto/node.capnp.h"

namespace airt::autoscaler {

// How the autoscaler reaches a node's Node service (to evacuate its primary objects before it
// stops it). On the autoscaler's loop; calls on the client fail (kUnavailable) when the node
// cannot be reached.
class NodeConnector {
 public:
  virtual ~NodeConnector() = default;
  virtual proto::Node::Client Connect(const std::string& address) = 0;
};

// TCP through `network` (the loop's); each connection is kept until the next few replace it.
std::unique_ptr<NodeConnector> MakeTcpNodeConnector(kj::Network& network);

struct AutoscalerOptions {
  // How often idle nodes and launches are checked besides each demand change.
  int64_t tick_ms = 250;
  // A launched node that has not registered by then is a failed launch.
  int64_t launch_timeout_ms = 120'000;
  // Backoff after a failed launch of a node type: doubles from min to max, reset when a node of
  // the type registers.
  int64_t min_backoff_ms = 500;
  int64_t max_backoff_ms = 60'000;
  // A launched node that dies within this of registering counts as a failed launch.
  int64_t early_death_ms = 60'000;
  // Evacuating an idle node's primary objects before it stops (Node.evacuateObjects): how the
  // autoscaler reaches nodes (null: a node with primary objects is never stopped), the deadline
  // of one evacuation, and how long a node whose objects could not all be moved is spared before
  // the next try.
  NodeConnector* nodes = nullptr;
  int64_t evacuation_deadline_ms = 60'000;
  int64_t evacuation_retry_ms = 5'000;
};

struct LaunchRecord {
  std::string launch_id;
  std::string type;
  std::string reason;
  int64_t launched_ms = 0;
  std::string node_id;  // hex, once registered
  int64_t registered_ms = 0;
};

struct FailedLaunch {
  std::string launch_id;
  std::string type;
  std::string error;
  int64_t at_ms = 0;
  std::string when;  // wall clock, "HH:MM:SS UTC"
};

struct StopRecord {
  std::string launch_id;
  std::string node_id;
  std::string type;
  std::string reason;
  int64_t at_ms = 0;
  std::string when;  // wall clock, "HH:MM:SS UTC"
};

// For tests, benchmarks and `airt status`.
struct AutoscalerSnapshot {
  uint64_t demand_version = 0;
  uint64_t rounds = 0;
  std::vector<LaunchRecord> launches;    // every launch not stopped or failed
  std::vector<FailedLaunch> failed;      // the latest 20
  std::vector<StopRecord> stopped;       // the latest 20
  uint64_t launched_total = 0, failed_total = 0, stopped_total = 0;
  std::vector<std::string> pending;      // pending demand, by shape
  std::vector<std::string> infeasible;   // from the last plan
  std::vector<std::string> held_by_limits;
  std::vector<std::string> backoff;      // node types waiting to launch again, and until when
  // Idle nodes kept because their primary objects could not all be moved (the latest 20), and
  // the nodes being evacuated now.
  std::vector<std::string> spared;
  std::vector<std::string> evacuating;
};

class Autoscaler {
 public:
  // `provider` and `timer` must outlive it; `now_ms` is a monotonic clock in ms.
  Autoscaler(ClusterConfig config, NodeProvider& provider, proto::Head::Client head,
             kj::Timer& timer, std::function<int64_t()> now_ms, AutoscalerOptions options);

  // Publishes the node types, then reacts to each demand change and tick until dropped. Rejects
  // only if the head cannot be reached for good (each failed round is logged and retried).
  kj::Promise<void> Run();
  // One round: read the cluster, decide, act, publish the status.
  kj::Promise<void> Reconcile();
  // Stops every node it launched (airt down).
  void TerminateAll();

  AutoscalerSnapshot Snapshot() const { return snapshot_; }
  // The status block `airt status` prints.
  std::string StatusText() const;

 private:
  kj::Promise<void> WatchDemand();
  // Reconciles when a node joins, dies or leaves (the head's cluster change feed, membership
  // only), besides the tick.
  kj::Promise<void> WatchMembership();
  static constexpr uint32_t kMembershipWaitMs = 10'000;
  kj::Promise<void> Tick();
  kj::Promise<void> RunRound();
  void Act(const std::vector<NodeNow>& nodes, const Plan& plan, int64_t now);
  void Fail(const std::string& launch_id, std::string error, int64_t now);
  // Stops the node of `stop` (its Node service at `address`) through the provider and records
  // why.
  void StopNode(const Stop& stop, const std::string& address, int64_t now);
  // `node` has primary objects: moves them (Node.evacuateObjects) to nodes not in `leaving`
  // (nodes stopping, being evacuated or stopped lately), then stops it if it is still idle;
  // spares it for evacuation_retry_ms when some could not be moved.
  void EvacuateThenStop(const NodeNow& node, const Stop& stop, std::vector<std::string> leaving,
                        int64_t now);
  void Spare(const std::string& node_id, const std::string& why, int64_t now);
  kj::Promise<void> Publish();

  ClusterConfig config_;
  NodeProvider& provider_;
  proto::Head::Client head_;
  kj::Timer& timer_;
  std::function<int64_t()> now_ms_;
  AutoscalerOptions options_;

  Demand demand_;
  uint64_t demand_version_ = 0;
  uint64_t cluster_epoch_ = 0;  // the cluster change feed's, as last answered
  uint64_t cluster_version_ = 0;
  std::map<std::string, LaunchRecord> launches_;      // by launch id
  std::map<std::string, int64_t> idle_since_;         // by node id (hex)
  std::map<std::string, uint32_t> failures_in_a_row_;  // by node type
  std::map<std::string, int64_t> backoff_until_;      // by node type
  std::map<std::string, std::string> evacuating_;     // node id (hex) -> its address
  std::map<std::string, int64_t> spared_until_;       // by node id (hex)
  std::map<std::string, int64_t> stopped_at_;         // by Node service address, the last minute
  uint64_t next_launch_ = 0;
  bool running_round_ = false;
  bool round_again_ = false;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> round_waiters_;
  AutoscalerSnapshot snapshot_;
  std::string published_;
  class LogErrors final : public kj::TaskSet::ErrorHandler {
    void taskFailed(kj::Exception&& exception) override;
  };
  LogErrors log_errors_;
  kj::TaskSet detached_{log_errors_};  // the rounds in flight; last, so cancelled first
};

}  // namespace airt::autoscaler
