// The registry of remote functions: name -> invoker, filled by AIRT_REMOTE at static
// initialization and read by the worker when a task names a function. Not part of the user-facing
// API; include airt/remote.h instead.
//
// An invoker takes the serialized arguments and gives back the serialized returns or why it could
// not. Actors fit the same tables: a class factory (`static Counter* Counter::Create(...)`) is an
// invoker whose outcome holds the new instance, and a method (`&Counter::Add`) is a method invoker
// that also takes the instance; both keyed by the name written ("Counter::Create",
// "Counter::Add").
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "airt/exceptions.h"

namespace airt::internal {

// What invoking a function gave.
struct InvokeOutcome {
  bool ok() const { return !failure.has_value(); }
  // Unset: the call succeeded. Else why not: kBadArguments (the arguments did not deserialize to
  // the parameter types, or their count is off), kUserException (the function threw), or a kind
  // a fallback reports (a Python worker's kRuntimeEnvSetup).
  std::optional<ErrorKind> failure;
  std::string error;                 // when failed: what went wrong, naming the function
  std::string data;                  // kUserException: the exception for the caller (TaskError)
  std::vector<std::string> returns;  // when ok: the serialized return values (none for void)
  std::shared_ptr<void> instance;    // when ok and the function is an actor factory: the actor
};

// The task the calling thread runs, as binary ids (empty outside a task; actor_id empty for a task
// of no actor). The worker sets it around each call; one per process (it lives in libairt_api).
struct RunningTask {
  std::string task_id;
  std::string actor_id;
  std::string name;  // the task's name; an actor creation's: the actor's name ("" if unnamed)
  // What the task holds (an actor creation: what the actor holds for its life; a method: none).
  std::map<std::string, double> resources;
  uint32_t actor_restarts = 0;  // an actor creation: restarts of the actor before this one
};
RunningTask& ThisThreadsTask();

// Runs a function on serialized arguments (each one msgpack value). Runs user code on the calling
// thread; never throws.
using Invoker = std::function<InvokeOutcome(std::span<const std::string_view> args)>;
// Runs an actor method on `instance` (what the class's factory made). Never throws.
using MethodInvoker =
    std::function<InvokeOutcome(void* instance, std::span<const std::string_view> args)>;

// Thread-safe. Entries are never removed, so a found invoker stays valid for the registry's life.
class FunctionRegistry {
 public:
  FunctionRegistry() = default;
  FunctionRegistry(const FunctionRegistry&) = delete;
  FunctionRegistry& operator=(const FunctionRegistry&) = delete;

  // The process's registry, which AIRT_REMOTE fills. It lives in libairt_api.so, so the worker and
  // every library it loads share it.
  static FunctionRegistry& Global();

  // Adds `name`. False when the name is taken: the first registration stays, and the clash is
  // recorded (TakeProblems).
  bool Register(std::string name, Invoker invoker);
  // Adds the actor method `name`; false on a clash, as Register.
  bool RegisterMethod(std::string name, MethodInvoker invoker);
  // Records a registration that could not be made (static initialization cannot return errors).
  void RecordProblem(std::string problem);

  // Remembers that the function at `address` is registered as `name`, so a driver can name the
  // function it submits from its pointer (Task(f)).
  void RememberAddress(const void* address, const std::string& name);
  // The name the function at `address` was registered under, or "" when it was not.
  std::string NameOf(const void* address) const;
  // The same for a member function pointer, keyed by its bytes (MethodKey).
  void RememberMethod(std::string key, const std::string& name);
  std::string NameOfMethod(const std::string& key) const;

  // The invoker registered as `name`, or null.
  const Invoker* Find(std::string_view name) const;
  // The method invoker registered as `name`, or null.
  const MethodInvoker* FindMethod(std::string_view name) const;
  // Every registered name, sorted.
  std::vector<std::string> Names() const;
  // The problems recorded since the last call, oldest first.
  std::vector<std::string> TakeProblems();

 private:
  mutable std::mutex mu_;
  std::map<std::string, Invoker, std::less<>> invokers_;  // guarded by mu_
  std::map<std::string, MethodInvoker, std::less<>> methods_;  // guarded by mu_
  std::map<std::string, std::string> names_by_method_key_;     // guarded by mu_
  std::vector<std::string> problems_;                     // guarded by mu_
  std::map<const void*, std::string> names_by_address_;   // guarded by mu_
};

// A member function pointer's bytes: the key RememberMethod and NameOfMethod take.
template <typename M>
std::string MethodKey(M method) {
  return std::string(reinterpret_cast<const char*>(&method), sizeof(method));
}

// The names in an AIRT_REMOTE list as written ("f, ns::g, AIRT_FUNC(h, int)" -> f, ns::g, h):
// blanks and a leading '&' dropped. Empty when an entry is empty or cannot be read.
std::vector<std::string> ParseRemoteNames(std::string_view list);

// A readable name of a C++ type ("int", "std::string", "std::vector<int>").
std::string TypeName(const std::type_info& type);

}  // namespace airt::internal
