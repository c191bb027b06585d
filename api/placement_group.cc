// The C++ placement-group API (airt/driver.h): the core worker's placement-group calls, with
// Ray's names.
#include <algorithm>

#include "airt/driver.h"
#include "api/core_worker/core_worker.h"
#include "api/internal/driver_state.h"
#include "api/internal/error_kinds.h"
#include "common/bundle_resources.h"

namespace airt {
namespace {

[[noreturn]] void Throw(const Status& status) { internal::ThrowStatus(status); }

PlacementGroupId GroupIdOf(const std::string& hex) {
  Result<PlacementGroupId> id = PlacementGroupId::FromHex(hex);
  if (!id.ok()) Throw(InvalidArgument("not a placement group id: '" + hex + "'"));
  return *id;
}

PlacementGroup HandleOf(const internal::PlacementGroupEntry& e) {
  PlacementGroupCreationOptions options{e.name, e.bundles,
                                        static_cast<PlacementStrategy>(e.strategy), e.detached,
                                        {}};
  return PlacementGroup(e.id, std::move(options), static_cast<PlacementGroupState>(e.state));
}

}  // namespace

namespace internal {

std::vector<PlacementGroupEntry> ListPlacementGroups() {
  Result<std::vector<core_worker::CoreWorker::PlacementGroupView>> listed =
      CurrentCore()->ListPlacementGroups();
  if (!listed.ok()) Throw(listed.status());
  std::vector<PlacementGroupEntry> out;
  for (const auto& v : *listed) {
    PlacementGroupEntry e;
    e.id = v.id.Hex();
    e.name = v.name;
    e.ns = v.ns;
    e.job_id = v.job.Hex();
    e.strategy = v.strategy;
    e.bundles = v.bundles;
    e.state = v.state;
    for (const NodeId& n : v.bundle_nodes) e.bundle_nodes.push_back(n.Hex());
    e.detached = v.detached;
    e.pending_reason = v.pending_reason;
    e.infeasible = v.infeasible;
    out.push_back(std::move(e));
  }
  return out;
}

bool WaitPlacementGroupMs(const std::string& id, int64_t timeout_ms) {
  Result<bool> ready = CurrentCore()->WaitPlacementGroup(GroupIdOf(id), timeout_ms);
  if (!ready.ok()) Throw(ready.status());
  return *ready;
}

std::map<std::string, double> InPlacementGroup(const std::map<std::string, double>& resources,
                                               const std::string& group_hex, int index) {
  if (group_hex.empty()) return resources;
  return ResourcesInBundle(group_hex, index, resources);
}

}  // namespace internal

bool PlacementGroup::Wait(int timeout_seconds) const {
  return WaitPlacementGroupReady(id_, timeout_seconds);
}

PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options) {
  core_worker::CoreWorker::PlacementGroupSpec spec;
  spec.name = options.name;
  spec.bundles = options.bundles;
  spec.strategy = static_cast<int>(options.strategy);
  spec.detached = options.detached;
  if (options.bundle_label_selector.size() > options.bundles.size()) {
    throw InvalidArgumentError("bundle_label_selector has " +
                               std::to_string(options.bundle_label_selector.size()) +
                               " entries for " + std::to_string(options.bundles.size()) +
                               " bundles");
  }
  for (const LabelSelector& selector : options.bundle_label_selector) {
    spec.bundle_label_selector.push_back(internal::CoreStrategy({}, selector).label_selector);
  }
  Result<PlacementGroupId> id = internal::CurrentCore()->CreatePlacementGroup(spec);
  if (!id.ok()) Throw(id.status());
  return PlacementGroup(id->Hex(), options);
}

void RemovePlacementGroup(const std::string& placement_group_id) {
  Status removed = internal::CurrentCore()->RemovePlacementGroup(GroupIdOf(placement_group_id));
  if (!removed.ok()) Throw(removed);
}

bool WaitPlacementGroupReady(const std::string& placement_group_id, int64_t timeout_seconds) {
  return internal::WaitPlacementGroupMs(placement_group_id,
                                       timeout_seconds < 0 ? -1 : timeout_seconds * 1000);
}

PlacementGroup GetPlacementGroupById(const std::string& id) {
  for (const internal::PlacementGroupEntry& e : internal::ListPlacementGroups()) {
    if (e.id == id) return HandleOf(e);
  }
  return PlacementGroup();
}

PlacementGroup GetPlacementGroup(const std::string& name) {
  std::string ns = internal::CurrentCore()->ns();
  for (const internal::PlacementGroupEntry& e : internal::ListPlacementGroups()) {
    if (e.name == name && e.ns == ns && e.state != static_cast<int>(PlacementGroupState::REMOVED)) {
      return HandleOf(e);
    }
  }
  return PlacementGroup();
}

std::vector<PlacementGroup> GetAllPlacementGroups() {
  std::vector<PlacementGroup> out;
  for (const internal::PlacementGroupEntry& e : internal::ListPlacementGroups()) {
    out.push_back(HandleOf(e));
  }
  return out;
}

}  // namespace airt
