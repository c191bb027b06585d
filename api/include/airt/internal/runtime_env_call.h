// How a task's or an actor's env_vars travel to a C++ worker and are applied there: the call goes
// to a built-in wrapper function (registered in every process that loads libairt_api) whose first
// two arguments are the env_vars (a msgpack map of strings) and the real function's name; the
// wrapper sets the variables, runs the function on the remaining arguments, and (for a task)
// restores the environment after. Not part of the user-facing API.
#pragma once

#include <map>
#include <string>

namespace airt::internal {

// The wrapper names the driver submits instead of the function's.
inline constexpr const char* kTaskWithEnv = "airt::internal::TaskWithRuntimeEnv";
inline constexpr const char* kActorWithEnv = "airt::internal::ActorWithRuntimeEnv";

// The env_vars the calling thread runs under: those of the task it runs, else those of the actor
// its process hosts; empty outside both. Tasks and actors submitted from there inherit them, as in
// Ray.
std::map<std::string, std::string> InheritedEnvVars();

}  // namespace airt::internal
