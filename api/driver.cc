// The driver API's non-template half: one CoreWorker per process, created by Init. The process-
// wide instance is the API's edge only (Ray's API is global); the core worker beneath takes its
// options through its constructor.
#include "airt/driver.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>

#include "airt/actor.h"
#include "airt/cancel.h"
#include "api/core_worker/core_worker.h"
#include "api/internal/worker_context.h"
#include "api/local_cluster.h"
#include "objectstore/object_store.h"

namespace airt {
namespace {

std::mutex g_mu;
std::unique_ptr<LocalCluster> g_cluster;   // what Init started, if anything; guarded by g_mu
std::unique_ptr<core::CoreWorker> g_core;  // guarded by g_mu for Init/Shutdown
uint64_t g_generation = 0;                 // guarded by g_mu: bumped by each new core worker
// In airt-worker: how to make the core worker at the first use of the API.
std::optional<core::CoreWorkerOptions> g_worker_options;  // guarded by g_mu
// Objects GetPinned handed out, released at Shutdown if still held (a pin must not outlive the
// store connection it came from).
std::vector<std::weak_ptr<core::GotObject>> g_pinned;  // guarded by g_mu

core::CoreWorker& Core() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_core && g_worker_options) {
    if (g_worker_options->head_address.empty()) {
      throw UnavailableError(
          "this worker was started without the head's address "
          "(airt-worker --head-address): its tasks cannot submit work");
    }
    Result<std::unique_ptr<core::CoreWorker>> core = core::CoreWorker::Connect(*g_worker_options);
    if (!core.ok()) throw UnavailableError(core.status().ToString());
    g_core = std::move(*core);
    ++g_generation;
  }
  if (!g_core) throw UnavailableError("airt is not initialized: call airt::Init() first");
  return *g_core;
}

ActorId ActorIdOf(const std::string& binary) {
  if (binary.size() != ActorId::kSize) {
    throw Exception("not an actor handle: " + std::to_string(binary.size()) + " bytes");
  }
  return ActorId::FromRaw(reinterpret_cast<const uint8_t*>(binary.data()));
}

ObjectId IdOf(const std::string& binary) {
  if (binary.size() != ObjectId::kSize) {
    throw Exception("not an object reference: " + std::to_string(binary.size()) + " bytes");
  }
  return ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(binary.data()));
}

[[noreturn]] void Throw(const core::ObjectError& e) {
  std::string what = e.function_name + ": " + e.message;
  switch (e.kind) {
    case core::ObjectErrorKind::kTaskError: throw TaskError(what);
    case core::ObjectErrorKind::kFunctionNotFound: throw FunctionNotFoundError(what);
    case core::ObjectErrorKind::kWorkerCrashed: throw WorkerCrashedError(what);
    case core::ObjectErrorKind::kInfeasible: throw InfeasibleError(what);
    case core::ObjectErrorKind::kUnavailable: throw UnavailableError(what);
    case core::ObjectErrorKind::kActorDied: throw ActorDiedError(what);
    case core::ObjectErrorKind::kCancelled: throw TaskCancelledError(what);
  }
  throw Exception(what);
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

std::unique_ptr<LocalCluster> StartLocalCluster(const Config& config) {
  LocalClusterOptions options{config.num_cpus, config.num_gpus, config.resources, "",
                              config.object_store_memory};
  for (const std::string& dir : config.code_search_path) {
    options.code_search_path += (options.code_search_path.empty() ? "" : ":") + dir;
  }
  Result<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
  if (!cluster.ok()) {
    Status why = cluster.status();
    if (why.code() == Code::kInvalidArgument) throw Exception("airt::Config: " + why.message());
    throw UnavailableError("no cluster address, and a local cluster could not start: " +
                           why.message());
  }
  // Normal exit stops it too, after the driver has left (Shutdown is idempotent).
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit([] { Shutdown(); }); });
  return std::move(*cluster);
}

}  // namespace

void Init(const Config& config) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_core) return;
  core::CoreWorkerOptions options;
  options.head_address = config.address;
  if (options.head_address.empty()) {
    if (const char* env = std::getenv("AIRT_ADDRESS")) options.head_address = env;
  }
  std::unique_ptr<LocalCluster> cluster;
  if (options.head_address.empty()) {
    cluster = StartLocalCluster(config);
    options.head_address = cluster->head_address();
  }
  options.node_address = config.node_address;
  options.code_search_path = JobCodeSearchPath(config);
  options.ns = config.ray_namespace;
  Result<std::unique_ptr<core::CoreWorker>> core = core::CoreWorker::Connect(options);
  if (!core.ok()) throw UnavailableError(core.status().ToString());
  g_core = std::move(*core);
  ++g_generation;
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
  }
  Init(config);
}

bool IsInitialized() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_core != nullptr || g_worker_options.has_value();
}

void Shutdown() {
  std::unique_ptr<core::CoreWorker> core;
  std::unique_ptr<LocalCluster> cluster;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    core = std::move(g_core);
    cluster = std::move(g_cluster);
    for (const std::weak_ptr<core::GotObject>& held : g_pinned) {
      if (std::shared_ptr<core::GotObject> object = held.lock()) object->pin.Release();
    }
    g_pinned.clear();
  }
  core.reset();  // the driver leaves before its cluster stops
}

namespace internal {

std::shared_ptr<void> HoldObject(const std::string& id) {
  if (id.size() != ObjectId::kSize) return nullptr;
  ObjectId object = IdOf(id);
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_core) return nullptr;  // not counted: nothing to free it from
    g_core->AddLocalReference(object);
    generation = g_generation;
  }
  return std::shared_ptr<void>(nullptr, [object, generation](void*) {
    // After Shutdown, or in a later Init's core worker, there is nothing to release.
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_core && g_generation == generation) g_core->RemoveLocalReference(object);
  });
}

void EnterWorkerMode(core::CoreWorkerOptions options) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_worker_options = std::move(options);
}

// Argument values above this go to the object store and travel as references (Ray's
// max_direct_call_object_size is the same 100 KiB).
constexpr size_t kInlineArgumentLimit = 100 * 1024;

// The API's arguments as the core worker takes them.
std::vector<core::TaskArgument> CoreArguments(std::vector<Argument> args) {
  std::vector<core::TaskArgument> arguments;
  arguments.reserve(args.size());
  for (Argument& a : args) {
    core::TaskArgument t;
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
  core::TaskOptions options;
  options.resources = settings.resources;
  options.accelerator_type = settings.accelerator_type;
  options.name = settings.name;
  options.num_returns = static_cast<uint32_t>(std::max(settings.num_returns, 1));
  options.max_retries = static_cast<uint32_t>(settings.max_retries < 0 ? 0 : settings.max_retries);
  options.python = settings.python;
  options.stream.streaming = settings.streaming;
  options.stream.backpressure = settings.generator_backpressure;
  return Binaries(Core().SubmitTask(function, CoreArguments(std::move(args)), options));
}

std::string CreateActor(const std::string& factory, std::vector<Argument> args,
                        const ActorSettings& settings) {
  core::ActorOptions options;
  options.resources = settings.resources;
  options.accelerator_type = settings.accelerator_type;
  options.name = settings.name;
  options.ns = settings.ns;
  options.max_restarts = settings.max_restarts < 0 ? -1 : settings.max_restarts;
  options.max_concurrency = static_cast<uint32_t>(std::max(settings.max_concurrency, 1));
  options.detached = settings.detached;
  options.max_task_retries = settings.max_task_retries < 0 ? -1 : settings.max_task_retries;
  options.python = settings.python;
  Result<ActorId> id = Core().CreateActor(factory, CoreArguments(std::move(args)), options);
  if (!id.ok()) {
    Code code = id.status().code();
    if (code == Code::kAlreadyExists || code == Code::kInvalidArgument) {
      throw Exception(id.status().ToString());
    }
    throw UnavailableError(id.status().ToString());
  }
  return id->Binary();
}

std::vector<std::string> SubmitActorTask(const std::string& actor_id, const std::string& method,
                                         std::vector<Argument> args, int num_returns) {
  return Binaries(Core().SubmitActorTask(ActorIdOf(actor_id), method,
                                         CoreArguments(std::move(args)),
                                         static_cast<uint32_t>(std::max(num_returns, 1))));
}

std::vector<NodeInfo> ClusterNodes() {
  core::CoreWorker& core = Core();
  Result<std::vector<core::CoreWorker::NodeView>> view = core.ClusterView();
  if (!view.ok()) throw UnavailableError(view.status().ToString());
  std::vector<NodeInfo> out;
  for (const auto& n : *view) {
    out.push_back(NodeInfo{n.id.Hex(), n.address, n.alive,
                           n.alive && n.address == core.node_address(), n.total, n.available});
  }
  return out;
}

std::string JobIdHex() { return Core().job_id().Hex(); }

bool KvPut(const std::string& ns, const std::string& key, const std::string& value,
           bool overwrite) {
  Result<bool> added = Core().KvPut(ns, key, value, overwrite);
  if (!added.ok()) throw UnavailableError(added.status().ToString());
  return *added;
}

std::optional<std::string> KvGet(const std::string& ns, const std::string& key) {
  Result<std::optional<std::string>> value = Core().KvGet(ns, key);
  if (!value.ok()) throw UnavailableError(value.status().ToString());
  return *value;
}

std::string LookupActor(const std::string& name, const std::string& ns) {
  Result<ActorId> id = Core().GetActor(name, ns);
  if (id.ok()) return id->Binary();
  if (id.status().code() == Code::kNotFound) return "";
  throw UnavailableError(id.status().ToString());
}

void KillActor(const std::string& actor_id, bool no_restart) {
  Status killed = Core().KillActor(ActorIdOf(actor_id), no_restart);
  if (killed.ok()) return;
  if (killed.code() == Code::kNotFound) throw ActorDiedError(killed.ToString());
  throw UnavailableError(killed.ToString());
}

void CancelTask(const std::string& object_id, bool force, bool recursive) {
  Status cancelled = Core().CancelTask(IdOf(object_id), force, recursive);
  if (cancelled.ok()) return;
  if (cancelled.code() == Code::kInvalidArgument) throw Exception(cancelled.message());
  throw UnavailableError(cancelled.ToString());
}

void CancelOwnedTasks(bool force) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_core) g_core->CancelAllTasks(force);
}

std::string RegisteredName(const void* address, const char* what) {
  std::string name = FunctionRegistry::Global().NameOf(address);
  if (name.empty()) {
    throw Exception(std::string("this ") + what +
                    " is not registered: add it to an AIRT_REMOTE(...) list");
  }
  return name;
}

void PlacementGroupsNotBuilt() {
  throw UnimplementedError(
      "SetPlacementGroup: placement groups (gang reservation of bundles) are not built yet");
}

std::string PutBytes(std::string bytes) {
  Result<ObjectId> id = Core().Put(std::move(bytes));
  if (!id.ok()) throw UnavailableError(id.status().ToString());
  return id->Binary();
}

std::string PutWith(uint64_t size, const std::function<void(uint8_t* out)>& write) {
  Result<ObjectId> id = Core().Put(size, write);
  if (!id.ok()) throw UnavailableError(id.status().ToString());
  return id->Binary();
}

void CopyOut(uint8_t* dst, const char* src, size_t n) {
  objectstore::CopyToObject(dst, reinterpret_cast<const uint8_t*>(src), n);
}

void GetEach(const std::vector<std::string>& ids, int64_t timeout_ms,
             const std::function<void(size_t i, std::string_view bytes)>& use) {
  std::vector<ObjectId> object_ids;
  for (const std::string& id : ids) object_ids.push_back(IdOf(id));
  Status got = Core().GetEach(object_ids, timeout_ms, [&](size_t i, const core::GotObject& g) {
    if (g.error) Throw(*g.error);
    use(i, g.bytes());
  });
  if (!got.ok()) {
    if (got.code() == Code::kDeadlineExceeded) throw TimeoutError(got.message());
    throw UnavailableError(got.ToString());
  }
}

std::vector<PinnedBytes> GetPinned(const std::vector<std::string>& ids, int64_t timeout_ms) {
  std::vector<ObjectId> object_ids;
  for (const std::string& id : ids) object_ids.push_back(IdOf(id));
  std::vector<PinnedBytes> out(ids.size());
  std::vector<std::shared_ptr<core::GotObject>> held;
  Status got = Core().GetEach(object_ids, timeout_ms, [&](size_t i, core::GotObject& g) {
    if (g.error) Throw(*g.error);
    auto object = std::make_shared<core::GotObject>(std::move(g));
    out[i] = PinnedBytes{object->bytes(), object};
    if (object->pin.valid()) held.push_back(object);
  });
  if (!got.ok()) {
    if (got.code() == Code::kDeadlineExceeded) throw TimeoutError(got.message());
    throw UnavailableError(got.ToString());
  }
  if (!held.empty()) {
    std::lock_guard<std::mutex> lock(g_mu);
    std::erase_if(g_pinned, [](const std::weak_ptr<core::GotObject>& p) { return p.expired(); });
    for (auto& object : held) g_pinned.push_back(object);
  }
  return out;
}

std::string CurrentTaskId() { return ThisThreadsTask().task_id; }
std::string CurrentActorId() { return ThisThreadsTask().actor_id; }

std::vector<std::string> GetBytes(const std::vector<std::string>& ids, int64_t timeout_ms) {
  std::vector<std::string> out(ids.size());
  GetEach(ids, timeout_ms, [&](size_t i, std::string_view bytes) { out[i] = std::string(bytes); });
  return out;
}

std::vector<bool> WaitReady(const std::vector<std::string>& ids, int num_ready,
                            int64_t timeout_ms) {
  std::vector<ObjectId> object_ids;
  for (const std::string& id : ids) object_ids.push_back(IdOf(id));
  return Core().Wait(object_ids, static_cast<size_t>(num_ready), timeout_ms);
}

// Streaming generators (airt/generator.h).
std::vector<std::string> SubmitStreamingActorTask(const std::string& actor_id,
                                                  const std::string& method,
                                                  std::vector<Argument> args, int backpressure) {
  return Binaries(Core().SubmitActorTask(ActorIdOf(actor_id), method,
                                         CoreArguments(std::move(args)), 1,
                                         core::StreamOptions{true, backpressure}));
}

std::string NextGeneratorItem(const std::string& completed, int64_t timeout_ms) {
  Result<std::optional<ObjectId>> next = Core().NextGeneratorItem(IdOf(completed), timeout_ms);
  if (!next.ok()) {
    Code code = next.status().code();
    if (code == Code::kDeadlineExceeded) throw TimeoutError(next.status().message());
    if (code == Code::kNotFound) throw Exception(next.status().ToString());
    throw UnavailableError(next.status().ToString());
  }
  return *next ? (*next)->Binary() : std::string();
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

}  // namespace internal
}  // namespace airt
