// The driver API's process-wide state, shared by its source files (api/driver.cc, which owns it;
// api/driver_objects.cc, driver_cluster.cc, placement_group.cc). Not a public header.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "airt/driver.h"
#include "airt/scheduling_strategies.h"
#include "common/ids.h"
#include "common/scheduling_strategy.h"

namespace airt {
namespace core_worker {
class CoreWorker;
struct GotObject;
struct ObjectError;
}  // namespace core_worker
namespace local {
class LocalRuntime;
}  // namespace local

namespace internal {

// The process's core worker: a driver's (Init) or a worker's own (EnterWorkerMode), kept alive
// while the caller holds it (a call racing Shutdown finishes on it). Throws UnavailableError
// before Init and after Shutdown, and in a worker whose core worker the API cannot use.
std::shared_ptr<core_worker::CoreWorker> CurrentCore();
// Config::local_mode's runtime, or null when the job runs on a cluster (or before Init).
local::LocalRuntime* CurrentLocal();
// Throws UnimplementedError: `what` is not available in local mode.
[[noreturn]] void ThrowLocalModeLacks(const std::string& what);
// The id in `binary`; InvalidArgumentError when it is not an object id's size.
ObjectId ObjectIdOf(const std::string& binary);
// The actor id in `binary`; InvalidArgumentError when it is not an actor id's size.
ActorId ActorIdOfBinary(const std::string& binary);
// Throws the exception of an object's error (its kind's type; what() names the function).
[[noreturn]] void ThrowObjectError(const core_worker::ObjectError& e);
// `strategy` and `label_selector` as the schedulers get them (api/scheduling_strategy.cc).
// InvalidArgumentError for a node id that is not hex, a malformed selector or expression.
sched::SchedulingStrategy CoreStrategy(const SchedulingStrategy& strategy,
                                       const LabelSelector& label_selector);
// A call's placement-group settings (SetPlacementGroup, SetSchedulingStrategy; airt/driver.h).
struct GroupChoice {
  std::string group;  // hex; "": none of its own
  int bundle_index = -1;
  bool capture_child_tasks = false;
  bool strategy_set = false;
  bool python = false;  // the call is a Python function's or class's
};
// What a call asks for in a placement group instead of `resources`: its own group's bundle, or,
// with no group and no strategy of its own, any bundle of the group the running task captures its
// children into (Ray's placement_group_capture_child_tasks, airt/internal/placement_group_call.h).
// A call that captures is sent through `wrapper` (null: not wrapped, local mode), so that its own
// children are captured too. `resources` unchanged when no group applies. UnimplementedError for
// capture asked of a Python call.
std::map<std::string, double> ResourcesInGroup(const std::map<std::string, double>& resources,
                                               const GroupChoice& choice, const char* wrapper,
                                               std::string* function, std::vector<Argument>* args);
// Sends the call to `*function` through the built-in `wrapper` (airt/internal/wrapped_call.h):
// `setting` (serialized) and the function's name go first in `args`.
void WrapCall(const char* wrapper, std::string setting, std::string* function,
              std::vector<Argument>* args);
// Keeps track of pinned objects handed to the caller, so that Shutdown releases their pins
// before the store connection they came from goes.
void KeepPinned(const std::vector<std::shared_ptr<core_worker::GotObject>>& held);

}  // namespace internal
}  // namespace airt
