// The node's drain (worker/internal/node_drain.h) over the real lease service: requests after
// the drain spill back to a node with room, the drain is done once the held leases are returned,
// and at the deadline the workers still leased are stopped.
#include "worker/internal/node_drain.h"

#include <gtest/gtest.h>

#include "common/rpc_status.h"
#include "tests/worker/lease_fixture.h"

namespace airt::testing {
namespace {

using Kind = LeaseReply::Kind;
using Phase = worker::NodeDrainSnapshot::Phase;

uint64_t FixedWallMs() { return 1'000'000; }

class NodeDrain : public LeaseFixture {
 protected:
  void StartDrainingNode(const std::map<std::string, double>& total) {
    ASSERT_NO_FATAL_FAILURE(StartNode({.total = total}));
    drain_ = std::make_unique<worker::NodeDrain>(leases(), timer(), FixedWallMs,
                                                 20 * kj::MILLISECONDS);
    target_->drain = drain_.get();
    done_ = drain_->WhenDone().then([this] { done_seen_ = true; }).eagerlyEvaluate(nullptr);
  }
  ~NodeDrain() noexcept override {
    target_->drain = nullptr;
    done_ = nullptr;
    drain_.reset();
  }
  // Node.drain over the node's service; the call's status.
  Status Drain(const std::string& reason, uint64_t timeout_ms) {
    auto request = node().drainRequest();
    request.setReason(reason);
    request.setTimeoutMs(timeout_ms);
    return CatchKj([&] { request.send().wait(wait()); });
  }

  std::unique_ptr<worker::NodeDrain> drain_;
  kj::Maybe<kj::Promise<void>> done_;
  bool done_seen_ = false;
};

TEST_F(NodeDrain, RequestsAfterTheDrainSpillBackToANodeWithRoom) {
  ViewNode other;
  other.info.id = NodeId::FromRandom();
  other.info.address = "10.1.2.3";
  other.info.node_port = 4567;
  other.info.total = {{"CPU", 8}};
  other.available = {{"CPU", 8}};
  head_state_->AddViewNode(other);
  ASSERT_NO_FATAL_FAILURE(StartDrainingNode({{"CPU", 4}}));
  ASSERT_TRUE(WaitForFreshView());
  LeaseReply before = Lease({{"CPU", 1}});
  ASSERT_EQ(before.kind, Kind::kGranted) << before.status.ToString();
  ASSERT_TRUE(Drain("maintenance", 60'000).ok());
  EXPECT_EQ(drain_->Snapshot().phase, Phase::kDraining);
  EXPECT_EQ(drain_->Snapshot().reason, "maintenance");
  LeaseReply after = Lease({{"CPU", 1}});
  ASSERT_EQ(after.kind, Kind::kSpillback) << after.status.ToString();
  EXPECT_EQ(after.text, "10.1.2.3:4567");
  EXPECT_TRUE(WaitForHeartbeatAvailable("CPU", 0)) << "a draining node offers nothing";
  EXPECT_FALSE(done_seen_) << "a lease is still held";
  ASSERT_TRUE(Return(before.lease_id).ok());
  ASSERT_TRUE(PumpUntil([&] { return done_seen_; }));
  EXPECT_EQ(drain_->Snapshot().phase, Phase::kDone);
  EXPECT_FALSE(drain_->Snapshot().deadline_passed);
  EXPECT_EQ(Drain("again", 1000).code(), Code::kFailedPrecondition) << "the node is leaving";
}

TEST_F(NodeDrain, StopsTheWorkersStillLeasedAtTheDeadline) {
  ASSERT_NO_FATAL_FAILURE(StartDrainingNode({{"CPU", 2}}));
  LeaseReply held = Lease({{"CPU", 1}});
  ASSERT_EQ(held.kind, Kind::kGranted) << held.status.ToString();
  ASSERT_TRUE(Drain("preemption notice", 300).ok());
  ASSERT_TRUE(PumpUntil([&] { return done_seen_; }));
  worker::NodeDrainSnapshot snapshot = drain_->Snapshot();
  EXPECT_TRUE(snapshot.deadline_passed);
  EXPECT_EQ(snapshot.workers_stopped, 1u);
  std::optional<worker::WorkerExit> exit = leases().ExitReason(held.worker.id);
  ASSERT_TRUE(exit.has_value());
  EXPECT_NE(exit->reason.find("drained (preemption notice)"), std::string::npos) << exit->reason;
  EXPECT_TRUE(Return(held.lease_id).ok()) << "a lease the node ended is returned as a no-op";
  EXPECT_EQ(Snap().num_leases, 0u);
}

TEST_F(NodeDrain, DrainedAgainKeepsTheEarlierDeadline) {
  ASSERT_NO_FATAL_FAILURE(StartDrainingNode({{"CPU", 2}}));
  LeaseReply held = Lease({{"CPU", 1}});
  ASSERT_EQ(held.kind, Kind::kGranted) << held.status.ToString();
  ASSERT_TRUE(Drain("first", 10'000).ok());
  EXPECT_EQ(drain_->Snapshot().deadline_ms, FixedWallMs() + 10'000);
  ASSERT_TRUE(Drain("second", 60'000).ok());
  EXPECT_EQ(drain_->Snapshot().deadline_ms, FixedWallMs() + 10'000);
  EXPECT_EQ(drain_->Snapshot().reason, "second");
  ASSERT_TRUE(Drain("third", 5'000).ok());
  EXPECT_EQ(drain_->Snapshot().deadline_ms, FixedWallMs() + 5'000);
  ASSERT_TRUE(Return(held.lease_id).ok());
  ASSERT_TRUE(PumpUntil([&] { return done_seen_; }));
}

TEST_F(NodeDrain, ADrainWithoutTimeoutIsInvalid) {
  ASSERT_NO_FATAL_FAILURE(StartDrainingNode({{"CPU", 1}}));
  EXPECT_EQ(Drain("x", 0).code(), Code::kInvalidArgument);
  EXPECT_EQ(drain_->Snapshot().phase, Phase::kServing);
  EXPECT_FALSE(leases().draining());
}

}  // namespace
}  // namespace airt::testing
