#include "api/internal/worker_process.h"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include "airt/internal/function_registry.h"
#include "api/internal/code_loader.h"
#include "api/internal/task_executor.h"
#include "api/internal/worker_context.h"
#include "api/internal/worker_service.h"
#include "common/logging.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"
#include "objectstore/object_store.h"

namespace airt::worker {
namespace {

enum class Stop { kExitRequested, kNodeLost };

void LogRegistry(internal::FunctionRegistry& registry) {
  for (const std::string& problem : registry.TakeProblems()) AIRT_LOG(WARNING) << problem;
  std::vector<std::string> names = registry.Names();
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  AIRT_LOG(INFO) << names.size() << " remote function(s) registered" << (list.empty() ? "" : ": ")
                 << list;
}

// Tells the node where this worker serves. Throws (a kj::Exception) when the node cannot be
// reached, refuses, or does not answer within the timeout.
kj::Own<capnp::TwoPartyClient> RegisterWithNode(const WorkerOptions& options, uint16_t port,
                                                kj::AsyncIoContext& io,
                                                kj::Own<kj::AsyncIoStream>& stream) {
  kj::Timer& timer = io.provider->getTimer();
  auto deadline = options.register_timeout_ms * kj::MILLISECONDS;
  auto address = timer
                     .timeoutAfter(deadline, io.provider->getNetwork().parseAddress(
                                                 options.node_address, options.node_port))
                     .wait(io.waitScope);
  stream = timer.timeoutAfter(deadline, address->connect()).wait(io.waitScope);
  auto client = kj::heap<capnp::TwoPartyClient>(*stream);
  auto node = client->bootstrap().castAs<proto::Node>();
  auto request = node.registerWorkerRequest();
  auto worker = request.initWorker();
  worker.setWorkerId(capnp::Data::Reader(options.worker_id.data(), WorkerId::kSize));
  worker.setHost(options.node_address);
  worker.setPort(port);
  worker.setPid(static_cast<int32_t>(::getpid()));
  timer.timeoutAfter(deadline, request.send().ignoreResult()).wait(io.waitScope);
  return client;
}

// Serves proto::Worker on this thread's event loop until exit() or the node's loss (which ends
// the process); the exit code.
int Serve(const WorkerOptions& options, TaskExecutor& executor) {
  int exit_code = kExitOk;
  Status ran = CatchKj([&] {
    kj::AsyncIoContext io = kj::setupAsyncIo();
    kj::Timer& timer = io.provider->getTimer();

    // Serve on a free port of the node's address.
    kj::Own<kj::ConnectionReceiver> listener;
    Status bound = CatchKj([&] {
      auto address =
          io.provider->getNetwork().parseAddress(options.node_address, 0).wait(io.waitScope);
      listener = address->listen();
    });
    if (!bound.ok()) {
      AIRT_LOG(ERROR) << "cannot serve on " << options.node_address << ": " << bound.ToString();
      exit_code = kExitStartFailed;
      return;
    }
    uint16_t port = static_cast<uint16_t>(listener->getPort());
    auto exit_paf = kj::newPromiseAndFulfiller<void>();
    capnp::TwoPartyServer server(kj::heap<WorkerService>(
        executor, options.job_id,
        ReturnsAt{options.transfer_address,
                  options.node_address + ":" + std::to_string(options.node_port)},
        kj::mv(exit_paf.fulfiller), [](bool force) { internal::CancelOwnedTasks(force); }));
    kj::Promise<void> serving = server.listen(*listener);

    kj::Own<kj::AsyncIoStream> node_stream;
    kj::Own<capnp::TwoPartyClient> node;
    Status registered = CatchKj([&] { node = RegisterWithNode(options, port, io, node_stream); });
    if (!registered.ok()) {
      AIRT_LOG(ERROR) << "cannot register with the node at " << options.node_address << ":"
                      << options.node_port << ": " << registered.ToString();
      exit_code = kExitStartFailed;
      return;
    }
    AIRT_LOG(INFO) << "worker " << options.worker_id.Hex() << " serving on " << options.node_address
                   << ":" << port << ", registered with the node at " << options.node_address << ":"
                   << options.node_port;

    Stop stop = exit_paf.promise.then([] { return Stop::kExitRequested; })
                    .exclusiveJoin(node->onDisconnect().then([] { return Stop::kNodeLost; }))
                    .exclusiveJoin(serving.then([] { return Stop::kExitRequested; }))
                    .wait(io.waitScope);
    if (stop == Stop::kNodeLost) {
      AIRT_LOG(ERROR) << "the node's connection dropped: exiting";
      std::fflush(nullptr);
      ::_exit(kExitNodeLost);
    }
    // Stop accepting; let exit's answer be written and its caller hang up, within the grace.
    AIRT_LOG(INFO) << "exiting";
    server.drain()
        .exclusiveJoin(timer.afterDelay(options.exit_grace_ms * kj::MILLISECONDS))
        .wait(io.waitScope);
  });
  if (!ran.ok()) {
    AIRT_LOG(ERROR) << "worker event loop failed: " << ran.ToString();
    return kExitStartFailed;
  }
  return exit_code;
}

}  // namespace

int RunWorker(const WorkerOptions& options, Fallback fallback, Interrupt interrupt) {
  // The index only: a worker maps the data pages of the objects it reads as it reads them.
  auto store = objectstore::StoreClient::Connect(
      options.store_socket, objectstore::StoreClient::Options{.prefault_data = false});
  if (!store.ok()) {
    AIRT_LOG(ERROR) << "cannot connect to the object store at " << options.store_socket << ": "
                    << store.status().ToString();
    return kExitStartFailed;
  }
  core::CoreWorkerOptions api;
  api.head_address = options.head_address;
  api.node_address = options.node_address;
  api.node_port = options.node_port;
  api.job = options.job_id;
  api.worker = options.worker_id;
  api.code_search_path = options.code_search_path;  // nested work loads what this worker did
  if (!options.job_id.IsNil()) internal::EnterWorkerMode(std::move(api));
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
  // the interrupt's signal is handled; its event loop then runs on a thread of its own.
  executor_options.on_caller_thread = static_cast<bool>(executor_options.interrupt);
  TaskExecutor executor(registry, store->get(), executor_options);
  if (!executor_options.on_caller_thread) return Serve(options, executor);
  int exit_code = kExitOk;
  std::thread loop([&] {
    exit_code = Serve(options, executor);
    executor.Stop();
  });
  executor.RunQueued();
  loop.join();
  return exit_code;
}

}  // namespace airt::worker
