// Actors, shaped like Ray's C++ API:
//
//   class Counter {
//    public:
//     explicit Counter(int start) : n_(start) {}
//     static Counter* Create(int start) { return new Counter(start); }
//     int Add(int k) { return n_ += k; }
//    private:
//     int n_;
//   };
//   AIRT_REMOTE(Counter::Create, &Counter::Add);
//
//   airt::ActorHandle<Counter> counter = airt::Actor(Counter::Create).SetName("c").Remote(10);
//   auto eleven = counter.Task(&Counter::Add).Remote(1);   // an ObjectRef<int>
//   // A method returning airt::Generator<T> streams (airt/generator.h): an ObjectRefGenerator<T>.
//   auto same = airt::GetActor<Counter>("c");              // std::optional<ActorHandle<Counter>>
//   counter.Kill();
//
// An actor lives in a worker process of its own, on the node the head chooses (one whose totals
// hold its resources, preferring the least loaded with them free now); its methods run there in
// the order this process called them (one at a time, unless SetMaxConcurrency allows more). Its
// process dying restarts it (the factory runs again, placed afresh) up to SetMaxRestarts times
// (default 0); a call that was running then is sent again to the restarted actor up to
// SetMaxTaskRetries times (default 0), else it fails with ActorDiedError, as does every call once
// the actor is dead for good. When the driver that created it exits, the actor is stopped, unless
// it is detached (SetDetached): then it lives on until killed, found by its name.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "airt/driver.h"

namespace airt {

namespace internal {

struct ActorSettings {
  std::map<std::string, double> resources;  // none: as Ray, an actor holds no CPU by default
  std::string accelerator_type;             // "": any node; else only nodes with this label
  std::string name;
  std::string ns;
  int max_restarts = 0;
  int max_task_retries = 0;  // -1: without limit
  int max_concurrency = 1;
  // Needs a name. Unset: the job's Config::default_actor_lifetime, for a named actor.
  std::optional<bool> detached;
  bool python = false;  // a Python class (the airt package's): lives on a Python worker
  // SetRuntimeEnv's env_vars: set in the actor's process for its life. Unset: none of its own.
  std::optional<std::map<std::string, std::string>> env_vars;
  // SetPlacementGroup: the group's hex id ("": none), bundle (-1: any of its bundles), and
  // whether the tasks and actors its methods submit run in the group too.
  std::string placement_group_id;
  int bundle_index = -1;
  bool capture_child_tasks = false;
  SchedulingStrategy strategy;  // SetSchedulingStrategy
  bool strategy_set = false;    // SetSchedulingStrategy was called: no captured group applies
  LabelSelector label_selector;  // SetLabelSelector
};

std::string CreateActor(const std::string& factory, std::vector<Argument> args,
                        const ActorSettings& settings);
std::vector<std::string> SubmitActorTask(const std::string& actor_id, const std::string& method,
                                         std::vector<Argument> args, int num_returns = 1);
// "" when there is no such actor.
std::string LookupActor(const std::string& name, const std::string& ns);
void KillActor(const std::string& actor_id, bool no_restart);

}  // namespace internal

template <typename T>
class ActorHandle;

// Builds and submits one call of an actor method.
template <typename T, typename R, typename... P>
class ActorTaskCaller {
 public:
  ActorTaskCaller(std::string actor_id, std::string method)
      : actor_id_(std::move(actor_id)), method_(std::move(method)) {}

  // Ray's ActorTaskCaller::SetName: the call's name. An actor's calls are shown by their method's
  // name; this one is kept for Ray's API and not shown anywhere yet.
  ActorTaskCaller& SetName(std::string name) {
    name_ = std::move(name);
    return *this;
  }

  // A generator method (R = Generator<T>) makes at most `items` items ahead of what its consumer
  // took; <= 0 (the default): no limit. Ignored for other methods.
  ActorTaskCaller& SetGeneratorBackpressure(int items) {
    generator_backpressure_ = items;
    return *this;
  }

  // An ObjectRef<R>; for a generator method (R = Generator<T>) an ObjectRefGenerator<T> whose
  // items stream in while the method runs, in the actor's call order like any other call.
  template <typename... A>
  auto Remote(A&&... args) {
    static_assert(sizeof...(A) == sizeof...(P), "Remote takes one argument per parameter");
    std::vector<internal::Argument> arguments = {
        internal::MakeArgument<P>(std::forward<A>(args))...};
    if constexpr (internal::IsGenerator<R>::value) {
      return ObjectRefGenerator<typename R::value_type>(
          internal::SubmitStreamingActorTask(actor_id_, method_, std::move(arguments),
                                             generator_backpressure_)
              .at(0));
    } else {
      return ObjectRef<R>(
          internal::SubmitActorTask(actor_id_, method_, std::move(arguments)).at(0));
    }
  }

 private:
  std::string actor_id_;
  std::string method_;
  std::string name_;
  int generator_backpressure_ = -1;
};

// A reference to an actor: copyable, and passable to tasks and back (it travels as the actor's
// id). Calls through any copy go to the same actor.
template <typename T>
class ActorHandle {
 public:
  ActorHandle() = default;
  explicit ActorHandle(std::string id) : id_(std::move(id)) {}
  const std::string& ID() const { return id_; }  // 16 bytes

  template <typename R, typename... P>
  ActorTaskCaller<T, R, P...> Task(R (T::*method)(P...)) {
    return ActorTaskCaller<T, R, P...>(id_, MethodName(method));
  }
  template <typename R, typename... P>
  ActorTaskCaller<T, R, P...> Task(R (T::*method)(P...) const) {
    return ActorTaskCaller<T, R, P...>(id_, MethodName(method));
  }

  // Stops the actor's process now. no_restart (Ray's default): it is dead for good and every
  // later call fails with ActorDiedError; false: it restarts as after a crash, if it may.
  void Kill(bool no_restart = true) { internal::KillActor(id_, no_restart); }

  MSGPACK_DEFINE(id_);

 private:
  template <typename M>
  static std::string MethodName(M method) {
    std::string name =
        internal::FunctionRegistry::Global().NameOfMethod(internal::MethodKey(method));
    if (name.empty()) {
      throw Exception("this method is not registered: add &Class::Method to an AIRT_REMOTE(...)");
    }
    return name;
  }

  std::string id_;
};

namespace internal {

// The options every actor builder takes (a C++ class's ActorCreator, a Python class's
// PyActorCreator), as Ray's C++ ActorCreator has them.
template <typename Self>
class ActorOptions : public SchedulingOptions<Self, ActorSettings> {
 public:
  // A name the actor can be found by with GetActor, in this job's namespace (or `ns`).
  Self& SetName(std::string name, std::string ns = "") {
    this->settings_.name = std::move(name);
    this->settings_.ns = std::move(ns);
    return this->self();
  }
  // Ray's older name for SetName(name): before namespaces, a name every job could find. Here it
  // is SetName(name), in this job's namespace (give jobs one Config::ray_namespace to share it).
  Self& SetGlobalName(std::string name) { return SetName(std::move(name)); }
  // The actor's process runs in `env`'s environment for its life (env_vars set before its
  // constructor runs), over the job's. Throws UnimplementedError for a field airt cannot honour.
  Self& SetRuntimeEnv(const RuntimeEnv& env) {
    this->settings_.env_vars = RuntimeEnvVars(env);
    return this->self();
  }
  // How often the actor is restarted after its process dies; -1: without limit.
  Self& SetMaxRestarts(int max_restarts) {
    this->settings_.max_restarts = max_restarts;
    return this->self();
  }
  // How often a call that was running when the actor's process died is sent again, to the
  // restarted actor, in the order the calls were made; -1: without limit. 0 (the default, as Ray's
  // max_task_retries): such a call fails with ActorDiedError. Resends need restarts
  // (SetMaxRestarts); the method may then run more than once.
  Self& SetMaxTaskRetries(int max_task_retries) {
    this->settings_.max_task_retries = max_task_retries;
    return this->self();
  }
  // Ray's lifetime="detached": the actor outlives the driver that created it (its job), until
  // Kill; any driver finds it with GetActor(name, namespace). It must be named (SetName), else
  // Remote throws Exception. Only its creator restarts it (SetMaxRestarts): once that driver has
  // exited, its process dying ends it for good.
  Self& SetDetached(bool detached = true) {
    this->settings_.detached = detached;
    return this->self();
  }
  // How many of its method calls may run at once (on as many threads).
  Self& SetMaxConcurrency(int max_concurrency) {
    if (max_concurrency < 1) {
      throw Exception("SetMaxConcurrency: " + std::to_string(max_concurrency) + " is below 1");
    }
    this->settings_.max_concurrency = max_concurrency;
    return this->self();
  }
};

}  // namespace internal

// Builds and submits an actor's creation from its factory (a registered `static T* F(args...)`).
template <typename T, typename... P>
class ActorCreator : public internal::ActorOptions<ActorCreator<T, P...>> {
 public:
  explicit ActorCreator(T* (*factory)(P...)) : factory_(factory) {}

  // Throws Exception when the name is taken in its namespace, or when it is detached and unnamed.
  // An actor no node can ever hold is dead: its calls fail with ActorDiedError, whose message says
  // "no node can ever run" its shape and names each node's totals.
  template <typename... A>
  ActorHandle<T> Remote(A&&... args) {
    static_assert(sizeof...(A) == sizeof...(P), "Remote takes one argument per parameter");
    std::string name =
        internal::RegisteredName(reinterpret_cast<const void*>(factory_), "actor factory");
    std::vector<internal::Argument> arguments = {
        internal::MakeArgument<P>(std::forward<A>(args))...};
    return ActorHandle<T>(internal::CreateActor(name, std::move(arguments), this->settings_));
  }

 private:
  T* (*factory_)(P...);
};

template <typename T, typename... P>
ActorCreator<T, P...> Actor(T* (*factory)(P...)) {
  return ActorCreator<T, P...>(factory);
}

// Called by an actor's method: the actor ends itself, as Ray's ray::ExitActor. It is marked DEAD
// for good (never restarted, whatever SetMaxRestarts allows) and its process exits at once: the
// method does not return (its locals are not destroyed), and Get on the ref of this call, as on
// every later call, throws ActorDiedError (Ray's RayActorException); calls that ran before it
// keep their results. In local mode the actor ends after this call (the rest of the method is
// skipped by an exception it must not catch with `catch (...)`). Throws Exception outside an
// actor's method (a driver, a task).
[[noreturn]] void ExitActor();
// Whether the actor whose constructor or method calls it has been restarted (runs in its
// process's second or later life). False outside an actor. Throws UnavailableError when the head
// cannot be asked.
bool WasCurrentActorRestarted();

// The actor named `name` in this job's namespace (or `ns`), or nullopt when there is none alive.
template <typename T>
std::optional<ActorHandle<T>> GetActor(const std::string& name, const std::string& ns = "") {
  std::string id = internal::LookupActor(name, ns);
  if (id.empty()) return std::nullopt;
  return ActorHandle<T>(std::move(id));
}

}  // namespace airt
