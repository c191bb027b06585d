// The driver API's non-template half: one CoreWorker per process, created by Init. The process-
// wide instance is the API's edge only (Ray's API is global); the core worker beneath takes its
// options through its constructor.
#include "airt/actor.h"
#include "airt/driver.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "api/core_worker/core_worker.h"
#include "api/internal/worker_context.h"

namespace airt {
namespace {

std::mutex g_mu;
std::unique_ptr<core::CoreWorker> g_core;  // guarded by g_mu for Init/Shutdown
// In airt-worker: how to make the core worker at the first use of the API.
std::optional<core::CoreWorkerOptions> g_worker_options;  // guarded by g_mu

core::CoreWorker& Core() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_core && g_worker_options) {
    if (g_worker_options->head_address.empty()) {
      throw UnavailableError("this worker was started without the head's address "
                             "(airt-worker --head-address): its tasks cannot submit work");
    }
    Result<std::unique_ptr<core::CoreWorker>> core = core::CoreWorker::Connect(*g_worker_options);
    if (!core.ok()) throw UnavailableError(core.status().ToString());
    g_core = std::move(*core);
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
    case core::ObjectErrorKind::kTaskError:
    case core::ObjectErrorKind::kFunctionNotFound: throw TaskError(what);
    case core::ObjectErrorKind::kWorkerCrashed: throw WorkerCrashedError(what);
    case core::ObjectErrorKind::kInfeasible: throw InfeasibleError(what);
    case core::ObjectErrorKind::kUnavailable: throw UnavailableError(what);
    case core::ObjectErrorKind::kActorDied: throw ActorDiedError(what);
  }
  throw Exception(what);
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
  if (options.head_address.empty()) {
    throw UnavailableError(
        "no cluster address: set Config::address or AIRT_ADDRESS (starting a local cluster from "
        "Init is not built yet; run `airt start --head` first)");
  }
  options.node_address = config.node_address;
  Result<std::unique_ptr<core::CoreWorker>> core = core::CoreWorker::Connect(options);
  if (!core.ok()) throw UnavailableError(core.status().ToString());
  g_core = std::move(*core);
}

void Init(Config config, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    for (const std::string prefix : {"--airt_address=", "--ray_address="}) {
      if (arg.rfind(prefix, 0) == 0) config.address = arg.substr(prefix.size());
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
  {
    std::lock_guard<std::mutex> lock(g_mu);
    core = std::move(g_core);
  }
}

namespace internal {

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
  options.name = settings.name;
  options.max_retries = static_cast<uint32_t>(settings.max_retries < 0 ? 0 : settings.max_retries);
  return Binaries(Core().SubmitTask(function, CoreArguments(std::move(args)), options));
}

std::string CreateActor(const std::string& factory, std::vector<Argument> args,
                        const ActorSettings& settings) {
  core::ActorOptions options;
  options.resources = settings.resources;
  options.name = settings.name;
  options.ns = settings.ns;
  options.max_restarts = settings.max_restarts < 0 ? -1 : settings.max_restarts;
  options.max_concurrency = static_cast<uint32_t>(std::max(settings.max_concurrency, 1));
  Result<ActorId> id = Core().CreateActor(factory, CoreArguments(std::move(args)), options);
  if (!id.ok()) {
    if (id.status().code() == Code::kAlreadyExists) throw Exception(id.status().ToString());
    throw UnavailableError(id.status().ToString());
  }
  return id->Binary();
}

std::vector<std::string> SubmitActorTask(const std::string& actor_id, const std::string& method,
                                         std::vector<Argument> args) {
  return Binaries(
      Core().SubmitActorTask(ActorIdOf(actor_id), method, CoreArguments(std::move(args)), 1));
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

std::string PutBytes(std::string bytes) {
  Result<ObjectId> id = Core().Put(std::move(bytes));
  if (!id.ok()) throw UnavailableError(id.status().ToString());
  return id->Binary();
}

std::vector<std::string> GetBytes(const std::vector<std::string>& ids, int64_t timeout_ms) {
  std::vector<ObjectId> object_ids;
  for (const std::string& id : ids) object_ids.push_back(IdOf(id));
  Result<std::vector<core::GotObject>> got = Core().Get(object_ids, timeout_ms);
  if (!got.ok()) {
    if (got.status().code() == Code::kDeadlineExceeded) throw TimeoutError(got.status().message());
    throw UnavailableError(got.status().ToString());
  }
  std::vector<std::string> out;
  for (core::GotObject& g : *got) {
    if (g.error) Throw(*g.error);
    out.push_back(*g.value);
  }
  return out;
}

std::vector<bool> WaitReady(const std::vector<std::string>& ids, int num_ready,
                            int64_t timeout_ms) {
  std::vector<ObjectId> object_ids;
  for (const std::string& id : ids) object_ids.push_back(IdOf(id));
  return Core().Wait(object_ids, static_cast<size_t>(num_ready), timeout_ms);
}

}  // namespace internal
}  // namespace airt
