// The built-in wrappers a driver sends a call through when the call carries a setting the
// function's own arguments cannot: a task's or actor's env_vars (runtime_env_call.h), the placement
// group it captures its child tasks into (placement_group_call.h). The wrapper's first argument is
// the setting, its second the real function's name, the rest the function's arguments; wrappers
// nest (the function named may be another wrapper). Not part of the user-facing API.
#pragma once

#include <functional>
#include <span>
#include <string_view>

#include "airt/internal/function_registry.h"

namespace airt::internal {

// Runs the function the wrapped call's args[1] names on its args[2..].
using WrappedRun = std::function<InvokeOutcome()>;

// Unwraps the call `wrapper` got: `around` is given args[0] (the serialized setting) and the run
// of the named function, which it applies the setting around. A call of fewer than two arguments,
// or naming a function this process has not registered, is kBadArguments naming it.
InvokeOutcome RunWrapped(const char* wrapper, std::span<const std::string_view> args,
                         const std::function<InvokeOutcome(std::string_view setting,
                                                           const WrappedRun& run)>& around);

}  // namespace airt::internal
