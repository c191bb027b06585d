// Placement groups in the C++ API (Ray's ray/api placement groups); airt/api.h includes it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "airt/scheduling_strategies.h"

namespace airt {

// Placement groups: gang reservations of resource bundles (Ray's C++ PlacementGroup API;
// docs/cluster.md "Placement groups"). The head reserves every bundle of a group or none, on the
// nodes its strategy names; tasks and actors run inside one through SetPlacementGroup.
enum class PlacementStrategy { PACK = 0, SPREAD = 1, STRICT_PACK = 2, STRICT_SPREAD = 3 };
enum class PlacementGroupState { PENDING = 0, CREATED = 1, REMOVED = 2, RESCHEDULING = 3,
                                 UNRECOGNIZED = 4 };

struct PlacementGroupCreationOptions {
  std::string name;  // "": unnamed; else unique in the job's namespace while not removed
  std::vector<std::map<std::string, double>> bundles;  // each asks for some positive amount
  PlacementStrategy strategy = PlacementStrategy::PACK;
  bool detached = false;  // outlives its job (Ray's lifetime="detached")
  // Ray 2.60's bundle_label_selector: bundle i only on a node whose labels match entry i (the
  // label_selector forms of airt/scheduling_strategies.h); fewer entries than bundles: the rest
  // go anywhere. InvalidArgumentError for more entries than bundles or a malformed one.
  std::vector<LabelSelector> bundle_label_selector;
};

// A handle: the group's id and what it was created with, as read when the handle was made.
class PlacementGroup {
 public:
  PlacementGroup() = default;
  PlacementGroup(std::string id, PlacementGroupCreationOptions options,
                 PlacementGroupState state = PlacementGroupState::PENDING)
      : id_(std::move(id)), options_(std::move(options)), state_(state) {}
  const std::string& ID() const { return id_; }  // hex, as GetID
  std::string GetID() const { return id_; }
  std::string GetName() const { return options_.name; }
  std::vector<std::map<std::string, double>> GetBundles() const { return options_.bundles; }
  PlacementStrategy GetStrategy() const { return options_.strategy; }
  PlacementGroupState GetState() const { return state_; }
  bool Empty() const { return id_.empty(); }
  // Whether every bundle is reserved within `timeout_seconds` (Ray's Wait). Throws
  // airt::Exception when the group was removed.
  bool Wait(int timeout_seconds) const;

 private:
  std::string id_;
  PlacementGroupCreationOptions options_;
  PlacementGroupState state_ = PlacementGroupState::PENDING;
};

// Records the group with the head and returns at once; Wait for it to be reserved. Throws
// airt::Exception for a bad bundle or a name taken (the message says which).
PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options);
// Gives every bundle back and stops the group's tasks and actors. Throws for an unknown id.
void RemovePlacementGroup(const std::string& placement_group_id);
bool WaitPlacementGroupReady(const std::string& placement_group_id, int64_t timeout_seconds);
// An empty handle (Empty()) when there is no such group.
PlacementGroup GetPlacementGroupById(const std::string& id);
// The group not removed with this name in the job's namespace; empty when none.
PlacementGroup GetPlacementGroup(const std::string& name);
std::vector<PlacementGroup> GetAllPlacementGroups();

}  // namespace airt
