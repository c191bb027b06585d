#include "api/internal/worker_process.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <capnp/capability.h>
#include <kj/async.h>
#include <kj/common.h>

#include "airt/internal/function_registry.h"
#include "api/core_worker/core_worker.h"
#include "api/internal/code_loader.h"
#include "api/internal/task_executor.h"
#include "api/internal/worker_context.h"
#include "api/internal/worker_service.h"
#include "common/logging.h"
#include "common/status.h"

namespace airt::internal {
namespace {

void LogRegistry(internal::FunctionRegistry& registry) {
  for (const std::string& problem : registry.TakeProblems()) AIRT_LOG(WARNING) << problem;
  std::vector<std::string> names = registry.Names();
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  AIRT_LOG(INFO) << names.size() << " remote function(s) registered" << (list.empty() ? "" : ": ")
                 << list;
}

// Serves proto::Worker on the core worker's loop (a WorkerService over `executor`) and registers
// with the node; false, having logged why, when that fails. A broken node connection ends the
// process at once.
bool StartServing(const WorkerOptions& options, core_worker::CoreWorker& core,
                  TaskExecutor& executor) {
  core_worker::WorkerServing serving;
  serving.make_service = [&options, &executor](kj::Own<kj::PromiseFulfiller<void>> on_exit,
                                               std::function<void(bool)> cancel_children) {
    return capnp::Capability::Client(kj::heap<WorkerService>(
        executor, options.job_id,
        ReturnsAt{options.transfer_address,
                  options.node_address + ":" + std::to_string(options.node_port)},
        kj::mv(on_exit), std::move(cancel_children)));
  };
  serving.register_timeout_ms = options.register_timeout_ms;
  serving.exit_grace_ms = options.exit_grace_ms;
  serving.on_node_lost = [] {
    AIRT_LOG(ERROR) << "the node's connection dropped: exiting";
    std::fflush(nullptr);
    ::_exit(kExitNodeLost);
  };
  Result<uint16_t> port = core.ServeWorker(std::move(serving));
  if (!port.ok()) {
    AIRT_LOG(ERROR) << "cannot register with the node at " << options.node_address << ":"
                    << options.node_port << ": " << port.status().ToString();
    return false;
  }
  AIRT_LOG(INFO) << "worker " << options.worker_id.Hex() << " serving on " << options.node_address
                 << ":" << *port << ", registered with the node at " << options.node_address << ":"
                 << options.node_port;
  return true;
}

}  // namespace

int RunWorker(const WorkerOptions& options, Fallback fallback, Interrupt interrupt) {
  // The process's one core worker: it submits (for tasks that submit tasks), owns, gets, and
  // serves this worker's tasks, all on its one loop, with one store client and one connection
  // per peer.
  core_worker::CoreWorkerOptions api;
  api.head_address = options.head_address;
  api.node_address = options.node_address;
  api.node_port = options.node_port;
  api.job = options.job_id;
  api.worker = options.worker_id;
  api.store_socket = options.store_socket;
  api.max_lineage_bytes = core_worker::DefaultMaxLineageBytes();
  api.transfer_address = options.transfer_address;
  api.code_search_path = options.code_search_path;  // nested work loads what this worker did
  Result<std::unique_ptr<core_worker::CoreWorker>> core =
      core_worker::CoreWorker::Connect(std::move(api));
  if (!core.ok()) {
    // A worker's core worker connects to nothing else before it serves.
    AIRT_LOG(ERROR) << "cannot connect to the object store at " << options.store_socket << ": "
                    << core.status().ToString();
    return kExitStartFailed;
  }
  std::string unusable;
  if (options.job_id.IsNil()) {
    unusable = "this worker runs no job (airt-worker without --job-id): its tasks cannot submit "
               "work";
  } else if (options.head_address.empty()) {
    unusable = "this worker was started without the head's address (airt-worker "
               "--head-address): its tasks cannot submit work";
  }
  internal::EnterWorkerMode(core->get(), unusable);
  auto leave = kj::defer([] { internal::LeaveWorkerMode(); });  // before the core worker goes
  LoadCodeSearchPath(options.code_search_path);
  internal::FunctionRegistry& registry = internal::FunctionRegistry::Global();
  LogRegistry(registry);

  TaskExecutor::Options executor_options;
  executor_options.inline_threshold = options.inline_threshold;
  executor_options.fetch_timeout_ms = static_cast<int64_t>(options.fetch_timeout_ms);
  executor_options.code_search_path = options.code_search_path;
  executor_options.fallback = std::move(fallback);
  executor_options.interrupt = std::move(interrupt);
  // An interruptible worker (a Python one) runs its tasks on this thread, its main thread, where
  // the interrupt's signal is handled; otherwise on the executor's own thread. Never on the core
  // worker's loop, which a task's Get waits on.
  executor_options.on_caller_thread = static_cast<bool>(executor_options.interrupt);
  executor_options.puller = &(*core)->puller();  // one puller, one connection per peer node
  TaskExecutor executor(registry, &(*core)->store(), executor_options);
  if (!StartServing(options, **core, executor)) return kExitStartFailed;
  if (!executor_options.on_caller_thread) {
    (*core)->WaitServingEnded();
  } else {
    std::thread waiter([&] {
      (*core)->WaitServingEnded();
      executor.Stop();
    });
    executor.RunQueued();
    waiter.join();
  }
  AIRT_LOG(INFO) << "exiting";
  return kExitOk;
}

}  // namespace airt::internal
