// Real core workers over the real RPC stack, in one process, through an in-process network
// (tests/api/in_process_network.h): a driver's core worker against a head and a node that lease
// out workers, which are fakes that record what reaches them, or a worker process's core worker
// serving a real WorkerService and TaskExecutor on its own loop. Connections are cut on demand.
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
namespace {

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
  kj::Promise<void> clusterView(ClusterViewContext context) override {
    auto node = context.getResults().initNodes(1)[0];
    node.setAlive(true);
    auto info = node.initInfo();
    info.setNodeId(AsData(NodeId::FromRandom().Binary()));
    info.setAddress(kNodeHost);
    info.setNodePort(1);
    info.setTransferPort(1);
    std::lock_guard<std::mutex> lock(state_->mu);
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

std::vector<core_worker::TaskArgument> IntArg(int x) {
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

TEST_F(CoreWorkerRpc, WorkerCoreWorkerServesOnItsLoopAndRegistersWithItsNode) {
  std::string worker = StartRealWorker();
  ASSERT_FALSE(worker.empty());
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    ASSERT_EQ(state_->registered.size(), 1u);
    EXPECT_EQ(state_->registered[0], worker_id_);
  }
  // One connection to the node: registration, leases and notifyWorkerBlocked share it.
  EXPECT_EQ(network_->Connections(node_->address()), 1u);
  Grant({worker});
  ASSERT_NO_FATAL_FAILURE(StartDriver());
  std::vector<ObjectId> returns = Submit(21);
  EXPECT_EQ(std::get<int>(Get(returns.at(0))), 42);
}

TEST_F(CoreWorkerRpc, RetriesTaskOnAnotherWorkerWhenItsConnectionBreaks) {
  std::string stuck = StartStuckWorker();
  std::string worker = StartRealWorker();
  ASSERT_FALSE(worker.empty());
  Grant({stuck, worker});
  ASSERT_NO_FATAL_FAILURE(StartDriver());
  std::vector<ObjectId> returns = Submit(5);
  ASSERT_TRUE(WaitFor([&] { return Pushed() == 1; })) << "the task never reached " << stuck;
  EXPECT_FALSE(driver_->Ready(returns)[0]);
  EXPECT_EQ(network_->Break(stuck), 1u);
  EXPECT_EQ(std::get<int>(Get(returns.at(0))), 10);
}

// The kernel hands a port that a dead worker freed to the next worker the node starts: the
// driver's connection to the dead one must not stand in for the new one (a call on it would fail
// with "Peer disconnected", and an actor's constructor has no retry to hide that).
TEST_F(CoreWorkerRpc, ANewWorkerOnADeadWorkersPortGetsAConnectionOfItsOwn) {
  network_->ReuseFreedPorts();
  std::string first = StartRealWorker();
  ASSERT_FALSE(first.empty());
  Grant({first});
  ASSERT_NO_FATAL_FAILURE(StartDriver());
  core_worker::TaskOptions once;
  once.max_retries = 0;
  auto got = Get(Submit(1, once).at(0));
  ASSERT_TRUE(std::holds_alternative<int>(got));
  EXPECT_EQ(std::get<int>(got), 2);
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->returned == 1;
  })) << "the idle lease never went back";
  worker_.reset();  // the worker process exits
  executor_.reset();
  std::string second = StartRealWorker();
  ASSERT_EQ(second, first);
  got = Get(Submit(2, once).at(0));
  ASSERT_TRUE(std::holds_alternative<int>(got))
      << "the task failed: it went to the dead worker's connection";
  EXPECT_EQ(std::get<int>(got), 4);
}

TEST_F(CoreWorkerRpc, CancelReachesTheWorkerRunningTheTask) {
  std::string stuck = StartStuckWorker();
  Grant({stuck});
  ASSERT_NO_FATAL_FAILURE(StartDriver());
  std::vector<ObjectId> returns = Submit(5);
  ASSERT_TRUE(WaitFor([&] { return Pushed() == 1; }));
  ASSERT_TRUE(driver_->CancelTask(returns.at(0), /*force=*/false, /*recursive=*/true).ok());
  auto got = Get(returns.at(0));
  ASSERT_TRUE(std::holds_alternative<core_worker::ErrorKind>(got));
  EXPECT_EQ(std::get<core_worker::ErrorKind>(got), core_worker::ErrorKind::CANCELLED);
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(state_->mu);
    return !state_->cancelled.empty();
  }));
  std::lock_guard<std::mutex> lock(state_->mu);
  EXPECT_EQ(state_->cancelled[0], state_->pushed[0]);
  EXPECT_EQ(state_->cancelled[0], returns[0].Task().Binary());
}

TEST_F(CoreWorkerRpc, WorkerCoreWorkerRefusesToServeTwiceAndDriverRefusesToServe) {
  ASSERT_FALSE(StartRealWorker().empty());
  core_worker::WorkerServing again;
  again.make_service = [](kj::Own<kj::PromiseFulfiller<void>>, std::function<void(bool)>) {
    return capnp::Capability::Client(nullptr);
  };
  EXPECT_EQ(worker_->ServeWorker(again).status().code(), Code::kFailedPrecondition);
  ASSERT_NO_FATAL_FAILURE(StartDriver());
  EXPECT_EQ(driver_->ServeWorker(again).status().code(), Code::kFailedPrecondition);
}

TEST_F(CoreWorkerRpc, WorkerServingEndsAfterExitAnswers) {
  std::string worker = StartRealWorker();
  ASSERT_FALSE(worker.empty());
  std::atomic<bool> ended{false};
  std::thread waiter([&] {
    worker_->WaitServingEnded();
    ended = true;
  });
  {
    // exit() over a connection of the network, as the node sends it.
    kj::AsyncIoContext io = kj::setupAsyncIo();
    auto stream = network_->Connect(io, worker).wait(io.waitScope);
    capnp::TwoPartyClient client(*stream);
    Status exited = CatchKj([&] {
      client.bootstrap().castAs<proto::Worker>().exitRequest().send().wait(io.waitScope);
    });
    EXPECT_TRUE(exited.ok()) << exited.ToString();
    // The grace is long: serving waits for this caller to hang up.
    EXPECT_FALSE(ended.load()) << "serving ended while exit's caller is still connected";
  }  // hangs up
  waiter.join();
  EXPECT_TRUE(ended.load());
}


// ---- References inside values (docs/ownership.md): a second driver's core worker borrows what
// the first one owns, over the in-process network's real RPC.
class Borrowing : public CoreWorkerRpc {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(CoreWorkerRpc::SetUp());
    ASSERT_NO_FATAL_FAILURE(StartDriver());
    core_worker::CoreWorkerOptions options;
    options.head_address = head_->address();
    options.node_address = kNodeHost;
    options.connector = network_;
    auto core = core_worker::CoreWorker::Connect(options);
    ASSERT_TRUE(core.ok()) << core.status().ToString();
    borrower_ = std::move(*core);
  }
  void TearDown() override {
    borrower_.reset();
    CoreWorkerRpc::TearDown();
  }

  // A 1 MiB object in the store, owned by the driver, with one local reference; the address a
  // ref to it names.
  ObjectId PutBig(core_worker::OwnerAddress* owner) {
    Result<ObjectId> id = driver_->Put(std::string(1 << 20, 'b'));
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    driver_->AddLocalReference(*id);
    Result<core_worker::OwnerAddress> named = driver_->OwnerOf(*id, false);
    EXPECT_TRUE(named.ok()) << named.status().ToString();
    *owner = *named;
    return *id;
  }
  bool InStore(const ObjectId& id) { return client_->Contains(id); }

  // The borrower's Get of `id`: its size, or its error.
  std::variant<size_t, core_worker::ObjectError, Status> BorrowerGet(const ObjectId& id) {
    std::variant<size_t, core_worker::ObjectError, Status> got = Status::Ok();
    ObjectId ids[] = {id};
    Status s = borrower_->GetEach(ids, 20'000, [&](size_t, core_worker::GotObject& object) {
      if (object.error) {
        got = *object.error;
      } else {
        got = object.bytes().size();
      }
    });
    if (!s.ok()) got = s;
    return got;
  }

  std::unique_ptr<core_worker::CoreWorker> borrower_;
};

TEST_F(Borrowing, ABorrowedObjectOutlivesItsOwnersRefAndGoesWithTheLastBorrow) {
  core_worker::OwnerAddress owner;
  ObjectId id = PutBig(&owner);
  EXPECT_EQ(driver_->References(id).borrowers, 0u);
  borrower_->AddBorrowedReference(id, owner);
  EXPECT_EQ(driver_->References(id).borrowers, 1u);
  EXPECT_TRUE(borrower_->References(id).borrowed);
  driver_->RemoveLocalReference(id);
  EXPECT_TRUE(driver_->References(id).referenced) << "freed while borrowed";
  ASSERT_TRUE(InStore(id));
  auto got = BorrowerGet(id);
  ASSERT_TRUE(std::holds_alternative<size_t>(got));
  EXPECT_EQ(std::get<size_t>(got), 1u << 20);
  borrower_->RemoveLocalReference(id);
  EXPECT_TRUE(WaitFor([&] { return !InStore(id); })) << "kept after the last borrow went";
  EXPECT_FALSE(driver_->References(id).referenced);
}

TEST_F(Borrowing, NodeAddressesOfNamesTheStoreNodeOfWhatTheOwnerHoldsThere) {
  core_worker::OwnerAddress owner;
  ObjectId big = PutBig(&owner);
  Result<ObjectId> small = driver_->Put("small");
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  driver_->AddLocalReference(*small);
  ObjectId unknown = ObjectId::FromRandom();
  ObjectId ids[] = {big, *small, unknown};
  std::vector<std::string> where = driver_->NodeAddressesOf(ids);
  ASSERT_EQ(where.size(), 3u);
  EXPECT_EQ(where[0], driver_->node_address()) << "a 1 MiB put lies in this node's store";
  EXPECT_EQ(where[1], "") << "a small put is held inline";
  EXPECT_EQ(where[2], "") << "an object this process does not know";
  // A borrower's table does not say where the owner's object lies.
  borrower_->AddBorrowedReference(big, owner);
  EXPECT_EQ(borrower_->NodeAddressesOf(std::span<const ObjectId>(&big, 1)).at(0), "");
  borrower_->RemoveLocalReference(big);
  driver_->RemoveLocalReference(*small);
  driver_->RemoveLocalReference(big);
}

TEST_F(Borrowing, ASmallBorrowedValueComesInlineFromItsOwner) {
  Result<ObjectId> id = driver_->Put(Serialize(42));
  ASSERT_TRUE(id.ok());
  driver_->AddLocalReference(*id);
  Result<core_worker::OwnerAddress> owner = driver_->OwnerOf(*id, false);
  ASSERT_TRUE(owner.ok());
  borrower_->AddBorrowedReference(*id, *owner);
  ObjectId ids[] = {*id};
  int value = 0;
  ASSERT_TRUE(borrower_->GetEach(ids, 20'000, [&](size_t, core_worker::GotObject& object) {
                          ASSERT_FALSE(object.error) << object.error->message;
                          value = Deserialize<int>(object.bytes());
                        }).ok());
  EXPECT_EQ(value, 42);
  borrower_->RemoveLocalReference(*id);
  driver_->RemoveLocalReference(*id);
  EXPECT_TRUE(WaitFor([&] { return !driver_->References(*id).referenced; }));
}

TEST_F(Borrowing, ABorrowerWhoseConnectionBreaksReleasesWhatItBorrowed) {
  core_worker::OwnerAddress owner;
  ObjectId id = PutBig(&owner);
  borrower_->AddBorrowedReference(id, owner);
  driver_->RemoveLocalReference(id);
  ASSERT_TRUE(InStore(id));
  // As the borrower's process dying: every connection to the owner is cut.
  EXPECT_GE(network_->Break(owner.address), 1u);
  EXPECT_TRUE(WaitFor([&] { return !InStore(id); })) << "a dead borrower kept the object";
  EXPECT_EQ(driver_->References(id).borrowers, 0u);
}

TEST_F(Borrowing, AnEscrowedRefIsKeptUntilABorrowerRegisters) {
  core_worker::OwnerAddress owner;
  ObjectId id = PutBig(&owner);
  ASSERT_TRUE(driver_->OwnerOf(id, /*escrow=*/true).ok());  // written into a task's return
  driver_->RemoveLocalReference(id);
  EXPECT_TRUE(driver_->References(id).referenced) << "freed before its reader borrowed it";
  borrower_->AddBorrowedReference(id, owner);
  borrower_->RemoveLocalReference(id);
  EXPECT_TRUE(WaitFor([&] { return !InStore(id); }));
}

TEST_F(Borrowing, GetOfABorrowedObjectWhoseOwnerDiedRaisesOwnerDied) {
  core_worker::OwnerAddress owner;
  ObjectId id = PutBig(&owner);
  borrower_->AddBorrowedReference(id, owner);
  ASSERT_TRUE(std::holds_alternative<size_t>(BorrowerGet(id)));
  driver_.reset();  // the owner's process ends: what the borrower found before fails too
  std::variant<size_t, core_worker::ObjectError, Status> got;
  ASSERT_TRUE(WaitFor([&] {
    got = BorrowerGet(id);
    return !std::holds_alternative<size_t>(got);
  }));
  ASSERT_TRUE(std::holds_alternative<core_worker::ObjectError>(got));
  const core_worker::ObjectError& error = std::get<core_worker::ObjectError>(got);
  EXPECT_EQ(error.kind, core_worker::ErrorKind::OWNER_DIED) << error.message;
  EXPECT_NE(error.message.find(id.Hex()), std::string::npos) << error.message;
  EXPECT_NE(error.message.find(owner.address), std::string::npos) << error.message;
  borrower_->RemoveLocalReference(id);
}

TEST_F(Borrowing, BorrowingFromAnOwnerThatIsGoneFailsTheGetNotTheBorrow) {
  core_worker::OwnerAddress gone{kNodeHost + ":999", WorkerId::FromRandom()};
  ObjectId id = ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), 1);
  borrower_->AddBorrowedReference(id, gone);
  auto got = BorrowerGet(id);
  ASSERT_TRUE(std::holds_alternative<core_worker::ObjectError>(got));
  EXPECT_EQ(std::get<core_worker::ObjectError>(got).kind, core_worker::ErrorKind::OWNER_DIED);
  borrower_->RemoveLocalReference(id);
}

// A node leaving (docs/ownership.md "When a node leaves"): a put names its owner in the store;
// the owner says what it still holds and takes a new location for it; a borrower whose copy is
// gone asks the owner again and reads where it points now.
TEST_F(Borrowing, APrimaryNamesItsOwnerWhoTakesItsNewLocationAndTheBorrowerAsksAgain) {
  core_worker::OwnerAddress owner;
  ObjectId id = PutBig(&owner);
  Result<std::vector<objectstore::PrimaryCopy>> listed = client_->ListPrimaries();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  auto mine = std::find_if(listed->begin(), listed->end(),
                           [&](const objectstore::PrimaryCopy& c) { return c.id == id; });
  ASSERT_NE(mine, listed->end());
  EXPECT_EQ(mine->owner, owner.address);
  borrower_->AddBorrowedReference(id, owner);
  ASSERT_TRUE(std::holds_alternative<size_t>(BorrowerGet(id)));  // it knows the old location

  const std::string moved_to = "127.0.0.9:7000";  // nothing serves there
  ObjectId unknown = ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), 1);
  {
    kj::AsyncIoContext io = kj::setupAsyncIo();
    auto stream = network_->Connect(io, owner.address).wait(io.waitScope);
    capnp::TwoPartyClient rpc(*stream);
    auto service = rpc.bootstrap().castAs<proto::Owner>();
    auto held = service.heldObjectsRequest();
    held.initObjectIds(2).set(0, core_worker::AsData(id.Binary()));
    held.getObjectIds().set(1, core_worker::AsData(unknown.Binary()));
    auto answer = held.send().wait(io.waitScope).getHeld();
    ASSERT_EQ(answer.size(), 2u);
    EXPECT_TRUE(answer[0]);
    EXPECT_FALSE(answer[1]);
    auto moved = [&](const std::string& from) {
      auto request = service.objectsMovedRequest();
      request.setFromNode(from);
      request.setNodeAddress(moved_to);
      request.setTransferAddress(moved_to);
      request.initObjectIds(1).set(0, core_worker::AsData(id.Binary()));
      return request.send().wait(io.waitScope).getHeld()[0];
    };
    EXPECT_FALSE(moved("127.0.0.8:1"));  // not where it lies: unchanged
    EXPECT_TRUE(moved(driver_->node_address()));
  }
  ASSERT_TRUE(client_->Delete(id).ok());  // the leaving node's copy goes
  auto got = BorrowerGet(id);
  ASSERT_TRUE(std::holds_alternative<core_worker::ObjectError>(got));
  const core_worker::ObjectError& error = std::get<core_worker::ObjectError>(got);
  EXPECT_EQ(error.kind, core_worker::ErrorKind::OBJECT_LOST) << error.message;
  EXPECT_NE(error.message.find(moved_to), std::string::npos) << error.message;
  borrower_->RemoveLocalReference(id);
}

}  // namespace
}  // namespace airt::testing
