// The head's placement groups at work (docs/cluster.md "Placement groups"): the table, the
// two-phase reservation of a group's bundles over its nodes, and the pending groups tried again as
// nodes join and heartbeat. Pending groups are taken in creation order; several are reserved at
// once when they fit the nodes together by the head's estimate (each decided against what the
// ones before it take), so two groups that each fit alone never end up both half-reserved
// waiting for each other. A group whose nodes refuse (a prepare failed: that node's resources
// were gone, or it could not be reached) or fail between the phases has every bundle it prepared
// cancelled and waits for the next heartbeat to try again. A node that dies takes its bundles
// along: their groups are RESCHEDULING and those bundles only are reserved again
// (placement_group_recovery.cc), as are the bundles a node re-registering does not hold.
// Confined to the head's loop thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <variant>
#include <vector>

#include <kj/async.h>

#include "common/ids.h"
#include "common/status.h"
#include "head/internal/actor_table.h"
#include "head/internal/change.h"
#include "head/internal/job_table.h"
#include "head/internal/node_connector.h"
#include "head/internal/node_table.h"
#include "head/internal/placement_group_policy.h"
#include "head/internal/placement_group_table.h"

namespace airt::head::internal {

class PlacementGroupManager final : private kj::TaskSet::ErrorHandler {
 public:
  // The head's write queue (HeadServer::Commit): stages, writes and applies one change.
  using CommitFn = std::function<kj::Promise<Status>(std::function<Result<Change>()>)>;

  // The tables must outlive the manager. `connector` null: groups stay PENDING ("the head has no
  // connection to its nodes").
  PlacementGroupManager(MetadataStore& store, Clock& clock, const NodeTable& nodes,
                        ActorTable& actors, const JobTable& jobs, NodeConnector* connector,
                        CommitFn commit);
  ~PlacementGroupManager() noexcept;

  Status Load() { return table_.Load(); }

  // Records the group PENDING and starts reserving it; resolves with its id once recorded.
  // kFailedPrecondition: its job is unknown or finished; kAlreadyExists: its name is taken.
  kj::Promise<Status> Create(PlacementGroupRecord spec, std::shared_ptr<PlacementGroupId> id);
  // Records it REMOVED, marks its actors DEAD, then cancels its bundles on their nodes (which stop
  // its workers). kNotFound: no such group.
  kj::Promise<Status> Remove(const PlacementGroupId& id);
  // Resolves once the group is CREATED, with its entry; rejects kFailedPrecondition when it is
  // or becomes REMOVED, kNotFound when unknown.
  kj::Promise<PlacementGroupRecord> Wait(const PlacementGroupId& id);
  // Wait calls pending now (those whose caller dropped the promise are not counted).
  size_t Waiting();
  std::vector<PlacementGroupRecord> List() const { return table_.List(); }
  // The groups not REMOVED, creation order; valid until the table next changes.
  std::vector<const PlacementGroupRecord*> Live() const { return table_.Live(); }

  // The autoscaler's node types (HeadServer::NodeTypes), read at each try: a group no alive node
  // can hold but nodes of these types could is not infeasible (it is the autoscaler's demand).
  void SetNodeTypes(std::function<std::vector<NodeInfo>()> types) {
    node_types_ = std::move(types);
  }

  // The job finished: its groups that are not detached are removed.
  void OnJobFinished(const JobId& job);
  // The node heartbeated (its report now counts the reservations made before it) or registered:
  // pending groups are tried again.
  void OnNodeReport(const NodeId& node);
  // The node registered holding `held` committed (group, bundle indices): the bundles of groups
  // not recorded CREATED or RESCHEDULING with that bundle on it are released there; the bundles
  // recorded on it that it does not hold are reserved again (their group RESCHEDULING). Groups
  // being reserved now are left alone.
  void OnNodeRegistered(const NodeId& node,
                        const std::vector<std::pair<PlacementGroupId, std::vector<uint32_t>>>& held);
  // Nodes may have died (the liveness check, an unregistration): the groups with bundles on dead
  // nodes turn RESCHEDULING and those bundles are reserved again on the alive nodes.
  void OnNodesMayHaveDied();
  // `view` with each node's totals holding the bundle resources committed there
  // (common/bundle_resources.h), so that the lease and actor schedulers see them as the node's.
  std::vector<NodeView> WithBundleResources(std::vector<NodeView> view) const;

 private:
  // The bundles still to reserve (all of a PENDING group, those without a node of a RESCHEDULING
  // one) and the node for each, or why they wait.
  using Placed = std::map<uint32_t, NodeId>;
  // Per Node service address, the bundle indices to cancel there (empty: all of the group).
  using CancelPlan = std::map<std::string, std::vector<uint32_t>>;
  std::variant<Placed, BundlesWait> Decide(const PlacementGroupRecord& group,
                                           const std::vector<BundleNode>& free) const;
  // Reserves the pending groups that fit the nodes now, in creation order, a few at a time.
  void Schedule();
  // Prepare on every node of `placed`, then commit on each; resolves true when recorded.
  kj::Promise<bool> Reserve(PlacementGroupId id, Placed placed,
                            std::map<NodeId, std::string> addresses);
  void CancelOn(const PlacementGroupId& id, const CancelPlan& plan);
  // Resolves the waiters of a group now CREATED.
  void Created(const PlacementGroupId& id);
  // What each alive node can give now, as the head estimates it.
  std::vector<BundleNode> FreeNodes(const std::vector<NodeView>& view) const;
  std::map<NodeId, std::string> Addresses() const;
  void taskFailed(kj::Exception&& exception) override;

  Clock& clock_;
  const NodeTable& nodes_;
  ActorTable& actors_;
  const JobTable& jobs_;
  NodeConnector* connector_;
  CommitFn commit_;
  PlacementGroupTable table_;
  // The groups being reserved, with what each takes from its nodes meanwhile.
  std::map<PlacementGroupId, std::map<NodeId, BundleUnits>> in_flight_;
  // A node refused a prepare: nothing more is tried before the next report.
  bool refused_since_report_ = false;
  std::set<PlacementGroupId> warned_infeasible_;
  std::function<std::vector<NodeInfo>()> node_types_;  // unset: none
  // Per node, bundles reserved and given back by this head since the node's last report.
  std::map<NodeId, BundleUnits> reserved_since_report_, released_since_report_;
  std::multimap<PlacementGroupId, kj::Own<kj::PromiseFulfiller<PlacementGroupRecord>>> waiters_;
  kj::TaskSet tasks_;  // last: cancelled first
};

}  // namespace airt::head::internal
