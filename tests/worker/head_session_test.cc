// HeadSession against a FakeHead over the real RPC stack (EzRpc on loopback), on the test's own
// event loop. The session's clock is a kj::TimerImpl the test advances by hand, so intervals,
// backoff and call deadlines are exact; only the I/O in between is waited for, with a deadline.
#include "worker/internal/head_session.h"

#include <chrono>
#include <functional>
#include <memory>

#include <gtest/gtest.h>

#include <optional>
#include <kj/async-io.h>

#include "tests/worker/fake_head.h"

namespace airt {
namespace {

using testing::FakeHead;
using testing::FakeHeadState;
using worker::EzRpcHeadConnector;
using worker::HeadSessionOptions;
using worker::HeadSessionSnapshot;
using worker::NodeRegistration;
using worker::ResourceReport;
using worker::ResourceReporter;
using worker::StaticResources;
using State = HeadSessionSnapshot::State;

constexpr auto kMs = kj::MILLISECONDS;

// Reports GPU 1 in use and GPU 3 quarantined, as the lease manager will.
class BusyResources final : public ResourceReporter {
 public:
  ResourceReport Report() const override { return {{{"CPU", 3}, {"GPU", 2}}, {1}, {3}}; }
};

// The fixture is named for the unit under test, worker::HeadSession.
class HeadSession : public ::testing::Test {
 protected:
  HeadSession()
      : loop_keeper_(std::make_unique<capnp::EzRpcServer>(
            capnp::Capability::Client(KJ_EXCEPTION(UNIMPLEMENTED, "no interface")), "127.0.0.1",
            0)),
        timer_(std::make_unique<kj::TimerImpl>(kj::origin<kj::TimePoint>())),
        resources_({{"CPU", 4}, {"GPU", 4}, {"memory", 1e9}, {"TPU", 2}}) {
    state_->heartbeat_interval_ms = 1000;
    node_.id = NodeId::FromRandom();
    node_.address = "127.0.0.1";
    node_.node_port = 4001;
    node_.transfer_port = 4002;
    node_.store_socket = "/tmp/airt/node-x/store.sock";
    node_.total = {{"CPU", 4}, {"GPU", 4}, {"memory", 1e9}, {"TPU", 2}};
    node_.labels = {{"accelerator_type", "A10"}};
    node_.gpu_ids = {0, 1, 2, 3};
    node_.temp_dir = "/tmp/airt/node-x";
    node_.pid = 4242;
    options_.call_timeout = 500 * kMs;
    options_.min_retry_delay = 100 * kMs;
    options_.max_retry_delay = 400 * kMs;
    options_.retry_jitter = 0;
  }
  kj::WaitScope& wait() { return loop_keeper_->getWaitScope(); }

  // Serves state_ on `port` (0: any) and returns the port.
  uint16_t StartHead(uint16_t port = 0) {
    head_ = std::make_unique<capnp::EzRpcServer>(kj::heap<FakeHead>(state_), "127.0.0.1", port);
    port_ = static_cast<uint16_t>(head_->getPort().wait(wait()));
    return port_;
  }
  void StopHead() { head_.reset(); }

  void StartSession(const ResourceReporter* resources = nullptr) {
    connector_ = std::make_unique<EzRpcHeadConnector>("127.0.0.1:" + std::to_string(port_));
    session_ = std::make_unique<worker::HeadSession>(*connector_, *timer_, node_,
                                                     resources ? *resources : resources_, options_,
                                                     [this] { ready_calls_++; });
    session_->Start();
  }

  // Runs the event loop (real I/O) until `condition` holds or 10 s pass.
  bool PumpUntil(const std::function<bool()>& condition) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    kj::Timer& real = loop_keeper_->getIoProvider().getTimer();
    while (!condition()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      real.afterDelay(1 * kMs).wait(wait());
    }
    return true;
  }
  // Moves the session's clock forward and runs what became ready.
  void Advance(kj::Duration d) {
    timer_->advanceTo(timer_->now() + d);
    wait().poll();
  }
  HeadSessionSnapshot Snap() const { return session_->Snapshot(); }
  size_t Beats() const { return state_->NumKnownHeartbeats(node_.id); }

  std::shared_ptr<FakeHeadState> state_ = std::make_shared<FakeHeadState>();
  // The thread's EzRpc loop, as the node's own service keeps it. Members go in reverse order:
  // the session first, this last.
  std::unique_ptr<capnp::EzRpcServer> loop_keeper_;
  std::unique_ptr<kj::TimerImpl> timer_;  // the session's clock, advanced by hand
  StaticResources resources_;
  NodeRegistration node_;
  HeadSessionOptions options_;
  std::unique_ptr<capnp::EzRpcServer> head_;
  uint16_t port_ = 0;
  std::unique_ptr<EzRpcHeadConnector> connector_;
  std::unique_ptr<worker::HeadSession> session_;
  int ready_calls_ = 0;
};

TEST_F(HeadSession, RegistersWithEverythingTheNodeOwns) {
  StartHead();
  StartSession();
  ASSERT_TRUE(PumpUntil([&] { return state_->NumRegistrations() == 1; }));
  testing::RecordedNode got = state_->Registrations()[0];
  EXPECT_EQ(got.id, node_.id);
  EXPECT_EQ(got.address, "127.0.0.1");
  EXPECT_EQ(got.node_port, 4001);
  EXPECT_EQ(got.transfer_port, 4002);
  EXPECT_EQ(got.store_socket, "/tmp/airt/node-x/store.sock");
  EXPECT_EQ(got.total,
            (std::map<std::string, double>{{"CPU", 4}, {"GPU", 4}, {"memory", 1e9}, {"TPU", 2}}));
  EXPECT_EQ(got.labels, (std::map<std::string, std::string>{{"accelerator_type", "A10"}}));
  EXPECT_EQ(got.gpu_ids, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(got.temp_dir, "/tmp/airt/node-x");
  EXPECT_EQ(got.pid, 4242);
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  EXPECT_EQ(ready_calls_, 1);
  EXPECT_EQ(Snap().registrations, 1u);
  EXPECT_EQ(Snap().heartbeat_interval_ms, 1000u);
  EXPECT_EQ(Snap().node_timeout_ms, 1000u);
  EXPECT_EQ(Snap().failures, 0u);
}

TEST_F(HeadSession, HeartbeatsEveryIntervalTheHeadReturned) {
  StartHead();
  StartSession();
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  Advance(999 * kMs);
  EXPECT_EQ(state_->Heartbeats().size(), 0u) << "a heartbeat before the interval";
  Advance(1 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().heartbeats == 1; }));
  testing::RecordedHeartbeat beat = state_->Heartbeats()[0];
  EXPECT_EQ(beat.id, node_.id);
  EXPECT_TRUE(beat.known);
  // Nothing is leased yet: everything the node owns is available.
  EXPECT_EQ(beat.available,
            (std::map<std::string, double>{{"CPU", 4}, {"GPU", 4}, {"memory", 1e9}, {"TPU", 2}}));
  EXPECT_TRUE(beat.gpu_ids_in_use.empty());
  Advance(999 * kMs);
  EXPECT_EQ(state_->Heartbeats().size(), 1u);
  Advance(1 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().heartbeats == 2; }));
  EXPECT_EQ(Beats(), 2u);
  EXPECT_EQ(Snap().failures, 0u);
}

TEST_F(HeadSession, HeartbeatCarriesWhatTheResourceReporterSays) {
  BusyResources busy;
  StartHead();
  StartSession(&busy);
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  Advance(1000 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().heartbeats == 1; }));
  testing::RecordedHeartbeat beat = state_->Heartbeats()[0];
  EXPECT_EQ(beat.available, (std::map<std::string, double>{{"CPU", 3}, {"GPU", 2}}));
  EXPECT_EQ(beat.gpu_ids_in_use, (std::vector<uint32_t>{1}));
  EXPECT_EQ(beat.quarantined_gpu_ids, (std::vector<uint32_t>{3}));
}

TEST_F(HeadSession, HandsOnFinishedJobsAndSendsWhatItHasSeen) {
  StartHead();
  std::vector<std::vector<JobId>> handed;
  StartSession();
  session_->SetOnFinishedJobs([&](std::vector<JobId> jobs) { handed.push_back(std::move(jobs)); });
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  JobId a = JobId::FromRandom(), b = JobId::FromRandom(), c = JobId::FromRandom();
  state_->FinishJob(a);
  state_->FinishJob(b);
  Advance(1000 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().heartbeats == 1; }));
  EXPECT_EQ(state_->Heartbeats()[0].jobs_seen, 0u);
  ASSERT_EQ(handed.size(), 1u);
  EXPECT_EQ(handed[0], (std::vector<JobId>{a, b}));
  EXPECT_EQ(Snap().jobs_seen, 2u);
  Advance(1000 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().heartbeats == 2; }));
  EXPECT_EQ(state_->Heartbeats()[1].jobs_seen, 2u);
  EXPECT_EQ(handed.size(), 1u) << "nothing new: nothing handed on";
  state_->FinishJob(c);
  Advance(1000 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().heartbeats == 3; }));
  ASSERT_EQ(handed.size(), 2u);
  EXPECT_EQ(handed[1], std::vector<JobId>{c});
  EXPECT_EQ(Snap().finished_jobs, 3u);
}

TEST_F(HeadSession, ReRegistersWhenHeartbeatAnswersUnknown) {
  StartHead();
  StartSession();
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  state_->ForgetAll();
  Advance(1000 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return state_->NumRegistrations() == 2; }));
  EXPECT_EQ(state_->NumUnknownHeartbeats(), 1u);
  EXPECT_EQ(state_->Registrations()[1].id, node_.id) << "the same node id registers again";
  ASSERT_TRUE(PumpUntil([&] { return Snap().registrations == 2; }));
  EXPECT_EQ(ready_calls_, 1) << "ready is printed once, not per registration";
  Advance(1000 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Beats() == 1; }));
  EXPECT_EQ(Snap().failures, 0u);
}

TEST_F(HeadSession, RetriesWithDoublingBackoffWhileHeadUnreachable) {
  uint16_t port = StartHead();
  StopHead();  // nothing listens on `port` now
  StartSession();
  ASSERT_TRUE(PumpUntil([&] { return Snap().failures == 1; }));
  EXPECT_EQ(Snap().state, State::kRetrying);
  EXPECT_EQ(Snap().retry_delay_ms, 100u);
  EXPECT_EQ(Snap().last_error.rfind("registerNode: kUnavailable: ", 0), 0u) << Snap().last_error;
  Advance(99 * kMs);
  EXPECT_EQ(Snap().failures, 1u) << "retried before the backoff passed";
  Advance(1 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().failures == 2; }));
  EXPECT_EQ(Snap().retry_delay_ms, 200u);
  Advance(200 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().failures == 3; }));
  EXPECT_EQ(Snap().retry_delay_ms, 400u);
  Advance(400 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().failures == 4; }));
  EXPECT_EQ(Snap().retry_delay_ms, 400u) << "the delay stops growing at max_retry_delay";
  EXPECT_EQ(Snap().consecutive_failures, 4u);
  EXPECT_EQ(ready_calls_, 0);

  // The head comes up on the same port: the next retry registers.
  StartHead(port);
  Advance(400 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  EXPECT_EQ(state_->NumRegistrations(), 1u);
  EXPECT_EQ(ready_calls_, 1);
  EXPECT_EQ(Snap().consecutive_failures, 0u);
  EXPECT_EQ(Snap().failures, 4u);
}

TEST_F(HeadSession, RetryDelaysAreJitteredDownwardWithinTheBackoff) {
  options_.retry_jitter = 0.5;
  uint16_t port = StartHead();
  StopHead();
  (void)port;
  StartSession();
  for (uint64_t attempt = 1; attempt <= 4; ++attempt) {
    ASSERT_TRUE(PumpUntil([&] { return Snap().failures == attempt; }));
    uint64_t full = std::min<uint64_t>(100u << (attempt - 1), 400);
    EXPECT_LE(Snap().retry_delay_ms, full);
    EXPECT_GE(Snap().retry_delay_ms, full / 2);
    Advance(static_cast<int64_t>(full) * kMs);
  }
}

TEST_F(HeadSession, RetriesWhenTheHeadDoesNotAnswerInTime) {
  state_->SetHangRegister(true);
  StartHead();
  StartSession();
  ASSERT_TRUE(PumpUntil([&] { return state_->NumRegisterCalls() == 1; }));
  Advance(499 * kMs);
  EXPECT_EQ(Snap().failures, 0u);
  Advance(1 * kMs);  // the call deadline
  ASSERT_TRUE(PumpUntil([&] { return Snap().failures == 1; }));
  EXPECT_EQ(Snap().last_error.rfind("registerNode: kUnavailable: ", 0), 0u) << Snap().last_error;
  state_->SetHangRegister(false);
  Advance(100 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  EXPECT_EQ(state_->NumRegisterCalls(), 2u);
  EXPECT_EQ(ready_calls_, 1);
}

TEST_F(HeadSession, RegistersWithTheRestartedHeadAfterHeartbeatsFail) {
  uint16_t port = StartHead();
  StartSession();
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  StopHead();
  Advance(1000 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().failures == 1; }));
  EXPECT_EQ(Snap().last_error.rfind("heartbeat: kUnavailable: ", 0), 0u) << Snap().last_error;

  // A restarted head knows nothing: the retried heartbeat hears known=false and registers.
  auto old_state = state_;
  state_ = std::make_shared<FakeHeadState>();
  state_->heartbeat_interval_ms = 1000;
  StartHead(port);
  Advance(100 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().registrations == 2; }));
  EXPECT_EQ(state_->NumUnknownHeartbeats(), 1u);
  EXPECT_EQ(state_->NumRegistrations(), 1u);
  EXPECT_EQ(old_state->NumRegistrations(), 1u);
  Advance(1000 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Beats() == 1; }));
  EXPECT_EQ(ready_calls_, 1);
}

TEST_F(HeadSession, HeartbeatRetriesWithoutReRegisteringWhenTheHeadStillKnowsTheNode) {
  StartHead();
  StartSession();
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  state_->SetHangRegister(true);  // would show up as a register call
  // Drop the connection under the session: the head is still the same and knows the node.
  uint16_t port = port_;
  StopHead();
  StartHead(port);
  Advance(1000 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Snap().failures == 1; }));
  Advance(100 * kMs);
  ASSERT_TRUE(PumpUntil([&] { return Beats() == 1; }));
  EXPECT_EQ(state_->NumRegisterCalls(), 1u);
}

TEST_F(HeadSession, GivesUpWithTheHeadsReasonWhenTheHeadRefusesTheNode) {
  state_->SetRefuseRegister("the head declared node x dead (no heartbeat for 10000 ms)");
  StartHead();
  StartSession();
  std::optional<std::string> why;
  auto given_up = session_->WhenGivenUp().then([&](std::string w) { why = w; }).eagerlyEvaluate(nullptr);
  ASSERT_TRUE(PumpUntil([&] { return why.has_value(); }));
  EXPECT_NE(why->find("the head refused node " + node_.id.Hex()), std::string::npos) << *why;
  EXPECT_NE(why->find("no heartbeat for 10000 ms"), std::string::npos) << *why;
  EXPECT_EQ(Snap().state, State::kGaveUp);
  Advance(1000 * kMs);
  EXPECT_EQ(state_->NumRegisterCalls(), 1u) << "a refused node does not ask again";
  EXPECT_EQ(ready_calls_, 0);
}

TEST_F(HeadSession, GivesUpWhenTheHeadStaysUnreachablePastTheReconnectWindow) {
  options_.reconnect_timeout = 1 * kj::SECONDS;
  StartHead();
  StartSession();
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  StopHead();
  std::optional<std::string> why;
  auto given_up = session_->WhenGivenUp().then([&](std::string w) { why = w; }).eagerlyEvaluate(nullptr);
  Advance(1000 * kMs);  // the heartbeat fails: the window starts
  ASSERT_TRUE(PumpUntil([&] { return Snap().failures == 1; }));
  for (int i = 0; i < 20 && !why; ++i) {
    uint64_t failures = Snap().failures;
    Advance(static_cast<int64_t>(Snap().retry_delay_ms) * kMs);
    ASSERT_TRUE(PumpUntil([&] { return Snap().failures > failures || why.has_value(); }));
  }
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("could not reach the head"), std::string::npos) << *why;
  EXPECT_NE(why->find("reconnect window of 1 s"), std::string::npos) << *why;
  EXPECT_NE(why->find("exits"), std::string::npos) << *why;
  EXPECT_EQ(Snap().state, State::kGaveUp);
}

TEST_F(HeadSession, UnregisterTellsTheHeadAndStopsHeartbeats) {
  StartHead();
  StartSession();
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  session_->Unregister(1000 * kMs).wait(wait());
  ASSERT_EQ(state_->Unregistrations().size(), 1u);
  EXPECT_EQ(state_->Unregistrations()[0], node_.id);
  EXPECT_EQ(Snap().state, State::kStopped);
  Advance(10000 * kMs);
  EXPECT_EQ(state_->Heartbeats().size(), 0u);
}

TEST_F(HeadSession, UnregisterGivesUpAtItsTimeoutWhenTheHeadDoesNotAnswer) {
  StartHead();
  StartSession();
  ASSERT_TRUE(PumpUntil([&] { return Snap().state == State::kRegistered; }));
  state_->SetHangUnregister(true);
  kj::Promise<void> leaving = session_->Unregister(300 * kMs);
  Advance(299 * kMs);
  EXPECT_FALSE(leaving.poll(wait()));
  Advance(1 * kMs);
  EXPECT_TRUE(leaving.poll(wait()));
  leaving.wait(wait());  // resolves, never rejects
}

TEST_F(HeadSession, UnregisterResolvesWhenTheHeadIsDown) {
  uint16_t port = StartHead();
  StopHead();
  (void)port;
  StartSession();
  ASSERT_TRUE(PumpUntil([&] { return Snap().failures >= 1; }));
  kj::Promise<void> leaving = session_->Unregister(300 * kMs);
  // Refused at once: no need for the deadline.
  ASSERT_TRUE(PumpUntil([&] { return leaving.poll(wait()); }));
  leaving.wait(wait());
  EXPECT_EQ(Snap().state, State::kStopped);
}

}  // namespace
}  // namespace airt
