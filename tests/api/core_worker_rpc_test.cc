// Core workers over RPC: serving, retries on a broken connection, a new worker on a dead one's
// port, cancel, exit (the fixture: tests/api/core_worker_rpc_fixture.h).
#include "tests/api/core_worker_rpc_fixture.h"

namespace airt::testing {
namespace {

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

// The head's connection ends (it was killed and started again): the driver's next calls to the
// head, its own and its actor manager's, go on a new connection, not on the old one's broken
// capability (which failed every later call with "Peer disconnected").
TEST_F(CoreWorkerRpc, CallsToTheHeadAfterItsConnectionEndedGoOnANewOne) {
  ASSERT_NO_FATAL_FAILURE(StartDriver());
  auto kv_answers = [&] {
    Result<std::optional<std::string>> got = driver_->KvGet("ns", "key");
    return got.ok() && *got == std::optional<std::string>("value");
  };
  auto lookup_answers = [&] {
    return driver_->GetActor("nobody", "").status().code() == Code::kNotFound;
  };
  ASSERT_TRUE(kv_answers());
  ASSERT_TRUE(lookup_answers());
  ASSERT_EQ(network_->Connections(head_->address()), 1u);

  EXPECT_EQ(network_->Break(head_->address()), 1u);
  // (Polled: the driver's loop may send a call before it has seen the connection end.)
  EXPECT_TRUE(WaitFor(kv_answers)) << driver_->KvGet("ns", "key").status().ToString();
  EXPECT_TRUE(WaitFor(lookup_answers)) << driver_->GetActor("nobody", "").status().ToString();
  EXPECT_EQ(network_->Connections(head_->address()), 2u);
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

}  // namespace
}  // namespace airt::testing
