// The head's placement groups (docs/cluster.md "Placement groups"): every group the head knows, in
// creation order, found by id or by name within its namespace. Rows go through the MetadataStore
// ("pg:<group id hex>", a proto::PlacementGroupInfo message) as Changes (change.h); why a pending
// group waits stays in memory. Confined to the head's loop thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/scheduling_strategy.h"
#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "common/status.h"
#include "head/internal/change.h"
#include "head/internal/records.h"
#include "head/metadata_store.h"

namespace airt::head::internal {

// In the schema's order (proto::PlacementStrategy, proto::PlacementGroupState).
enum class PlacementStrategy : uint8_t { kPack, kSpread, kStrictPack, kStrictSpread };
enum class GroupState : uint8_t { kPending, kCreated, kRemoved, kRescheduling };

struct PlacementGroupRecord {
  PlacementGroupId id;
  std::string name;  // "" for an unnamed group
  std::string ns;
  JobId job;
  PlacementStrategy strategy = PlacementStrategy::kPack;
  std::vector<std::vector<Resource>> bundles;  // each non-empty, amounts > 0
  // Ray 2.60's bundle_label_selector: bundle i only on a node whose labels match entry i (at
  // most one entry per bundle; missing ones are no constraint).
  std::vector<sched::LabelSelector> bundle_label_selector;
  GroupState state = GroupState::kPending;
  std::vector<NodeId> bundle_nodes;  // CREATED: one per bundle
  bool detached = false;
  uint64_t create_ms = 0;
  // Memory only, PENDING: why it waits, and whether no set of alive nodes could ever hold it.
  std::string pending_reason;
  bool infeasible = false;
};

// "PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"; "PENDING", "CREATED", "REMOVED", ...
const char* StrategyName(PlacementStrategy strategy);
const char* GroupStateName(GroupState state);

// A createPlacementGroup message: 1 to 4096 bundles, each of 1 to 256 resources (names as a
// node's, amounts finite and > 0, at least one per bundle), strategy in range, texts within bounds,
// jobId 4 bytes. The head's own fields (groupId, state, bundleNodes, reasons) are not read.
Result<PlacementGroupRecord> ParsePlacementGroupSpec(proto::PlacementGroupInfo::Reader info);
void FillPlacementGroupInfo(const PlacementGroupRecord& group,
                            proto::PlacementGroupInfo::Builder out);
// registerNode's heldBundles: group ids of 18 bytes, each listed once, at most 4096 indices each
// (below 4096).
Result<std::vector<std::pair<PlacementGroupId, std::vector<uint32_t>>>> ParseHeldBundles(
    capnp::List<proto::HeldBundles>::Reader held);

class PlacementGroupTable {
 public:
  // `store` must outlive the table.
  explicit PlacementGroupTable(MetadataStore& store) : store_(store) {}

  // Reads the rows an earlier head left; a corrupt row is logged and skipped. A group CREATED or
  // RESCHEDULING there is read back so, on its nodes: those nodes report what they hold when
  // they register again (PlacementGroupManager::OnNodeRegistered), and bundles nobody holds are
  // reserved again. The store's error when it cannot be read.
  Status Load();

  // Adds `group` PENDING with a new id. kAlreadyExists when its name is taken in its namespace by
  // a group not REMOVED.
  Result<Staged<PlacementGroupId>> Create(PlacementGroupRecord group);
  // Records bundle i of the group on placed[i]: CREATED once every bundle has a node, else
  // RESCHEDULING still. kNotFound; kFailedPrecondition when it is not PENDING or RESCHEDULING, or
  // a bundle of `placed` has a node already.
  Result<Change> MarkPlaced(const PlacementGroupId& id, const std::map<uint32_t, NodeId>& placed);
  // The bundles of a CREATED or RESCHEDULING group for which `lost_here(index, node)` is true
  // (their node died, or does not hold them) lose their node (the nil id): the group is
  // RESCHEDULING, `why` its pending reason. An empty change when none is. kNotFound.
  Result<Change> MarkLost(const PlacementGroupId& id,
                          const std::function<bool(size_t, const NodeId&)>& lost_here,
                          const std::string& why);
  // Records it REMOVED (an empty change when it is already). kNotFound.
  Result<Change> MarkRemoved(const PlacementGroupId& id);
  // Memory only: why a pending group waits.
  void SetPending(const PlacementGroupId& id, std::string reason, bool infeasible);

  std::optional<PlacementGroupRecord> Find(const PlacementGroupId& id) const;
  // The entry, valid until the table next changes; null when unknown.
  const PlacementGroupRecord* Get(const PlacementGroupId& id) const;
  std::vector<PlacementGroupRecord> List() const;  // creation order
  // The groups not REMOVED, creation order; valid until the table next changes.
  std::vector<const PlacementGroupRecord*> Live() const;
  // PENDING and RESCHEDULING ones, creation order.
  std::vector<PlacementGroupId> Pending() const;
  // Per node, what the groups CREATED or RESCHEDULING hold there: the bundle resources their
  // bundles add to it (common/bundle_resources.h CommittedBundleResources), and the bundles'
  // own resources in placement_group_policy.h's units. Kept as groups change, not recounted.
  const std::map<NodeId, std::map<std::string, double>>& bundle_resources() const {
    return bundle_resources_;
  }
  const std::map<NodeId, std::map<std::string, int64_t, std::less<>>>& reserved_units() const {
    return reserved_units_;
  }

 private:
  static std::string RowKey(const PlacementGroupId& id);
  void Apply(uint64_t seq, PlacementGroupRecord group);
  // Adds (sign 1) or takes away (-1) what `group`'s placed bundles hold on their nodes.
  void Account(const PlacementGroupRecord& group, int sign);

  MetadataStore& store_;
  std::map<uint64_t, PlacementGroupRecord> by_seq_;  // creation order
  std::map<PlacementGroupId, uint64_t> seq_of_;
  std::set<uint64_t> live_;  // the seqs of the groups not REMOVED
  uint64_t next_seq_ = 1;
  std::map<NodeId, std::map<std::string, double>> bundle_resources_;
  std::map<NodeId, std::map<std::string, int64_t, std::less<>>> reserved_units_;
};

}  // namespace airt::head::internal
