// The head's placement groups at work (docs/cluster.md "Placement groups"): the table, the
// two-phase reservation of a group's bundles over its nodes, and the pending groups tried again as
// nodes join and heartbeat. One group is reserved at a time, in creation order, so that two groups
// that each fit alone never end up both half-reserved (no deadlock); a group whose nodes refuse
// (a prepare failed: that node's resources were gone, or it could not be reached) or fail between
// the phases has every prepared bundle cancelled and waits for the next heartbeat to try again.
// Confined to the head's loop thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
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

  // The job finished: its groups that are not detached are removed.
  void OnJobFinished(const JobId& job);
  // The node heartbeated (its report now counts the reservations made before it) or registered:
  // pending groups are tried again.
  void OnNodeReport(const NodeId& node);
  // `view` with each node's totals holding the bundle resources committed there
  // (common/bundle_resources.h), so that the lease and actor schedulers see them as the node's.
  std::vector<NodeView> WithBundleResources(std::vector<NodeView> view) const;

 private:
  // Reserves the first pending group that fits the nodes now, if none is being reserved.
  void Schedule();
  // Prepare on every node of `on`, then commit on each; resolves true when the group is CREATED.
  kj::Promise<bool> Reserve(PlacementGroupRecord group, std::vector<NodeId> on,
                            std::map<NodeId, std::string> addresses);
  void CancelOn(const PlacementGroupId& id, const std::map<NodeId, std::string>& addresses);
  // What each alive node can give now, as the head estimates it.
  std::vector<BundleNode> FreeNodes(const std::vector<NodeView>& view) const;
  void taskFailed(kj::Exception&& exception) override;

  Clock& clock_;
  const NodeTable& nodes_;
  ActorTable& actors_;
  const JobTable& jobs_;
  NodeConnector* connector_;
  CommitFn commit_;
  PlacementGroupTable table_;
  bool reserving_ = false;
  std::set<PlacementGroupId> warned_infeasible_;
  // Per node, bundles reserved and given back by this head since the node's last report.
  std::map<NodeId, BundleUnits> reserved_since_report_, released_since_report_;
  std::multimap<PlacementGroupId, kj::Own<kj::PromiseFulfiller<PlacementGroupRecord>>> waiters_;
  kj::TaskSet tasks_;  // last: cancelled first
};

}  // namespace airt::head::internal
