// The driver API's non-template half: one CoreWorker per process, created by Init in a driver, or
// in airt-worker the worker's own (EnterWorkerMode). The process-wide instance is the API's edge
// only (Ray's API is global); the core worker beneath takes its options through its constructor.
#include "airt/driver.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>

#include "airt/actor.h"
#include "airt/cancel.h"
#include "airt/internal/placement_group_call.h"
#include "airt/internal/runtime_env_call.h"
#include "api/core_worker/core_worker.h"
#include "api/internal/driver_state.h"
#include "api/internal/error_kinds.h"
#include "api/internal/worker_context.h"
#include "api/local_cluster.h"
#include "api/local_mode.h"
#include "objectstore/object_store.h"

namespace airt {
namespace {

using internal::FromProto;
using internal::ThrowError;

std::mutex g_mu;
std::unique_ptr<LocalCluster> g_cluster;   // what Init started, if anything; guarded by g_mu
// A driver's, made by Init; guarded by g_mu. Shared with the API calls running on it: one that
// races Shutdown finishes on it, and the last holder destroys it.
std::shared_ptr<core_worker::CoreWorker> g_core;
// In airt-worker: the process's one core worker (RunWorker owns it; Shutdown leaves it alone),
// and why the API cannot use it, if it cannot ("" when it can). Guarded by g_mu.
core_worker::CoreWorker* g_worker_core = nullptr;
std::string g_worker_unusable;
uint64_t g_generation = 0;  // guarded by g_mu: bumped by each new core worker
// A driver's worker id (Ray's get_worker_id() in a driver), drawn by each Init; guarded by g_mu.
WorkerId g_driver_worker;
// Objects GetPinned handed out, released at Shutdown if still held (a pin must not outlive the
// store connection it came from).
std::vector<std::weak_ptr<core_worker::GotObject>> g_pinned;  // guarded by g_mu
// Config::local_mode's runtime, instead of a core worker; guarded by g_mu for Init/Shutdown.
std::unique_ptr<local::LocalRuntime> g_local;
std::map<std::string, std::string> g_job_env;  // guarded by g_mu: Config::runtime_env's env_vars
bool g_default_detached = false;  // guarded by g_mu: Config::default_actor_lifetime is DETACHED

// The local-mode runtime, or null when the job runs on a cluster (or before Init). It stays valid
// while a task or call it runs uses it: Shutdown waits for those before destroying it.
local::LocalRuntime* Local() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_local.get();
}

[[noreturn]] void LocalModeLacks(const std::string& what) {
  throw UnimplementedError(what + " is not available in local mode (Config::local_mode)");
}

// The process's core worker, or null. g_mu held.
core_worker::CoreWorker* Current() { return g_worker_core ? g_worker_core : g_core.get(); }
// The same, held for a call made outside g_mu. g_mu held.
std::shared_ptr<core_worker::CoreWorker> CurrentHeld() {
  if (g_worker_core) return {std::shared_ptr<void>(), g_worker_core};  // RunWorker's
  return g_core;
}

// Every failure the API throws goes through one of the two Throws: a Status's (internal::
// ThrowStatus, the one Status map), or an object's error (below); both end in ThrowError, the one
// kind -> type map.
[[noreturn]] void Throw(const Status& status) { internal::ThrowStatus(status); }

// A connection that could not be made is the cluster being unreachable, whatever the cause
// (kNotFound: no alive node at the address).
Status Unreachable(const Status& status) {
  if (status.code() == Code::kInvalidArgument) return status;
  return Unavailable(status.ToString());
}

std::shared_ptr<core_worker::CoreWorker> Core() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_worker_core) {
    if (!g_worker_unusable.empty()) Throw(Unavailable(g_worker_unusable));
    // RunWorker owns it and outlives every call of its process: not counted here.
    return std::shared_ptr<core_worker::CoreWorker>(std::shared_ptr<void>(), g_worker_core);
  }
  if (!g_core) {
    Throw(
        Unavailable("airt is not initialized, or was shut down: call airt::Init() (Python: "
                    "airt.init()) first"));
  }
  return g_core;
}

}  // namespace

namespace internal {
std::shared_ptr<core_worker::CoreWorker> CurrentCore() { return Core(); }
}  // namespace internal

namespace {

ActorId ActorIdOf(const std::string& binary) {
  if (binary.size() != ActorId::kSize) {
    Throw(InvalidArgument("not an actor handle: " + std::to_string(binary.size()) + " bytes"));
  }
  return ActorId::FromRaw(reinterpret_cast<const uint8_t*>(binary.data()));
}

ObjectId IdOf(const std::string& binary) {
  if (binary.size() != ObjectId::kSize) {
    Throw(InvalidArgument("not an object reference: " + std::to_string(binary.size()) +
                          " bytes"));
  }
  return ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(binary.data()));
}

// An object's error (a task's, or what its owner saw): what() names the function, when there is
// one, before the message.
[[noreturn]] void Throw(const core_worker::ObjectError& e) {
  std::string what = e.function_name.empty() ? e.message : e.function_name + ": " + e.message;
  ThrowError(FromProto(e.kind), what, e.data);
}

// The job's own code: Config::code_search_path, else the running executable's folder.
std::string JobCodeSearchPath(const Config& config) {
  std::string code;
  for (const std::string& dir : config.code_search_path) {
    code += (code.empty() ? "" : ":") + dir;
  }
  if (code.empty()) {
    std::error_code ec;
    code = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().string();
  }
  return code;
}

// The local cluster's shape: the Config fields, then head_args over them. Throws Exception for a
// bad flag.
LocalClusterOptions ClusterOptionsOf(const Config& config) {
  LocalClusterOptions options{config.num_cpus, config.num_gpus, config.resources, "",
                              config.object_store_memory};
  for (const std::string& dir : config.code_search_path) {
    options.code_search_path += (options.code_search_path.empty() ? "" : ":") + dir;
  }
  Status applied = ApplyHeadArgs(config.head_args, &options);
  if (!applied.ok()) Throw(InvalidArgument("airt::Config: " + applied.message()));
  return options;
}

std::unique_ptr<LocalCluster> StartLocalCluster(const LocalClusterOptions& options) {
  Result<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  if (!cluster.ok()) {
    Status why = cluster.status();
    if (why.code() == Code::kInvalidArgument) Throw(why.WithContext("airt::Config"));
    Throw(Unavailable("no cluster address, and a local cluster could not start: " +
                      why.message()));
  }
  // Normal exit stops it too, after the driver has left (Shutdown is idempotent).
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit([] { Shutdown(); }); });
  return std::move(*cluster);
}

}  // namespace

void Init(const Config& config) {
  // Checked whichever way the job runs, before anything starts.
  LocalClusterOptions cluster_options = ClusterOptionsOf(config);
  std::map<std::string, std::string> job_env;
  if (config.runtime_env) job_env = internal::RuntimeEnvVars(*config.runtime_env);
  std::lock_guard<std::mutex> lock(g_mu);
  if (Current() || g_local) return;
  g_job_env = job_env;
  g_default_detached = config.default_actor_lifetime == ActorLifetime::DETACHED;
  if (config.local_mode) {
    if (!job_env.empty()) {
      throw UnimplementedError(
          "Config::runtime_env env_vars in local mode: its tasks share the driver's environment");
    }
    g_local = std::make_unique<local::LocalRuntime>(config.ray_namespace);
    return;
  }
  core_worker::CoreWorkerOptions options;
  options.head_address = config.address;
  if (options.head_address.empty()) {
    if (const char* env = std::getenv("AIRT_ADDRESS")) options.head_address = env;
  }
  std::unique_ptr<LocalCluster> cluster;
  if (options.head_address.empty()) {
    cluster = StartLocalCluster(cluster_options);
    options.head_address = cluster->head_address();
  }
  options.node_address = config.node_address;
  options.code_search_path = JobCodeSearchPath(config);
  options.ns = config.ray_namespace;
  options.max_lineage_bytes = core_worker::DefaultMaxLineageBytes();
  Result<std::unique_ptr<core_worker::CoreWorker>> core = core_worker::CoreWorker::Connect(options);
  if (!core.ok()) Throw(Unreachable(core.status()));
  g_core = std::move(*core);
  ++g_generation;
  g_driver_worker = WorkerId::FromRandom();
  g_cluster = std::move(cluster);
}

void Init(Config config, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    for (const std::string prefix : {"--airt_address=", "--ray_address="}) {
      if (arg.rfind(prefix, 0) == 0) config.address = arg.substr(prefix.size());
    }
    for (const std::string prefix : {"--airt_code_search_path=", "--ray_code_search_path="}) {
      if (arg.rfind(prefix, 0) != 0) continue;
      std::string list = arg.substr(prefix.size());
      config.code_search_path.clear();
      for (size_t start = 0, end; start < list.size(); start = end + 1) {
        end = std::min(list.find(':', start), list.size());
        if (end > start) config.code_search_path.push_back(list.substr(start, end - start));
      }
    }
    // Ray's other driver flags.
    auto value = [&arg](const std::string& prefix) -> std::optional<std::string> {
      if (arg.rfind(prefix, 0) != 0) return std::nullopt;
      return arg.substr(prefix.size());
    };
    if (auto ns = value("--ray_job_namespace=")) config.ray_namespace = *ns;
    if (auto password = value("--ray_redis_password=")) config.redis_password_ = *password;
    if (auto args = value("--ray_head_args=")) {
      for (size_t start = 0, end; start < args->size(); start = end + 1) {
        end = std::min(args->find(' ', start), args->size());
        if (end > start) config.head_args.push_back(args->substr(start, end - start));
      }
    }
    if (auto lifetime = value("--ray_default_actor_lifetime=")) {
      if (*lifetime != "detached" && *lifetime != "non_detached") {
        Throw(InvalidArgument("--ray_default_actor_lifetime=" + *lifetime +
                              ": must be detached or non_detached"));
      }
      config.default_actor_lifetime =
          *lifetime == "detached" ? ActorLifetime::DETACHED : ActorLifetime::NON_DETACHED;
    }
  }
  Init(config);
}

bool IsInitialized() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_core != nullptr || g_local != nullptr || (g_worker_core && g_worker_unusable.empty());
}

void Shutdown() {
  std::shared_ptr<core_worker::CoreWorker> core;
  std::unique_ptr<LocalCluster> cluster;
  std::unique_ptr<local::LocalRuntime> local_runtime;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    core = std::move(g_core);  // a worker's core worker stays: its process serves with it
    cluster = std::move(g_cluster);
    local_runtime = std::move(g_local);
    g_job_env.clear();
    g_default_detached = false;
    for (const std::weak_ptr<core_worker::GotObject>& held : g_pinned) {
      if (std::shared_ptr<core_worker::GotObject> object = held.lock()) object->pin.Release();
    }
    g_pinned.clear();
  }
  core.reset();  // the driver leaves before its cluster stops (or after the calls still on it)
  local_runtime.reset();  // waits for its running tasks
}

std::string GetNamespace() {
  if (local::LocalRuntime* local = Local()) return local->ns();
  return Core()->ns();
}

void ExitActor() {
  static const char* kOutside = "ExitActor: called outside an actor's method (a driver or a task)";
  if (local::LocalRuntime* local = Local()) {
    if (!local->RequestExit()) throw Exception(kOutside);
    // Skips the rest of the method; the runtime ends the actor when the call returns.
    throw Exception("ExitActor: the actor exits");
  }
  std::string actor = internal::CurrentActorId();
  if (actor.empty()) throw Exception(kOutside);
  Status marked =
      Core()->MarkActorDead(ActorIdOf(actor), "the actor called ExitActor (ray::ExitActor)");
  if (!marked.ok()) Throw(marked.WithContext("ExitActor"));
  // Dead for good in the directory: the owner finds the connection gone and fails the calls.
  std::fflush(nullptr);
  std::_Exit(0);
}

bool WasCurrentActorRestarted() {
  if (local::LocalRuntime* local = Local()) return local->CurrentActorRestarted();
  std::string actor = internal::CurrentActorId();
  if (actor.empty()) return false;
  Result<uint32_t> restarts = Core()->ActorRestarts(ActorIdOf(actor));
  if (!restarts.ok()) Throw(restarts.status().WithContext("WasCurrentActorRestarted"));
  return *restarts > 0;
}

namespace internal {

std::shared_ptr<void> HoldObject(const std::string& id) {
  if (id.size() != ObjectId::kSize) return nullptr;
  ObjectId object = IdOf(id);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!Current()) return nullptr;  // not counted: nothing to free it from
    Current()->AddLocalReference(object);
    generation = g_generation;
  }
  return std::shared_ptr<void>(nullptr, [object, generation](void*) {
    // After Shutdown, or in a later Init's core worker, there is nothing to release.
    std::lock_guard<std::mutex> lock(g_mu);
    if (Current() && g_generation == generation) Current()->RemoveLocalReference(object);
  });
}

namespace {
thread_local ContainedRefs* t_contained = nullptr;  // the innermost collector of this thread
}  // namespace

ContainedRefs::ContainedRefs() : outer_(t_contained) { t_contained = this; }
ContainedRefs::~ContainedRefs() { t_contained = outer_; }

RefOwner OwnerOfRef(const std::string& id) {
  if (id.size() != ObjectId::kSize) throw Exception("an ObjectRef without an object is written");
  ObjectId object = IdOf(id);
  if (t_contained) t_contained->Add(id);
  std::shared_ptr<core_worker::CoreWorker> core;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    core = CurrentHeld();
  }
  if (!core) return RefOwner{};  // local mode: one process, nothing to borrow
  Result<core_worker::OwnerAddress> owner = core->OwnerOf(object, /*escrow=*/!t_contained);
  if (!owner.ok()) Throw(owner.status());
  return RefOwner{owner->address, owner->worker.Binary()};
}

std::shared_ptr<void> HoldBorrowed(const std::string& id, const RefOwner& owner) {
  if (id.size() != ObjectId::kSize) return nullptr;
  if (owner.worker.size() != WorkerId::kSize) return HoldObject(id);
  ObjectId object = IdOf(id);
  core_worker::OwnerAddress from{
      owner.address, WorkerId::FromRaw(reinterpret_cast<const uint8_t*>(owner.worker.data()))};
  uint64_t generation;
  std::shared_ptr<core_worker::CoreWorker> core;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    core = CurrentHeld();
    if (!core) return nullptr;
    generation = g_generation;
  }
  core->AddBorrowedReference(object, from);  // waits for the owner: not under g_mu
  return std::shared_ptr<void>(nullptr, [object, generation](void*) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (Current() && g_generation == generation) Current()->RemoveLocalReference(object);
  });
}

void EnterWorkerMode(core_worker::CoreWorker* core, std::string unusable) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_worker_core = core;
  g_worker_unusable = std::move(unusable);
  ++g_generation;
}

void LeaveWorkerMode() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_worker_core) return;
  g_worker_core = nullptr;
  g_worker_unusable.clear();
  ++g_generation;
  for (const std::weak_ptr<core_worker::GotObject>& held : g_pinned) {
    if (std::shared_ptr<core_worker::GotObject> object = held.lock()) object->pin.Release();
  }
  g_pinned.clear();
}

namespace {

// The env_vars a call runs under: the job's, then those of the task or actor submitting it, then
// its own, each name taking the last value.
std::map<std::string, std::string> CallEnv(
    const std::optional<std::map<std::string, std::string>>& own) {
  std::map<std::string, std::string> env;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    env = g_job_env;
  }
  for (auto& [name, value] : InheritedEnvVars()) env[name] = value;
  if (own) {
    for (const auto& [name, value] : *own) env[name] = value;
  }
  return env;
}

// Sends the call to `function` through the worker's env wrapper (runtime_env_call.h) when it has
// env_vars to apply.
void WrapWithEnv(const char* wrapper, const std::map<std::string, std::string>& env, bool python,
                 std::string* function, std::vector<Argument>* args) {
  if (env.empty()) return;
  if (python) {
    throw UnimplementedError("runtime_env env_vars for a Python function or class called from C++");
  }
  WrapCall(wrapper, Serialize(env), function, args);
}

}  // namespace

// Argument values above this go to the object store and travel as references (Ray's
// max_direct_call_object_size is the same 100 KiB).
constexpr size_t kInlineArgumentLimit = 100 * 1024;

// The API's arguments as the core worker takes them.
std::vector<core_worker::TaskArgument> CoreArguments(std::vector<Argument> args) {
  std::vector<core_worker::TaskArgument> arguments;
  arguments.reserve(args.size());
  for (Argument& a : args) {
    core_worker::TaskArgument t;
    for (const std::string& ref : a.contained) t.contained.push_back(IdOf(ref));
    if (a.is_list) {
      t.is_list = true;
      for (const std::string& ref : a.ref_list) t.ref_list.push_back(IdOf(ref));
      arguments.push_back(std::move(t));
      continue;
    }
    if (a.ref.empty() && a.value.size() > kInlineArgumentLimit) {
      // A large value goes through the object store, as Ray does, not inside the task message.
      a.ref = PutBytes(std::move(a.value));
    }
    if (a.ref.empty()) {
      t.value = std::move(a.value);
    } else {
      t.ref = IdOf(a.ref);
    }
    arguments.push_back(std::move(t));
  }
  return arguments;
}

std::vector<std::string> Binaries(const std::vector<ObjectId>& ids) {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (const ObjectId& id : ids) out.push_back(id.Binary());
  return out;
}

std::vector<std::string> SubmitTask(const std::string& function, std::vector<Argument> args,
                                    const TaskSettings& settings) {
  if (local::LocalRuntime* local = Local()) {
    if (settings.python) LocalModeLacks("calling a Python function");
    if (settings.env_vars && !settings.env_vars->empty()) LocalModeLacks("SetRuntimeEnv");
    uint32_t num_returns = static_cast<uint32_t>(std::max(settings.num_returns, 1));
    return Binaries(local->SubmitTask(function, CoreArguments(std::move(args)), num_returns));
  }
  std::string target = function;
  WrapWithEnv(kTaskWithEnv, CallEnv(settings.env_vars), settings.python, &target, &args);
  core_worker::TaskOptions options;
  options.resources = ResourcesInGroup(
      settings.resources,
      {settings.placement_group_id, settings.bundle_index, settings.capture_child_tasks,
       settings.strategy_set, settings.python},
      kTaskCapturingChildren, &target, &args);
  options.accelerator_type = settings.accelerator_type;
  options.name = settings.name.empty() && target != function ? function : settings.name;
  options.num_returns = static_cast<uint32_t>(std::max(settings.num_returns, 1));
  options.max_retries = settings.max_retries < 0 ? -1 : settings.max_retries;
  options.python = settings.python;
  options.stream.streaming = settings.streaming;
  options.stream.backpressure = settings.generator_backpressure;
  options.strategy = CoreStrategy(settings.strategy, settings.label_selector);
  return Binaries(Core()->SubmitTask(target, CoreArguments(std::move(args)), options));
}

std::string CreateActor(const std::string& factory, std::vector<Argument> args,
                        const ActorSettings& settings) {
  core_worker::ActorOptions options;
  std::string target = factory;
  if (!Local()) {
    WrapWithEnv(kActorWithEnv, CallEnv(settings.env_vars), settings.python, &target, &args);
  }
  options.resources = ResourcesInGroup(
      settings.resources,
      {settings.placement_group_id, settings.bundle_index, settings.capture_child_tasks,
       settings.strategy_set, settings.python},
      Local() ? nullptr : kActorCapturingChildren, &target, &args);
  options.accelerator_type = settings.accelerator_type;
  options.name = settings.name;
  options.ns = settings.ns;
  options.max_restarts = settings.max_restarts < 0 ? -1 : settings.max_restarts;
  options.max_concurrency = static_cast<uint32_t>(std::max(settings.max_concurrency, 1));
  options.strategy = CoreStrategy(settings.strategy, settings.label_selector);
  bool default_detached;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    default_detached = g_default_detached;
  }
  options.detached = settings.detached.value_or(default_detached && !settings.name.empty());
  options.max_task_retries = settings.max_task_retries < 0 ? -1 : settings.max_task_retries;
  options.python = settings.python;
  Result<ActorId> id = Unavailable("");
  if (local::LocalRuntime* local = Local()) {
    if (settings.python) LocalModeLacks("creating a Python actor");
    if (settings.env_vars && !settings.env_vars->empty()) LocalModeLacks("SetRuntimeEnv");
    id = local->CreateActor(factory, CoreArguments(std::move(args)), options);
  } else {
    id = Core()->CreateActor(target, CoreArguments(std::move(args)), options);
  }
  if (!id.ok()) Throw(id.status());  // a taken name: kAlreadyExists, InvalidArgumentError
  return id->Binary();
}

std::vector<std::string> SubmitActorTask(const std::string& actor_id, const std::string& method,
                                         std::vector<Argument> args, int num_returns) {
  if (local::LocalRuntime* local = Local()) {
    return Binaries(local->SubmitActorTask(ActorIdOf(actor_id), method,
                                           CoreArguments(std::move(args)),
                                           static_cast<uint32_t>(std::max(num_returns, 1))));
  }
  return Binaries(Core()->SubmitActorTask(ActorIdOf(actor_id), method,
                                          CoreArguments(std::move(args)),
                                          static_cast<uint32_t>(std::max(num_returns, 1))));
}

std::string JobIdHex() {
  if (local::LocalRuntime* local = Local()) return local->job_id().Hex();
  return Core()->job_id().Hex();
}
std::string WorkerIdHex() {
  const WorkerId& id = Core()->worker_id();  // Nil in a driver: its core worker serves no tasks
  if (!id.IsNil()) return id.Hex();
  std::lock_guard<std::mutex> lock(g_mu);
  return g_driver_worker.Hex();
}
std::string HeadAddress() { return Core()->head_address(); }

void CancelOwnedTasks(bool force) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (Current()) Current()->CancelAllTasks(force);
}

std::string RegisteredName(const void* address, const char* what) {
  std::string name = FunctionRegistry::Global().NameOf(address);
  if (name.empty()) {
    Throw(InvalidArgument(std::string("this ") + what +
                          " is not registered: add it to an AIRT_REMOTE(...) list"));
  }
  return name;
}


std::string CurrentTaskId() { return ThisThreadsTask().task_id; }
std::string CurrentActorId() { return ThisThreadsTask().actor_id; }

// Streaming generators (airt/generator.h).
std::vector<std::string> SubmitStreamingActorTask(const std::string& actor_id,
                                                  const std::string& method,
                                                  std::vector<Argument> args, int backpressure) {
  if (Local()) LocalModeLacks("a generator actor method (airt::Generator<T>)");
  return Binaries(Core()->SubmitActorTask(ActorIdOf(actor_id), method,
                                          CoreArguments(std::move(args)), 1,
                                          core_worker::StreamOptions{true, backpressure}));
}

std::shared_ptr<void> HoldGenerator(const std::string& completed) {
  std::shared_ptr<void> reference = HoldObject(completed);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_core) return reference;
    generation = g_generation;
  }
  ObjectId id = IdOf(completed);
  return std::shared_ptr<void>(nullptr, [id, generation, reference](void*) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_core && g_generation == generation) g_core->DropGenerator(id);
  });
}

local::LocalRuntime* CurrentLocal() { return Local(); }
[[noreturn]] void ThrowLocalModeLacks(const std::string& what) { LocalModeLacks(what); }
ObjectId ObjectIdOf(const std::string& binary) { return IdOf(binary); }
ActorId ActorIdOfBinary(const std::string& binary) { return ActorIdOf(binary); }
[[noreturn]] void ThrowObjectError(const core_worker::ObjectError& e) { Throw(e); }

void KeepPinned(const std::vector<std::shared_ptr<core_worker::GotObject>>& held) {
  std::lock_guard<std::mutex> lock(g_mu);
  std::erase_if(g_pinned,
                [](const std::weak_ptr<core_worker::GotObject>& p) { return p.expired(); });
  for (const auto& object : held) g_pinned.push_back(object);
}

}  // namespace internal
}  // namespace airt
