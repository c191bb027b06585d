// How the driver API sends a call through the worker's built-in wrappers
// (airt/internal/wrapped_call.h): the wrapping itself, and the placement group a call runs in,
// captured from the running task (airt/internal/placement_group_call.h).
#include <string>
#include <vector>

#include "airt/driver.h"
#include "airt/internal/placement_group_call.h"
#include "airt/internal/serialization.h"
#include "api/internal/driver_state.h"

namespace airt::internal {

void WrapCall(const char* wrapper, std::string setting, std::string* function,
              std::vector<Argument>* args) {
  Argument value, name;
  value.value = std::move(setting);
  name.value = Serialize(*function);
  args->insert(args->begin(), {std::move(value), std::move(name)});
  *function = wrapper;
}

std::map<std::string, double> ResourcesInGroup(const std::map<std::string, double>& resources,
                                               const GroupChoice& choice, const char* wrapper,
                                               std::string* function, std::vector<Argument>* args) {
  std::string group = choice.group;
  int index = choice.bundle_index;
  bool capture = choice.capture_child_tasks;
  if (group.empty() && !choice.strategy_set) {
    group = CapturingGroup();  // the running task captures its children: this call is one
    index = -1;
    capture = !group.empty();
  }
  if (capture && wrapper != nullptr) {
    if (!choice.python) {
      WrapCall(wrapper, Serialize(group), function, args);
    } else if (choice.capture_child_tasks) {
      throw UnimplementedError(
          "placement_group_capture_child_tasks for a Python function or class called from C++ "
          "(SetPlacementGroup(group, index, true)): give it the group without capture");
    }
    // A Python call captured from a C++ task runs in the group; its own children do not.
  }
  return InPlacementGroup(resources, group, index);
}

}  // namespace airt::internal
