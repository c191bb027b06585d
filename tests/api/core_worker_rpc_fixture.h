// The fixture of the core worker RPC tests (core_worker_rpc_test.cc, core_worker_borrowing_test.cc):
// real core workers over the real RPC stack, in one process, through an in-process network
// (tests/api/in_process_network.h): a driver's core worker against a head and a node that lease
// out workers, which are fakes that record what reaches them, or a worker process's core worker
// serving a real WorkerService and TaskExecutor on its own loop. Connections are cut on demand.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <capnp/rpc-twoparty.h>

#include <gtest/gtest.h>
#include <kj/async.h>

#include "airt/api.h"
#include "api/core_worker/capnp_util.h"
#include "api/core_worker/core_worker.h"
#include "api/internal/task_executor.h"
#include "api/internal/worker_service.h"
#include "common/proto/cluster.capnp.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"
#include "tests/api/in_process_network.h"
#include "tests/api/local_store_test.h"
#include "tests/testing/test_support.h"

namespace airt::testing {

using namespace std::chrono_literals;
using core_worker::AsData;
using core_worker::ToString;
using internal::Deserialize;
using internal::Serialize;

constexpr auto kWait = 20s;
const std::string kNodeHost = "127.0.0.2";    // the node, and the workers it starts
const std::string kHeadHost = "127.0.0.9";    // the head
const std::string kFakeWorkerHost = "127.0.0.3";

// Waits (kWait) for `done`, polling.
template <typename Fn>
bool WaitFor(Fn&& done) {
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// What the fakes saw, and whom the node leases out. Thread-safe.
struct ClusterState {
  std::mutex mu;
  JobId job = JobId::FromRandom();
  std::string store_socket;
  std::vector<std::string> grants;  // worker host:port per lease; the last repeats
  size_t leases = 0;
  std::vector<WorkerId> registered;  // registerWorker calls
  std::vector<std::string> pushed;   // task ids pushed to fake workers (binary)
  std::vector<std::string> cancelled;
  std::vector<std::string> killed;  // worker ids
  size_t returned = 0;              // returnWorkerLease calls
  std::vector<std::string> dead;      // Node services (host:port) the head's view shows dead
  std::vector<std::string> promoted;  // object ids (binary) pullPrimaries asked a node to keep
};

class Lease final : public proto::JobLease::Server {};
class Holder final : public proto::LeaseHolder::Server {};

class Head final : public proto::Head::Server {
 public:
  explicit Head(std::shared_ptr<ClusterState> state) : state_(std::move(state)) {}

 protected:
  kj::Promise<void> registerJob(RegisterJobContext context) override {
    context.getResults().setJobId(AsData(state_->job.Binary()));
    context.getResults().setLease(kj::heap<Lease>());
    return kj::READY_NOW;
  }
  kj::Promise<void> finishJob(FinishJobContext) override { return kj::READY_NOW; }
  // The KV holds "value" under every key; no actor has a name.
  kj::Promise<void> kvGet(KvGetContext context) override {
    context.getResults().setFound(true);
    context.getResults().setValue(capnp::Data::Reader(
        reinterpret_cast<const kj::byte*>("value"), 5));
    return kj::READY_NOW;
  }
  kj::Promise<void> getActor(GetActorContext context) override {
    context.getResults().setFound(false);
    return kj::READY_NOW;
  }
  kj::Promise<void> clusterView(ClusterViewContext context) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    auto nodes = context.getResults().initNodes(static_cast<unsigned>(1 + state_->dead.size()));
    for (size_t i = 0; i < state_->dead.size(); ++i) {
      auto colon = state_->dead[i].rfind(':');
      auto info = nodes[static_cast<unsigned>(i + 1)].initInfo();
      info.setNodeId(AsData(NodeId::FromRandom().Binary()));
      info.setAddress(state_->dead[i].substr(0, colon));
      info.setNodePort(static_cast<uint16_t>(std::stoul(state_->dead[i].substr(colon + 1))));
    }
    auto node = nodes[0];
    node.setAlive(true);
    auto info = node.initInfo();
    info.setNodeId(AsData(NodeId::FromRandom().Binary()));
    info.setAddress(kNodeHost);
    info.setNodePort(1);
    info.setTransferPort(1);
    info.setStoreSocket(state_->store_socket);
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<ClusterState> state_;
};

class Node final : public proto::Node::Server {
 public:
  explicit Node(std::shared_ptr<ClusterState> state) : state_(std::move(state)) {}

 protected:
  kj::Promise<void> requestWorkerLease(RequestWorkerLeaseContext context) override {
    std::string worker;
    uint64_t id;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->grants.empty()) throw ToKjException(Unavailable("no workers to lease"));
      worker = state_->grants[std::min(state_->leases, state_->grants.size() - 1)];
      id = ++state_->leases;
    }
    auto colon = worker.rfind(':');
    auto granted = context.getResults().initReply().initGranted();
    granted.setLeaseId(id);
    auto address = granted.initWorker();
    address.setWorkerId(AsData(WorkerId::FromRandom().Binary()));
    address.setHost(worker.substr(0, colon));
    address.setPort(static_cast<uint16_t>(std::stoul(worker.substr(colon + 1))));
    context.getResults().setHolder(kj::heap<Holder>());
    return kj::READY_NOW;
  }
  kj::Promise<void> returnWorkerLease(ReturnWorkerLeaseContext) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    ++state_->returned;
    return kj::READY_NOW;
  }
  kj::Promise<void> registerWorker(RegisterWorkerContext context) override {
    std::string id = ToString(context.getParams().getWorker().getWorkerId());
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->registered.push_back(WorkerId::FromRaw(reinterpret_cast<const uint8_t*>(id.data())));
    return kj::READY_NOW;
  }
  kj::Promise<void> killWorker(KillWorkerContext context) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->killed.push_back(ToString(context.getParams().getWorkerId()));
    context.getResults().setKilled(true);
    return kj::READY_NOW;
  }
  kj::Promise<void> notifyWorkerBlocked(NotifyWorkerBlockedContext) override {
    return kj::READY_NOW;
  }
  kj::Promise<void> freeObjects(FreeObjectsContext) override { return kj::READY_NOW; }
  kj::Promise<void> pullPrimaries(PullPrimariesContext context) override {
    auto objects = context.getParams().getObjects();
    auto errors = context.getResults().initErrors(objects.size());
    std::lock_guard<std::mutex> lock(state_->mu);
    for (unsigned i = 0; i < objects.size(); ++i) {
      state_->promoted.push_back(ToString(objects[i]));
      errors.set(i, "");
    }
    return kj::READY_NOW;
  }
  kj::Promise<void> subscribeLogs(SubscribeLogsContext) override { return kj::READY_NOW; }

 private:
  std::shared_ptr<ClusterState> state_;
};

// A worker whose tasks never finish: it records them and the cancels that reach it.
class StuckWorker final : public proto::Worker::Server {
 public:
  explicit StuckWorker(std::shared_ptr<ClusterState> state) : state_(std::move(state)) {}

 protected:
  kj::Promise<void> pushTask(PushTaskContext context) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->pushed.push_back(ToString(context.getParams().getTask().getTaskId()));
    return kj::NEVER_DONE;
  }
  kj::Promise<void> cancelTask(CancelTaskContext context) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->cancelled.push_back(ToString(context.getParams().getTaskId()));
    return kj::READY_NOW;
  }

 private:
  std::shared_ptr<ClusterState> state_;
};

inline std::vector<core_worker::TaskArgument> IntArg(int x) {
  core_worker::TaskArgument arg;
  arg.value = Serialize(x);
  std::vector<core_worker::TaskArgument> args;
  args.push_back(std::move(arg));
  return args;
}

class CoreWorkerRpc : public LocalStoreTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartStore(8 << 20));
    state_->store_socket = dir_.File("store.sock");
    head_ = std::make_unique<InProcessServer>(network_, kHeadHost, [this] {
      return capnp::Capability::Client(kj::heap<Head>(state_));
    });
    node_ = std::make_unique<InProcessServer>(network_, kNodeHost, [this] {
      return capnp::Capability::Client(kj::heap<Node>(state_));
    });
    ASSERT_EQ(node_->address(), kNodeHost + ":1");
  }
  void TearDown() override {
    driver_.reset();
    worker_.reset();
    executor_.reset();
  }

  void Grant(std::vector<std::string> workers) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->grants = std::move(workers);
  }
  // A fake worker that never finishes its tasks; its address.
  std::string StartStuckWorker() {
    stuck_.push_back(std::make_unique<InProcessServer>(network_, kFakeWorkerHost, [this] {
      return capnp::Capability::Client(kj::heap<StuckWorker>(state_));
    }));
    return stuck_.back()->address();
  }

  // A worker process's core worker of no job, serving a real WorkerService over a TaskExecutor
  // whose "twice" doubles an int; its address.
  std::string StartRealWorker() {
    worker_id_ = WorkerId::FromRandom();
    core_worker::CoreWorkerOptions options;
    options.node_address = kNodeHost;
    options.node_port = 1;
    options.worker = worker_id_;
    options.store_socket = state_->store_socket;
    options.transfer_address = kNodeHost + ":1";
    options.connector = network_;
    auto core = core_worker::CoreWorker::Connect(options);
    EXPECT_TRUE(core.ok()) << core.status().ToString();
    if (!core.ok()) return "";
    worker_ = std::move(*core);
    internal::TaskExecutor::Options executor_options;
    executor_options.fallback = [](internal::TaskKind, const std::string& function, void*,
                                   std::span<const std::string_view> args) {
      internal::InvokeOutcome outcome;
      if (function != "twice" || args.size() != 1) {
        outcome.failure = ErrorKind::kBadArguments;
        outcome.error = "only twice(int)";
        return outcome;
      }
      outcome.returns.push_back(Serialize(2 * Deserialize<int>(args[0])));
      return outcome;
    };
    executor_ = std::make_unique<internal::TaskExecutor>(registry_, &worker_->store(),
                                                         std::move(executor_options));
    core_worker::WorkerServing serving;
    serving.make_service = [this](kj::Own<kj::PromiseFulfiller<void>> on_exit,
                                  std::function<void(bool)> cancel_children) {
      return capnp::Capability::Client(kj::heap<internal::WorkerService>(
          *executor_, JobId(), internal::ReturnsAt{kNodeHost + ":1", kNodeHost + ":1"},
          kj::mv(on_exit), std::move(cancel_children)));
    };
    serving.register_timeout_ms = 10'000;
    serving.exit_grace_ms = 600'000;  // serving ends when exit's callers hang up
    Result<uint16_t> port = worker_->ServeWorker(std::move(serving));
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    return port.ok() ? kNodeHost + ":" + std::to_string(*port) : "";
  }

  void StartDriver() {
    core_worker::CoreWorkerOptions options;
    options.head_address = head_->address();
    options.node_address = kNodeHost;
    options.connector = network_;
    auto core = core_worker::CoreWorker::Connect(options);
    ASSERT_TRUE(core.ok()) << core.status().ToString();
    driver_ = std::move(*core);
  }

  // The value of `id` (an int), or the error's kind.
  std::variant<int, core_worker::ErrorKind, Status> Get(const ObjectId& id) {
    std::variant<int, core_worker::ErrorKind, Status> got = Status::Ok();
    ObjectId ids[] = {id};
    Status s = driver_->GetEach(ids, 20'000, [&](size_t, core_worker::GotObject& object) {
      if (object.error) {
        got = object.error->kind;
      } else {
        got = Deserialize<int>(object.bytes());
      }
    });
    if (!s.ok()) got = s;
    return got;
  }

  // Submits twice(x) and holds its returns, as ObjectRefs do (unreferenced returns are freed).
  std::vector<ObjectId> Submit(
      int x, const core_worker::TaskOptions& options = core_worker::TaskOptions()) {
    std::vector<ObjectId> returns = driver_->SubmitTask("twice", IntArg(x), options);
    for (const ObjectId& id : returns) driver_->AddLocalReference(id);
    return returns;
  }

  size_t Pushed() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->pushed.size();
  }

  std::shared_ptr<InProcessNetwork> network_ = std::make_shared<InProcessNetwork>();
  std::shared_ptr<ClusterState> state_ = std::make_shared<ClusterState>();
  std::unique_ptr<InProcessServer> head_, node_;
  std::vector<std::unique_ptr<InProcessServer>> stuck_;
  WorkerId worker_id_;
  // Destroyed in TearDown: the worker's core worker (its service) before the executor it uses.
  std::unique_ptr<core_worker::CoreWorker> worker_;
  std::unique_ptr<internal::TaskExecutor> executor_;
  std::unique_ptr<core_worker::CoreWorker> driver_;
};

}  // namespace airt::testing
