// How Ray's placement_group_capture_child_tasks travels to a C++ worker: a task or actor that
// captures its children is sent through a built-in wrapper (wrapped_call.h) whose setting is its
// placement group's hex id. While the task runs (an actor: for its process's life), the tasks and
// actors submitted from it without a group or a scheduling strategy of their own run in that group,
// in any bundle, and capture their own children too. Not part of the user-facing API.
#pragma once

#include <string>

namespace airt::internal {

// The wrapper names the driver submits instead of the function's.
inline constexpr const char* kTaskCapturingChildren = "airt::internal::TaskCapturingChildTasks";
inline constexpr const char* kActorCapturingChildren = "airt::internal::ActorCapturingChildTasks";

// The group (hex id) the calling thread's work captures its children into: that of the task it
// runs, else that of the actor its process hosts; "" when neither captures.
std::string CapturingGroup();

}  // namespace airt::internal
