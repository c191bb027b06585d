// The cluster's demand as the autoscaler reads it (docs/autoscaler.md "Demand"): the alive
// nodes' queued lease shapes, the actors no alive node can hold now, the pending placement groups
// (whole, with their strategy) and the standing request_resources call. Values only, built from
// the head's tables by Collect; the head numbers each change (HeadServer::waitDemand).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/proto/cluster.capnp.h"
#include "head/internal/placement_group_table.h"
#include "head/internal/records.h"

namespace airt::head::internal {

struct PendingGroupDemand {
  PlacementGroupId id;
  PlacementStrategy strategy = PlacementStrategy::kPack;
  std::vector<std::vector<Resource>> bundles;
  friend bool operator==(const PendingGroupDemand&, const PendingGroupDemand&) = default;
};

// request_resources: bundles, and per bundle the labels its node must carry (may be shorter).
struct ResourceRequest {
  std::vector<std::vector<Resource>> bundles;
  std::vector<std::vector<Label>> selectors;
  friend bool operator==(const ResourceRequest&, const ResourceRequest&) = default;
};

struct DemandRecord {
  std::vector<ShapeCount> queued;          // summed over alive nodes, by shape
  std::vector<ShapeCount> pending_actors;  // by shape
  std::vector<PendingGroupDemand> pending_groups;  // in creation order
  ResourceRequest requested;
  friend bool operator==(const DemandRecord&, const DemandRecord&) = default;
};

// Adds `count` of the shape to `shapes`, merging with an equal shape (resources compared as a
// set: the order they are listed in does not matter).
void AddShape(std::vector<ShapeCount>& shapes, std::vector<Resource> resources,
              std::string accelerator_type, uint32_t count);

// The demand of these tables: `waiting_actors` are the actors placeActor answered waiting for
// (their records), `groups` the groups not REMOVED (only the PENDING ones count).
DemandRecord CollectDemand(const std::vector<NodeView>& nodes,
                           const std::vector<ActorRecord>& waiting_actors,
                           const std::vector<const PlacementGroupRecord*>& groups,
                           const ResourceRequest& requested);

// A requestResources message: at most 4096 bundles, each as ParseResources, at most as many
// selectors as bundles, label keys non-empty, each selector a Ray label_selector dict that
// sched::ParseLabelSelector takes ("v", "!v", "in(a,b)", "!in(a,b)").
Result<ResourceRequest> ParseResourceRequest(proto::Head::RequestResourcesParams::Reader params);

// The node types an autoscaler published (its KV key autoscaler/node_types: a line per type,
// "<name>\t<resource>=<amount>,...\t<label>=<value>,..."), as nodes with only `total` and
// `labels` set. Lines that do not parse are skipped.
std::vector<NodeInfo> ParseNodeTypes(std::string_view text);

// Whether one of `types` holds `resources` with the accelerator type (label accelerator_type or
// ray.io/accelerator-type); the name of the first that does, else "".
std::string NodeTypeHolding(const std::vector<NodeInfo>& types,
                            const std::vector<Resource>& resources,
                            const std::string& accelerator_type);

// Whether nodes of `types` (as many of each as the group has bundles, empty) could hold the
// group: then a group no alive node can hold is demand for the autoscaler, not infeasible.
bool NodeTypesHoldGroup(const std::vector<NodeInfo>& types, PlacementStrategy strategy,
                        const std::vector<std::vector<Resource>>& bundles,
                        const std::vector<sched::LabelSelector>& selectors);

void FillDemand(const DemandRecord& demand, uint64_t version, proto::Demand::Builder out);

// The standing request_resources call's row in the MetadataStore (a requestResources message),
// so that a restarted head keeps the autoscaler's demand floor. No row: no standing request.
inline constexpr std::string_view kResourceRequestKey = "demand:requested";
std::string EncodeResourceRequestRow(const ResourceRequest& request);
// kInternal for a row that is not a valid requestResources message.
Result<ResourceRequest> DecodeResourceRequestRow(std::string_view bytes);

}  // namespace airt::head::internal
