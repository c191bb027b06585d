// The head restarts every actor, not only detached ones whose job finished: it watches the worker
// of an actor its owner recorded ALIVE with a creation task, and records the restart when that
// worker's connection ends while the owner's job still runs; the job's end kills the actor (fate
// sharing). The nodes are a double whose worker connections end when the test says.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "tests/head/head_rpc_fixture.h"

namespace airt::head::testing {
namespace {

// Worker connections that end when the test says; nodes that cannot be reached.
class WatchedWorkers final : public internal::NodeConnector {
 public:
  proto::Node::Client Connect(const std::string&) override {
    return proto::Node::Client(KJ_EXCEPTION(DISCONNECTED, "no node in this test"));
  }
  void Forget(const std::string&) override {}
  kj::Promise<void> WhenGone(const std::string& address) override {
    auto paf = kj::newPromiseAndFulfiller<void>();
    gone_[address] = kj::mv(paf.fulfiller);
    return kj::mv(paf.promise);
  }
  // Ends the connection to the worker at `address`; false when nobody watches it.
  bool End(const std::string& address) {
    auto it = gone_.find(address);
    if (it == gone_.end() || !it->second->isWaiting()) return false;
    it->second->fulfill();
    return true;
  }

 private:
  std::map<std::string, kj::Own<kj::PromiseFulfiller<void>>> gone_;
};

class HeadActorRestartsTest : public HeadRpcTest {
 protected:
  void SetUp() override {
    connector_ = &workers_;
    HeadRpcTest::SetUp();
  }

  Status RecordAlive(const ActorId& id, const WorkerId& worker, bool with_creation_task) {
    auto request = head().updateActorRequest();
    auto info = request.initInfo();
    FillActor(info, id, "", "");
    info.setState(proto::ActorState::ALIVE);
    info.setWorkerAddress("10.0.0.2:5000");
    info.setNodeAddress("10.0.0.2:7000");
    info.setWorkerId(capnp::Data::Reader(worker.data(), WorkerId::kSize));
    info.setPid(4321);
    static const kj::byte kTask[8] = {};
    if (with_creation_task) info.setCreationTask(capnp::Data::Reader(kTask, sizeof(kTask)));
    return Send(kj::mv(request)).status();
  }

  std::optional<proto::ActorState> State(const ActorId& id, std::string* cause = nullptr,
                                         uint32_t* restarts = nullptr) {
    auto request = head().getActorRequest();
    request.setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
    auto reply = Send(kj::mv(request));
    if (!reply.ok() || !reply->getFound()) return std::nullopt;
    if (cause != nullptr) *cause = reply->getInfo().getDeathCause().cStr();
    if (restarts != nullptr) *restarts = reply->getInfo().getNumRestarts();
    return reply->getInfo().getState();
  }

  WatchedWorkers workers_;
};

TEST_F(HeadActorRestartsTest, TheHeadRestartsALiveJobsActorWhoseWorkerDiedAndItDiesWithItsJob) {
  JobId job = *RegisterJob();
  ActorId id = ActorId::Of(job);
  ASSERT_TRUE(RegisterActor(id).ok());  // max_restarts=1, not detached
  ASSERT_TRUE(RecordAlive(id, WorkerId::FromRandom(), /*with_creation_task=*/true).ok());
  ASSERT_TRUE(PumpUntil([&] { return head_->Waiters().actors_watched == 1; }))
      << "the head watches the worker of an actor whose job runs";

  ASSERT_TRUE(workers_.End("10.0.0.2:5000"));
  std::string cause;
  uint32_t restarts = 0;
  // No node is registered: the restart waits for one, RESTARTING, its owner's job still alive.
  ASSERT_TRUE(PumpUntil([&] {
    return State(id, &cause, &restarts) == proto::ActorState::RESTARTING;
  }));
  EXPECT_EQ(restarts, 1u);
  EXPECT_EQ(cause, "its worker process exited");
  EXPECT_EQ(JobAliveAndEnd(job)->first, true);

  auto finish = head().finishJobRequest();
  finish.setJobId(capnp::Data::Reader(job.data(), JobId::kSize));
  ASSERT_TRUE(Send(kj::mv(finish)).ok());
  EXPECT_EQ(State(id, &cause), proto::ActorState::DEAD);
  EXPECT_NE(cause.find("exited"), std::string::npos) << cause;
  EXPECT_TRUE(PumpUntil([&] { return head_->Waiters().actors_watched == 0; }));
}

TEST_F(HeadActorRestartsTest, AnActorWhoseCreationTaskTheHeadLacksIsDeadWhenItsWorkerDies) {
  JobId job = *RegisterJob();
  ActorId id = ActorId::Of(job);
  ASSERT_TRUE(RegisterActor(id).ok());
  ASSERT_TRUE(RecordAlive(id, WorkerId::FromRandom(), /*with_creation_task=*/false).ok());
  ASSERT_TRUE(PumpUntil([&] { return head_->Waiters().actors_watched == 1; }));
  ASSERT_TRUE(workers_.End("10.0.0.2:5000"));
  std::string cause;
  ASSERT_TRUE(PumpUntil([&] { return State(id, &cause) == proto::ActorState::DEAD; }));
  EXPECT_NE(cause.find("holds no creation task"), std::string::npos) << cause;
}

}  // namespace
}  // namespace airt::head::testing
