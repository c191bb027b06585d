// PlacementGroupManager's recovery (docs/cluster.md "Placement groups"): the bundles of a dead
// node reserved again elsewhere, and the head's records and a re-registering node's reservations
// brought to agree after the head restarted.
#include <set>
#include <utility>

#include "common/logging.h"
#include "head/internal/placement_group_manager.h"

namespace airt::head::internal {

void PlacementGroupManager::OnNodesMayHaveDied() {
  std::set<NodeId> alive;
  for (const NodeView& v : nodes_.View()) {
    if (v.alive) alive.insert(v.info.id);
  }
  std::vector<PlacementGroupId> hit;
  for (const PlacementGroupRecord* group : table_.Live()) {
    if (group->state != GroupState::kCreated && group->state != GroupState::kRescheduling) continue;
    for (const NodeId& node : group->bundle_nodes) {
      if (!node.IsNil() && alive.count(node) == 0) {
        hit.push_back(group->id);
        break;
      }
    }
  }
  if (hit.empty()) return;
  tasks_.add(commit_([this, hit, alive]() -> Result<Change> {
               Change change;
               for (const PlacementGroupId& id : hit) {
                 Result<Change> lost = table_.MarkLost(
                     id, [&](size_t, const NodeId& node) { return alive.count(node) == 0; },
                     "a node holding bundles of it died");
                 if (lost.ok()) change.Add(std::move(*lost));
               }
               return change;
             }).then([this, hit](Status s) {
    if (!s.ok()) {
      AIRT_LOG(WARNING) << "recording the placement groups of dead nodes: " << s.ToString();
      return;
    }
    for (const PlacementGroupId& id : hit) {
      AIRT_LOG(INFO) << "placement group " << id.Hex() << " RESCHEDULING: a node holding some "
                     << "of its bundles died; those are reserved again";
    }
    Schedule();
  }));
}

void PlacementGroupManager::OnNodeRegistered(
    const NodeId& node,
    const std::vector<std::pair<PlacementGroupId, std::vector<uint32_t>>>& held) {
  std::set<std::pair<PlacementGroupId, uint32_t>> holds;
  CancelPlan release;
  std::string address;
  std::optional<NodeView> view = nodes_.Find(node);
  if (view) address = view->info.address + ":" + std::to_string(view->info.node_port);
  for (const auto& [id, indices] : held) {
    if (in_flight_.count(id) != 0) continue;  // being reserved: its own phases decide
    const PlacementGroupRecord* group = table_.Get(id);
    std::vector<uint32_t> stale;
    for (uint32_t index : indices) {
      bool recorded = group != nullptr &&
                      (group->state == GroupState::kCreated ||
                       group->state == GroupState::kRescheduling) &&
                      index < group->bundle_nodes.size() && group->bundle_nodes[index] == node;
      if (recorded) {
        holds.insert({id, index});
      } else {
        stale.push_back(index);
      }
    }
    if (stale.empty()) continue;
    AIRT_LOG(INFO) << "node " << node.Hex().substr(0, 8) << " holds " << stale.size()
                   << " bundles of placement group " << id.Hex() << " that the head does not "
                   << "record there (" << (group == nullptr ? "unknown" : GroupStateName(group->state))
                   << "): releasing them";
    CancelOn(id, CancelPlan{{address, stale}});
  }
  std::vector<PlacementGroupId> missing;
  for (const PlacementGroupRecord* group : table_.Live()) {
    if (group->state != GroupState::kCreated && group->state != GroupState::kRescheduling) continue;
    if (in_flight_.count(group->id) != 0) continue;
    for (size_t i = 0; i < group->bundle_nodes.size(); ++i) {
      if (group->bundle_nodes[i] == node &&
          holds.count({group->id, static_cast<uint32_t>(i)}) == 0) {
        missing.push_back(group->id);
        break;
      }
    }
  }
  if (missing.empty()) return;
  tasks_.add(commit_([this, node, holds, missing]() -> Result<Change> {
               Change change;
               for (const PlacementGroupId& id : missing) {
                 Result<Change> lost = table_.MarkLost(
                     id,
                     [&](size_t i, const NodeId& on) {
                       return on == node &&
                              holds.count({id, static_cast<uint32_t>(i)}) == 0;
                     },
                     "its node registered again without them");
                 if (lost.ok()) change.Add(std::move(*lost));
               }
               return change;
             }).then([this, missing, node](Status s) {
    if (!s.ok()) {
      AIRT_LOG(WARNING) << "recording the bundles a node lost: " << s.ToString();
      return;
    }
    for (const PlacementGroupId& id : missing) {
      AIRT_LOG(INFO) << "placement group " << id.Hex() << " RESCHEDULING: node "
                     << node.Hex().substr(0, 8) << " registered without some of its bundles";
    }
    Schedule();
  }));
}

}  // namespace airt::head::internal
