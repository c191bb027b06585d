// The driver API's non-template half: one CoreWorker per process, created by Init. The process-
// wide instance is the API's edge only (Ray's API is global); the core worker beneath takes its
// options through its constructor.
#include "airt/driver.h"

#include <cstdlib>
#include <mutex>

#include "api/core_worker/core_worker.h"

namespace airt {
namespace {

std::mutex g_mu;
std::unique_ptr<core::CoreWorker> g_core;  // guarded by g_mu for Init/Shutdown

core::CoreWorker& Core() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_core) throw UnavailableError("airt is not initialized: call airt::Init() first");
  return *g_core;
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
  return g_core != nullptr;
}

void Shutdown() {
  std::unique_ptr<core::CoreWorker> core;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    core = std::move(g_core);
  }
}

namespace internal {

// Argument values above this go to the object store and travel as references (Ray's
// max_direct_call_object_size is the same 100 KiB).
constexpr size_t kInlineArgumentLimit = 100 * 1024;

std::vector<std::string> SubmitTask(const std::string& function, std::vector<Argument> args,
                                    const TaskSettings& settings) {
  std::vector<core::TaskArgument> arguments;
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
  core::TaskOptions options;
  options.resources = settings.resources;
  options.name = settings.name;
  options.max_retries = static_cast<uint32_t>(settings.max_retries < 0 ? 0 : settings.max_retries);
  std::vector<std::string> ids;
  for (const ObjectId& id : Core().SubmitTask(function, std::move(arguments), options)) {
    ids.push_back(id.Binary());
  }
  return ids;
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
