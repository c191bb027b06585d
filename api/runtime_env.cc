// runtime_env env_vars: the check of a RuntimeEnv's fields (RuntimeEnvVars, airt/driver.h), and
// the worker's half (airt/internal/runtime_env_call.h): the built-in wrappers that apply them
// around a task or for an actor's life.
#include <cstdlib>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "airt/driver.h"
#include "airt/internal/function_registry.h"
#include "airt/internal/invoker.h"
#include "airt/internal/runtime_env_call.h"
#include "airt/internal/wrapped_call.h"

namespace airt::internal {
namespace {

using EnvVars = std::map<std::string, std::string>;

thread_local const EnvVars* t_task_env = nullptr;  // the running task's, while it runs
std::mutex g_actor_env_mu;
EnvVars g_actor_env;  // guarded by g_actor_env_mu: the hosted actor's, for the process's life

// Sets `vars` in the process environment until destroyed, then puts back what was there.
class EnvScope {
 public:
  explicit EnvScope(const EnvVars& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~EnvScope() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// The wrapper (wrapped_call.h): its setting is the env_vars.
InvokeOutcome RunWithEnv(const char* wrapper, std::span<const std::string_view> args,
                         bool for_actor) {
  return RunWrapped(wrapper, args, [&](std::string_view setting, const WrappedRun& run) {
    EnvVars vars;
    try {
      vars = Deserialize<EnvVars>(setting);
    } catch (const std::exception& e) {
      return BadArguments(wrapper, e.what());
    }
    if (for_actor) {
      // The process is the actor's alone: the variables stay for its life.
      for (const auto& [name, value] : vars) ::setenv(name.c_str(), value.c_str(), 1);
      std::lock_guard<std::mutex> lock(g_actor_env_mu);
      g_actor_env = vars;
    } else {
      EnvScope scope(vars);
      const EnvVars* outer = t_task_env;
      t_task_env = &vars;
      InvokeOutcome outcome = run();
      t_task_env = outer;
      return outcome;
    }
    return run();
  });
}

[[maybe_unused]] const bool kRegistered = [] {
  FunctionRegistry& registry = FunctionRegistry::Global();
  registry.Register(kTaskWithEnv, [](std::span<const std::string_view> args) {
    return RunWithEnv(kTaskWithEnv, args, /*for_actor=*/false);
  });
  registry.Register(kActorWithEnv, [](std::span<const std::string_view> args) {
    return RunWithEnv(kActorWithEnv, args, /*for_actor=*/true);
  });
  return true;
}();

}  // namespace

EnvVars InheritedEnvVars() {
  if (t_task_env != nullptr) return *t_task_env;
  std::lock_guard<std::mutex> lock(g_actor_env_mu);
  return g_actor_env;
}

void ThrowRuntimeEnvError(const std::string& what) { throw RuntimeEnvError(what); }

std::map<std::string, std::string> RuntimeEnvVars(const RuntimeEnv& env) {
  for (const auto& [field, value] : env.fields().items()) {
    if (field != "env_vars") {
      throw UnimplementedError("runtime_env field '" + field +
                               "': airt's C++ workers honour env_vars only (no working_dir, "
                               "package installs or containers for C++ code)");
    }
  }
  std::map<std::string, std::string> out;
  if (!env.Contains("env_vars")) return out;
  const nlohmann::json& vars = env.fields().at("env_vars");
  if (!vars.is_object()) {
    throw RuntimeEnvError("runtime_env env_vars must be a JSON object of strings, not " +
                          vars.dump());
  }
  for (const auto& [name, value] : vars.items()) {
    if (!value.is_string()) {
      throw RuntimeEnvError("runtime_env env_vars['" + name + "'] must be a string, not " +
                            value.dump());
    }
    out[name] = value.get<std::string>();
  }
  return out;
}

}  // namespace airt::internal
