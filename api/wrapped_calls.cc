// The worker's half of the wrapped calls (airt/internal/wrapped_call.h): the unwrapping every
// wrapper shares, and the wrappers of placement_group_capture_child_tasks
// (airt/internal/placement_group_call.h). The env_vars wrappers are runtime_env.cc's.
#include <exception>
#include <mutex>
#include <string>

#include "airt/internal/function_registry.h"
#include "airt/internal/invoker.h"
#include "airt/internal/placement_group_call.h"
#include "airt/internal/wrapped_call.h"

namespace airt::internal {

InvokeOutcome RunWrapped(const char* wrapper, std::span<const std::string_view> args,
                         const std::function<InvokeOutcome(std::string_view setting,
                                                           const WrappedRun& run)>& around) {
  if (args.size() < 2) {
    return BadArguments(wrapper, "takes its setting and a function's name first");
  }
  std::string function;
  try {
    function = Deserialize<std::string>(args[1]);
  } catch (const std::exception& e) {
    return BadArguments(wrapper, e.what());
  }
  const Invoker* inner = FunctionRegistry::Global().Find(function);
  if (inner == nullptr) {
    return BadArguments(function, "function '" + function +
                                      "' is not registered in this worker: is its library on the "
                                      "code search path, with AIRT_REMOTE(" + function + ")?");
  }
  std::span<const std::string_view> rest = args.subspan(2);
  return around(args[0], [inner, rest] { return (*inner)(rest); });
}

namespace {

thread_local const std::string* t_task_group = nullptr;  // the running task's, while it runs
std::mutex g_actor_group_mu;
std::string g_actor_group;  // guarded by g_actor_group_mu: the hosted actor's, for its life

InvokeOutcome RunCapturing(const char* wrapper, std::span<const std::string_view> args,
                           bool for_actor) {
  return RunWrapped(wrapper, args, [&](std::string_view setting, const WrappedRun& run) {
    std::string group;
    try {
      group = Deserialize<std::string>(setting);
    } catch (const std::exception& e) {
      return BadArguments(wrapper, e.what());
    }
    if (for_actor) {
      // The process is the actor's alone: its methods capture for its life.
      std::lock_guard<std::mutex> lock(g_actor_group_mu);
      g_actor_group = group;
    } else {
      const std::string* outer = t_task_group;
      t_task_group = &group;
      InvokeOutcome outcome = run();
      t_task_group = outer;
      return outcome;
    }
    return run();
  });
}

[[maybe_unused]] const bool kRegistered = [] {
  FunctionRegistry& registry = FunctionRegistry::Global();
  registry.Register(kTaskCapturingChildren, [](std::span<const std::string_view> args) {
    return RunCapturing(kTaskCapturingChildren, args, /*for_actor=*/false);
  });
  registry.Register(kActorCapturingChildren, [](std::span<const std::string_view> args) {
    return RunCapturing(kActorCapturingChildren, args, /*for_actor=*/true);
  });
  return true;
}();

}  // namespace

std::string CapturingGroup() {
  if (t_task_group != nullptr) return *t_task_group;
  std::lock_guard<std::mutex> lock(g_actor_group_mu);
  return g_actor_group;
}

}  // namespace airt::internal
