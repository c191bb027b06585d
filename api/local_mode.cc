#include "api/local_mode.h"

#include <algorithm>
#include <chrono>
#include <string_view>

#include "airt/internal/function_registry.h"
#include "airt/internal/serialization.h"
#include "api/internal/error_kinds.h"

namespace airt::local {
namespace {

using Clock = std::chrono::steady_clock;
using core_worker::ErrorKind;

constexpr std::string_view kMsgpackNil = "\xc0";  // a void function's "done"
constexpr size_t kMaxNamesListed = 20;

std::optional<Clock::time_point> DeadlineOf(int64_t timeout_ms) {
  if (timeout_ms < 0) return std::nullopt;
  return Clock::now() + std::chrono::milliseconds(timeout_ms);
}

std::string NotRegistered(const std::string& function) {
  std::vector<std::string> names = internal::FunctionRegistry::Global().Names();
  std::string message = "function '" + function + "' is not registered in this process (local " +
                        "mode runs the driver's own functions; registered: ";
  if (names.empty()) message += "none";
  for (size_t i = 0; i < names.size() && i < kMaxNamesListed; ++i) {
    message += (i ? ", " : "") + names[i];
  }
  if (names.size() > kMaxNamesListed) {
    message += " and " + std::to_string(names.size() - kMaxNamesListed) + " more";
  }
  return message + "). Is it linked into the driver, with AIRT_REMOTE(" + function + ")?";
}

// Sets the calling thread's running task (internal::ThisThreadsTask) for a scope.
class RunningTaskScope {
 public:
  RunningTaskScope(const TaskId& task, const std::string& actor)
      : saved_(internal::ThisThreadsTask()) {
    internal::ThisThreadsTask() = {task.Binary(), actor};
  }
  ~RunningTaskScope() { internal::ThisThreadsTask() = std::move(saved_); }
  RunningTaskScope(const RunningTaskScope&) = delete;
  RunningTaskScope& operator=(const RunningTaskScope&) = delete;

 private:
  internal::RunningTask saved_;
};

// The returns of an invocation as objects: the values, or the function's error.
std::vector<LocalObject> Outcome(const std::string& function, internal::InvokeOutcome invoked,
                                 size_t num_returns) {
  std::vector<LocalObject> out(num_returns);
  auto fail_all = [&](ErrorKind kind, const std::string& message, const std::string& data = "") {
    for (LocalObject& o : out) o.error = core_worker::ObjectError{kind, function, message, data};
    return out;
  };
  if (!invoked.ok()) {
    return fail_all(internal::ToProto(*invoked.failure), invoked.error, invoked.data);
  }
  std::vector<std::string>& values = invoked.returns;
  if (values.empty() && num_returns == 1) values.emplace_back(kMsgpackNil);
  if (values.size() != num_returns) {
    return fail_all(ErrorKind::USER_EXCEPTION,
                    "'" + function + "' returns " + std::to_string(values.size()) +
                        " value(s), the task asks for " + std::to_string(num_returns));
  }
  for (size_t i = 0; i < num_returns; ++i) {
    out[i].value = std::make_shared<const std::string>(std::move(values[i]));
  }
  return out;
}

}  // namespace

struct LocalRuntime::Actor {
  ActorId id;
  std::string factory;
  std::vector<core_worker::TaskArgument> args;  // the factory's, kept for restarts
  core_worker::ActorOptions options;
  std::shared_ptr<void> instance;
  std::deque<Call> queue;
  std::vector<std::thread> threads;
  bool constructing = false;  // the factory runs: no method starts
  bool dead = false;
  std::string death_cause;
  uint32_t restarts = 0;
  uint64_t incarnation = 0;     // bumped by each restart and death: a call that ran across fails
  bool exit_requested = false;  // ExitActor was called by the running call
};

thread_local LocalRuntime::Actor* LocalRuntime::t_actor = nullptr;

LocalRuntime::LocalRuntime(const std::string& ns)
    : job_(JobId::FromRandom()),
      ns_(ns.empty() ? "anonymous-local-" + job_.Hex() : ns),
      driver_task_(TaskId::ForDriver(job_)) {}

LocalRuntime::~LocalRuntime() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [id, actor] : actors_) {
      if (!actor->dead) MarkDead(*actor, "the local-mode runtime shut down");
      for (std::thread& t : actor->threads) threads.push_back(std::move(t));
    }
    for (auto& [n, t] : task_threads_) threads.push_back(std::move(t));
    task_threads_.clear();
  }
  changed_.notify_all();
  for (std::thread& t : threads) t.join();
  // Tasks started while the others were joined.
  for (;;) {
    std::map<uint64_t, std::thread> more;
    {
      std::lock_guard<std::mutex> lock(mu_);
      more.swap(task_threads_);
    }
    if (more.empty()) break;
    for (auto& [n, t] : more) t.join();
  }
  // The actors' instances go after every thread that could run their methods.
  actors_.clear();
}

void LocalRuntime::Store(const ObjectId& id, LocalObject object) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    objects_.emplace(id, std::move(object));
  }
  changed_.notify_all();
}

void LocalRuntime::Fail(const std::vector<ObjectId>& ids, ErrorKind kind,
                        const std::string& function, const std::string& message) {
  for (const ObjectId& id : ids) {
    LocalObject failed;
    failed.error = core_worker::ObjectError{kind, function, message};
    Store(id, std::move(failed));
  }
}

ObjectId LocalRuntime::Put(std::string bytes) {
  ObjectId id = ObjectId::ForPut(driver_task_, ++put_index_);
  LocalObject object;
  object.value = std::make_shared<const std::string>(std::move(bytes));
  Store(id, std::move(object));
  return id;
}

Result<std::vector<LocalObject>> LocalRuntime::Get(std::span<const ObjectId> ids,
                                                   int64_t timeout_ms) {
  std::optional<Clock::time_point> deadline = DeadlineOf(timeout_ms);
  std::unique_lock<std::mutex> lock(mu_);
  auto missing = [&]() -> const ObjectId* {
    for (const ObjectId& id : ids) {
      if (objects_.count(id) == 0) return &id;
    }
    return nullptr;
  };
  while (const ObjectId* first = missing()) {
    if (!deadline) {
      changed_.wait(lock);
    } else if (changed_.wait_until(lock, *deadline) == std::cv_status::timeout && missing()) {
      return DeadlineExceeded("object " + missing()->Hex() + " is not ready after " +
                              std::to_string(timeout_ms) + " ms");
    }
    (void)first;
  }
  std::vector<LocalObject> out;
  out.reserve(ids.size());
  for (const ObjectId& id : ids) out.push_back(objects_.at(id));
  return out;
}

std::vector<bool> LocalRuntime::Wait(std::span<const ObjectId> ids, size_t num_ready,
                                     int64_t timeout_ms) {
  std::optional<Clock::time_point> deadline = DeadlineOf(timeout_ms);
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] {
    std::vector<bool> out;
    for (const ObjectId& id : ids) out.push_back(objects_.count(id) > 0);
    return out;
  };
  auto enough = [&] {
    std::vector<bool> r = ready();
    return static_cast<size_t>(std::count(r.begin(), r.end(), true)) >= num_ready;
  };
  if (deadline) {
    changed_.wait_until(lock, *deadline, enough);
  } else {
    changed_.wait(lock, enough);
  }
  return ready();
}

Result<std::vector<std::string>> LocalRuntime::Resolve(
    const std::vector<core_worker::TaskArgument>& args,
    std::optional<core_worker::ObjectError>* failed) {
  // Every reference first, in one wait.
  std::vector<ObjectId> refs;
  for (const core_worker::TaskArgument& a : args) {
    if (a.ref) refs.push_back(*a.ref);
    refs.insert(refs.end(), a.ref_list.begin(), a.ref_list.end());
  }
  AIRT_ASSIGN_OR_RETURN(std::vector<LocalObject> got, Get(refs, -1));
  size_t next = 0;
  std::vector<std::string> out;
  auto take = [&]() -> const LocalObject* {
    const LocalObject& o = got[next++];
    if (o.error && !*failed) *failed = o.error;
    return o.error ? nullptr : &o;
  };
  for (const core_worker::TaskArgument& a : args) {
    if (a.is_list) {
      // A std::vector<T> in msgpack: an array header, then each T's own bytes.
      std::string array;
      internal::StringSink sink{&array};
      msgpack::packer<internal::StringSink>(sink).pack_array(
          static_cast<uint32_t>(a.ref_list.size()));
      for (size_t j = 0; j < a.ref_list.size(); ++j) {
        if (const LocalObject* o = take()) array += *o->value;
      }
      out.push_back(std::move(array));
    } else if (a.ref) {
      const LocalObject* o = take();
      out.push_back(o ? *o->value : std::string());
    } else {
      out.push_back(a.value);
    }
  }
  return out;
}

void LocalRuntime::ReapFinished() {
  for (uint64_t n : finished_) {
    auto it = task_threads_.find(n);
    if (it == task_threads_.end()) continue;
    it->second.join();  // it has returned, or is returning
    task_threads_.erase(it);
  }
  finished_.clear();
}

std::vector<ObjectId> LocalRuntime::SubmitTask(const std::string& function,
                                               std::vector<core_worker::TaskArgument> args,
                                               uint32_t num_returns) {
  TaskId task = TaskId::Of(ActorId::NilFor(job_));
  std::vector<ObjectId> returns;
  for (uint32_t i = 0; i < std::max<uint32_t>(num_returns, 1); ++i) {
    returns.push_back(ObjectId::ForReturn(task, i + 1));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ReapFinished();
  if (stopping_) {
    for (const ObjectId& id : returns) {
      objects_.emplace(id, LocalObject{nullptr, core_worker::ObjectError{ErrorKind::UNAVAILABLE,
                                                                         function, "shut down"}});
    }
    return returns;
  }
  uint64_t n = next_thread_++;
  task_threads_.emplace(n, std::thread([this, n, task, function, args = std::move(args), returns] {
                          RunTask(task, function, args, returns);
                          std::lock_guard<std::mutex> lock(mu_);
                          finished_.push_back(n);
                        }));
  return returns;
}

void LocalRuntime::RunTask(const TaskId& task, const std::string& function,
                           const std::vector<core_worker::TaskArgument>& args,
                           const std::vector<ObjectId>& returns) {
  const internal::Invoker* invoker = internal::FunctionRegistry::Global().Find(function);
  if (invoker == nullptr) {
    Fail(returns, ErrorKind::FUNCTION_NOT_FOUND, function, NotRegistered(function));
    return;
  }
  std::optional<core_worker::ObjectError> failed;
  Result<std::vector<std::string>> values = Resolve(args, &failed);
  if (failed) {
    Fail(returns, failed->kind, failed->function_name, failed->message);
    return;
  }
  std::vector<std::string_view> views(values->begin(), values->end());
  RunningTaskScope scope(task, "");
  std::vector<LocalObject> out = Outcome(function, (*invoker)(views), returns.size());
  for (size_t i = 0; i < returns.size(); ++i) Store(returns[i], std::move(out[i]));
}

Result<ActorId> LocalRuntime::CreateActor(const std::string& factory,
                                          std::vector<core_worker::TaskArgument> args,
                                          const core_worker::ActorOptions& options) {
  if (options.detached && options.name.empty()) {
    return InvalidArgument("a detached actor needs a name");
  }
  auto actor = std::make_unique<Actor>();
  actor->id = ActorId::Of(job_);
  actor->factory = factory;
  actor->args = args;
  actor->options = options;
  Actor* raw = actor.get();
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Unavailable("the local-mode runtime is shutting down");
  if (!options.name.empty()) {
    std::pair<std::string, std::string> key{options.ns.empty() ? ns_ : options.ns, options.name};
    auto taken = names_.find(key);
    if (taken != names_.end() && !actors_.at(taken->second)->dead) {
      return AlreadyExists("an actor named '" + options.name + "' exists in namespace '" +
                           key.first + "'");
    }
    names_[key] = actor->id;
  }
  Call creation{TaskId::Of(actor->id), factory, std::move(args), {}, true};
  actor->queue.push_back(std::move(creation));
  for (uint32_t i = 0; i < std::max<uint32_t>(options.max_concurrency, 1); ++i) {
    actor->threads.emplace_back([this, raw] { ActorThread(raw); });
  }
  ActorId id = actor->id;
  actors_.emplace(id, std::move(actor));
  return id;
}

std::vector<ObjectId> LocalRuntime::SubmitActorTask(const ActorId& id, const std::string& method,
                                                    std::vector<core_worker::TaskArgument> args,
                                                    uint32_t num_returns) {
  Call call{TaskId::Of(id), method, std::move(args), {}, false};
  for (uint32_t i = 0; i < std::max<uint32_t>(num_returns, 1); ++i) {
    call.returns.push_back(ObjectId::ForReturn(call.task, i + 1));
  }
  std::vector<ObjectId> returns = call.returns;
  std::string dead_because;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = actors_.find(id);
    if (it == actors_.end()) {
      dead_because = "no actor " + id.Hex() + " in this local-mode process";
    } else if (it->second->dead) {
      dead_because = "the actor is dead: " + it->second->death_cause;
    } else {
      it->second->queue.push_back(std::move(call));
    }
  }
  if (!dead_because.empty()) {
    Fail(returns, ErrorKind::ACTOR_DIED, method, dead_because);
  } else {
    changed_.notify_all();
  }
  return returns;
}

void LocalRuntime::ActorThread(Actor* actor) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] {
      return (actor->dead && actor->queue.empty()) ||
             (!actor->queue.empty() && !actor->constructing &&
              (actor->instance || actor->queue.front().creation || actor->dead));
    });
    if (actor->queue.empty()) return;  // dead, nothing left
    Call call = std::move(actor->queue.front());
    actor->queue.pop_front();
    if (call.creation) actor->constructing = true;
    lock.unlock();
    RunCall(actor, call);
    lock.lock();
    if (call.creation) actor->constructing = false;
    changed_.notify_all();
  }
}

void LocalRuntime::RunCall(Actor* actor, Call& call) {
  uint64_t incarnation;
  std::shared_ptr<void> instance;
  std::string dead_because;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incarnation = actor->incarnation;
    instance = actor->instance;
    if (actor->dead) dead_because = "the actor is dead: " + actor->death_cause;
  }
  if (!dead_because.empty()) {
    Fail(call.returns, ErrorKind::ACTOR_DIED, call.function, dead_because);
    return;
  }
  const internal::FunctionRegistry& registry = internal::FunctionRegistry::Global();
  std::optional<core_worker::ObjectError> failed;
  Result<std::vector<std::string>> values = Resolve(call.args, &failed);
  std::vector<std::string_view> views;
  if (values.ok()) views.assign(values->begin(), values->end());

  RunningTaskScope scope(call.task, actor->id.Binary());
  Actor* outer = t_actor;
  t_actor = actor;
  internal::InvokeOutcome invoked;
  std::string not_found;
  if (failed) {
    // Reported below.
  } else if (call.creation) {
    const internal::Invoker* factory = registry.Find(call.function);
    if (factory == nullptr) {
      not_found = NotRegistered(call.function);
    } else {
      invoked = (*factory)(views);
    }
  } else {
    const internal::MethodInvoker* method = registry.FindMethod(call.function);
    if (method == nullptr) {
      not_found = NotRegistered(call.function);
    } else {
      invoked = (*method)(instance.get(), views);
    }
  }
  t_actor = outer;

  std::unique_lock<std::mutex> lock(mu_);
  if (call.creation) {
    std::string why;
    if (failed) {
      why = "an argument of its constructor failed: " + failed->message;
    } else if (!not_found.empty()) {
      why = not_found;
    } else if (!invoked.ok()) {
      why = "its constructor threw: " + invoked.error;
    } else if (!invoked.instance) {
      why = "'" + call.function + "' is not an actor factory (a function returning T*)";
    }
    if (actor->incarnation != incarnation || actor->dead) return;  // killed meanwhile
    if (!why.empty()) {
      MarkDead(*actor, why);
    } else {
      actor->instance = std::move(invoked.instance);
    }
    if (actor->exit_requested) MarkDead(*actor, "the actor called ExitActor (ray::ExitActor)");
    return;
  }
  if (actor->exit_requested) {
    MarkDead(*actor, "the actor called ExitActor (ray::ExitActor)");
  }
  std::vector<LocalObject> out;
  if (actor->incarnation != incarnation) {
    std::string why = actor->dead ? "the actor died while running the call: " + actor->death_cause
                                  : "the actor was restarted while running the call";
    out.assign(
        call.returns.size(),
        LocalObject{nullptr, core_worker::ObjectError{ErrorKind::ACTOR_DIED, call.function, why}});
  } else if (failed) {
    out.assign(call.returns.size(), LocalObject{nullptr, failed});
  } else if (!not_found.empty()) {
    out.assign(call.returns.size(),
               LocalObject{nullptr, core_worker::ObjectError{ErrorKind::FUNCTION_NOT_FOUND,
                                                             call.function, not_found}});
  } else {
    out = Outcome(call.function, std::move(invoked), call.returns.size());
  }
  for (size_t i = 0; i < call.returns.size(); ++i) objects_.emplace(call.returns[i], out[i]);
  lock.unlock();
  changed_.notify_all();
}

void LocalRuntime::MarkDead(Actor& actor, const std::string& cause) {
  actor.dead = true;
  actor.death_cause = cause;
  ++actor.incarnation;
  actor.exit_requested = false;
  for (Call& call : actor.queue) {
    for (const ObjectId& id : call.returns) {
      objects_.emplace(
          id, LocalObject{nullptr, core_worker::ObjectError{ErrorKind::ACTOR_DIED, call.function,
                                                            "the actor is dead: " + cause}});
    }
  }
  actor.queue.clear();
  changed_.notify_all();
}

Result<ActorId> LocalRuntime::Lookup(const std::string& name, const std::string& ns) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = names_.find({ns.empty() ? ns_ : ns, name});
  if (it == names_.end() || actors_.at(it->second)->dead) {
    return NotFound("no actor named '" + name + "' in namespace '" + (ns.empty() ? ns_ : ns) +
                    "'");
  }
  return it->second;
}

Status LocalRuntime::Kill(const ActorId& id, bool no_restart) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = actors_.find(id);
  if (it == actors_.end()) return NotFound("no actor " + id.Hex() + " in this local-mode process");
  Actor& actor = *it->second;
  if (actor.dead) return Status::Ok();
  int32_t max = actor.options.max_restarts;
  if (no_restart || (max >= 0 && actor.restarts >= static_cast<uint32_t>(max))) {
    MarkDead(actor, no_restart ? "killed by airt::Kill (ray.kill)"
                               : "killed, and it may not restart (max_restarts=" +
                                     std::to_string(max) + ")");
    return Status::Ok();
  }
  // As after a crash: a fresh instance from the factory, then the queued calls, in order.
  ++actor.restarts;
  ++actor.incarnation;
  actor.instance.reset();
  actor.queue.push_front(Call{TaskId::Of(actor.id), actor.factory, actor.args, {}, true});
  changed_.notify_all();
  return Status::Ok();
}

bool LocalRuntime::RequestExit() {
  if (t_actor == nullptr) return false;
  std::lock_guard<std::mutex> lock(mu_);
  t_actor->exit_requested = true;
  return true;
}

bool LocalRuntime::CurrentActorRestarted() const {
  if (t_actor == nullptr) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return t_actor->restarts > 0;
}

}  // namespace airt::local
