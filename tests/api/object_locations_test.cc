// The owner's locations beyond the primary copy (docs/ownership.md "Copies"): a worker's reply
// names the copies its node pulled of the task's arguments, the owner records them, and when the
// primary's node dies a copy becomes the primary instead of the object counting as lost. Over the
// real RPC stack (the fixture: tests/api/core_worker_rpc_fixture.h); the nodes other than the
// driver's are fakes that the head's view can show dead.
#include "tests/api/core_worker_rpc_fixture.h"

namespace airt::testing {
namespace {

const std::string kPrimaryHost = "127.0.0.4";  // node B: where the fake worker says returns lie
const std::string kCopyHost = "127.0.0.5";     // node C: where it says arguments were pulled to

// A worker whose every return lies in node B's store and whose node (C) pulled every object
// argument of its tasks: what a worker on C answers for a task whose arguments lay elsewhere.
class PlacingWorker final : public proto::Worker::Server {
 protected:
  kj::Promise<void> pushTask(PushTaskContext context) override {
    auto task = context.getParams().getTask();
    std::string raw = ToString(task.getTaskId());
    TaskId task_id = TaskId::FromRaw(reinterpret_cast<const uint8_t*>(raw.data()));
    auto results = context.getResults();
    auto returns = results.initReturns(task.getNumReturns());
    for (unsigned i = 0; i < task.getNumReturns(); ++i) {
      auto object = returns[i].initObject();
      object.setObjectId(AsData(ObjectId::ForReturn(task_id, i + 1).Binary()));
      object.setTransferAddress(kPrimaryHost + ":1");
      object.setNodeAddress(kPrimaryHost + ":1");
      object.setSize(1 << 20);
    }
    std::vector<std::string> pulled;
    for (auto arg : task.getArgs()) {
      if (arg.isObject()) pulled.push_back(ToString(arg.getObject().getObjectId()));
    }
    auto copies = results.initCopies(static_cast<unsigned>(pulled.size()));
    for (unsigned i = 0; i < pulled.size(); ++i) {
      copies[i].setObjectId(AsData(pulled[i]));
      copies[i].setTransferAddress(kCopyHost + ":1");
      copies[i].setNodeAddress(kCopyHost + ":1");
    }
    return kj::READY_NOW;
  }
};

class ObjectLocations : public CoreWorkerRpc {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(CoreWorkerRpc::SetUp());
    copy_node_ = std::make_unique<InProcessServer>(network_, kCopyHost, [this] {
      return capnp::Capability::Client(kj::heap<Node>(state_));
    });
    ASSERT_EQ(copy_node_->address(), kCopyHost + ":1");
    worker_server_ = std::make_unique<InProcessServer>(network_, kFakeWorkerHost, [] {
      return capnp::Capability::Client(kj::heap<PlacingWorker>());
    });
    Grant({worker_server_->address()});
    core_worker::CoreWorkerOptions options;
    options.head_address = head_->address();
    options.node_address = kNodeHost;
    options.connector = network_;
    options.node_death_wait_ms = 1'000;  // how long a Get waits for a live node to die
    auto core = core_worker::CoreWorker::Connect(options);
    ASSERT_TRUE(core.ok()) << core.status().ToString();
    driver_ = std::move(*core);
  }
  void TearDown() override {
    CoreWorkerRpc::TearDown();
    worker_server_.reset();
    copy_node_.reset();
  }

  // A return of twice(1) that lies on node B and may not be rebuilt (max_retries 0).
  ObjectId OnNodeB() {
    core_worker::TaskOptions options;
    options.max_retries = 0;
    ObjectId id = Submit(1, options)[0];
    EXPECT_TRUE(WaitFor([&] { return NodeAddressOf(id) == kPrimaryHost + ":1"; }));
    return id;
  }
  // Runs a task that takes `id` by reference on the placing worker (node C pulls it) and waits
  // for its answer.
  void ReadOnNodeC(const ObjectId& id) {
    core_worker::TaskArgument arg;
    arg.ref = id;
    std::vector<core_worker::TaskArgument> args;
    args.push_back(std::move(arg));
    ObjectId reader = driver_->SubmitTask("twice", std::move(args), {})[0];
    driver_->AddLocalReference(reader);
    ASSERT_TRUE(WaitFor([&] { return !NodeAddressOf(reader).empty(); }));
  }
  std::string NodeAddressOf(const ObjectId& id) {
    ObjectId ids[] = {id};
    return driver_->NodeAddressesOf(ids)[0];
  }
  std::vector<std::string> Promoted() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->promoted;
  }
  void KillNodeB() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->dead.push_back(kPrimaryHost + ":1");
  }

  std::unique_ptr<InProcessServer> copy_node_, worker_server_;
};

TEST_F(ObjectLocations, OwnerRecordsTheCopiesAWorkersNodePulledOfTheArguments) {
  ObjectId id = OnNodeB();
  EXPECT_TRUE(driver_->References(id).copies.empty());
  ASSERT_NO_FATAL_FAILURE(ReadOnNodeC(id));
  EXPECT_EQ(driver_->References(id).copies, std::vector<std::string>{kCopyHost + ":1"});
  // A second read there adds no second location.
  ASSERT_NO_FATAL_FAILURE(ReadOnNodeC(id));
  EXPECT_EQ(driver_->References(id).copies, std::vector<std::string>{kCopyHost + ":1"});
}

TEST_F(ObjectLocations, ACopyBecomesThePrimaryWhenThePrimarysNodeDies) {
  ObjectId id = OnNodeB();
  ASSERT_NO_FATAL_FAILURE(ReadOnNodeC(id));
  KillNodeB();
  // The Get cannot pull from B (nothing listens there): it asks the head, which shows B dead, and
  // the owner reads on from C's copy, which C is asked to keep as the primary.
  (void)Get(id);
  EXPECT_EQ(NodeAddressOf(id), kCopyHost + ":1");
  EXPECT_TRUE(driver_->References(id).copies.empty());
  EXPECT_EQ(Promoted(), std::vector<std::string>{id.Binary()});
}

TEST_F(ObjectLocations, WithoutACopyTheObjectIsLostWhenItsNodeDies) {
  ObjectId id = OnNodeB();
  KillNodeB();
  auto got = Get(id);
  ASSERT_TRUE(std::holds_alternative<core_worker::ErrorKind>(got));
  EXPECT_EQ(std::get<core_worker::ErrorKind>(got),
            core_worker::ErrorKind::OBJECT_RECONSTRUCTION_FAILED_MAX_ATTEMPTS_EXCEEDED);
  EXPECT_TRUE(Promoted().empty());
}

TEST(ObjectLocationsReply, AWorkerNamesTheArgumentsItsNodePulledFromElsewhere) {
  capnp::MallocMessageBuilder message;
  auto results = message.initRoot<proto::Worker::PushTaskResults>();
  internal::TaskOutcome outcome;
  ObjectId pulled = ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), 1);
  ObjectId local = ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), 2);
  outcome.fetched.emplace_back(pulled, "10.0.0.1:7000");
  outcome.fetched.emplace_back(local, "10.0.0.2:7000");  // it lay on this node already
  internal::FillTaskResults(outcome, "f", internal::ReturnsAt{"10.0.0.2:7000", "10.0.0.2:7001"},
                            results);
  auto copies = results.asReader().getCopies();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(ToString(copies[0].getObjectId()), pulled.Binary());
  EXPECT_EQ(std::string(copies[0].getTransferAddress().cStr()), "10.0.0.2:7000");
  EXPECT_EQ(std::string(copies[0].getNodeAddress().cStr()), "10.0.0.2:7001");
}

}  // namespace
}  // namespace airt::testing
