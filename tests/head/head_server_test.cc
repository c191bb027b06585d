// The Head service over EzRpc on loopback: nodes, liveness, KV, jobs, and a failing store.
#include <gtest/gtest.h>

#include "head/internal/job_table.h"
#include "tests/head/head_rpc_fixture.h"

namespace airt::head::testing {
namespace {

using internal::JobIdOf;

NodeId IdOf(capnp::Data::Reader bytes) {
  return bytes.size() == NodeId::kSize ? NodeId::FromRaw(bytes.begin()) : NodeId::Nil();
}

using HeadServerTest = HeadRpcTest;

TEST_F(HeadServerTest, RegisterNodeRepliesWithHeartbeatIntervalAndTimeout) {
  auto request = head().registerNodeRequest();
  FillNode(request.initInfo(), NodeId::FromRandom(), /*gpus=*/2);
  auto reply = Send(kj::mv(request));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->getHeartbeatIntervalMs(), kHeartbeatMs);
  EXPECT_EQ(reply->getNodeTimeoutMs(), kTimeoutMs);
}

TEST_F(HeadServerTest, ClusterViewShowsEveryFieldOfARegisteredNode) {
  NodeId id = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(id, /*gpus=*/2).ok());
  ASSERT_TRUE(*Heartbeat(id, [](proto::Head::HeartbeatParams::Builder hb) {
    auto in_use = hb.initGpuIdsInUse(1);
    in_use.set(0, 1);
    hb.initQuarantinedGpuIds(1).set(0, 0);
  }));
  clock_.AdvanceMs(30);
  auto view = View();
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_EQ(view->getNodes().size(), 1u);
  auto node = view->getNodes()[0];
  EXPECT_EQ(IdOf(node.getInfo().getNodeId()), id);
  EXPECT_EQ(std::string(node.getInfo().getAddress().cStr()), "10.0.0.1");
  EXPECT_EQ(node.getInfo().getNodePort(), 7000);
  EXPECT_EQ(node.getInfo().getTransferPort(), 7001);
  EXPECT_EQ(std::string(node.getInfo().getStoreSocket().cStr()), "/tmp/airt/store.sock");
  EXPECT_EQ(node.getInfo().getTotal().size(), 2u);
  EXPECT_EQ(std::string(node.getInfo().getLabels()[0].getValue().cStr()), "A10");
  EXPECT_EQ(node.getInfo().getGpuIds().size(), 2u);
  EXPECT_EQ(node.getInfo().getPid(), 4242);
  EXPECT_TRUE(node.getAlive());
  ASSERT_EQ(node.getAvailable().size(), 1u);
  EXPECT_EQ(node.getAvailable()[0].getAmount(), 4);
  ASSERT_EQ(node.getGpuIdsInUse().size(), 1u);
  EXPECT_EQ(node.getGpuIdsInUse()[0], 1u);
  ASSERT_EQ(node.getQuarantinedGpuIds().size(), 1u);
  EXPECT_EQ(node.getQuarantinedGpuIds()[0], 0u);
  EXPECT_EQ(node.getMsSinceHeartbeat(), 30u);
}

TEST_F(HeadServerTest, ClusterViewShowsNodeDeadAfterTheTimeoutAndRefusesItsReRegister) {
  NodeId a = NodeId::FromRandom(), b = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(a).ok());
  ASSERT_TRUE(RegisterNode(b).ok());
  clock_.AdvanceMs(kTimeoutMs / 2);
  ASSERT_TRUE(*Heartbeat(b));
  clock_.AdvanceMs(kTimeoutMs / 2);
  auto view = View();
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->getNodes().size(), 2u);
  EXPECT_EQ(IdOf(view->getNodes()[0].getInfo().getNodeId()), a);
  EXPECT_FALSE(view->getNodes()[0].getAlive());
  EXPECT_TRUE(view->getNodes()[1].getAlive());
  EXPECT_NE(std::string(view->getNodes()[0].getDeathCause().cStr()).find("no heartbeat"),
            std::string::npos);
  EXPECT_EQ(*Heartbeat(a), false) << "a dead node is unknown";
  EXPECT_EQ(RegisterNode(a).code(), Code::kFailedPrecondition) << "and may not come back";
  EXPECT_FALSE(View()->getNodes()[0].getAlive());
}

TEST_F(HeadServerTest, CheckLivenessReportsDeathsForTheDaemonsTimer) {
  NodeId a = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(a).ok());
  clock_.AdvanceMs(kTimeoutMs);
  EXPECT_EQ(head_->CheckLiveness().wait(server_->getWaitScope()), std::vector<NodeId>{a});
  EXPECT_FALSE(View()->getNodes()[0].getAlive());
}

TEST_F(HeadServerTest, HeartbeatAnswersUnknownForANodeNeverRegistered) {
  auto known = Heartbeat(NodeId::FromRandom());
  ASSERT_TRUE(known.ok()) << known.status().ToString();
  EXPECT_FALSE(*known);
  EXPECT_EQ(View()->getNodes().size(), 0u);
}

TEST_F(HeadServerTest, UnregisteredNodeIsShownDeadAtOnce) {
  NodeId a = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(a).ok());
  auto request = head().unregisterNodeRequest();
  request.setNodeId(capnp::Data::Reader(a.data(), NodeId::kSize));
  ASSERT_TRUE(Send(kj::mv(request)).ok());
  EXPECT_FALSE(View()->getNodes()[0].getAlive());
  EXPECT_FALSE(*Heartbeat(a));
  auto unknown = head().unregisterNodeRequest();
  NodeId other = NodeId::FromRandom();
  unknown.setNodeId(capnp::Data::Reader(other.data(), NodeId::kSize));
  Status s = Send(kj::mv(unknown)).status();
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "node " + other.Hex() + " is not registered");
}

TEST_F(HeadServerTest, KvRoundTripsBinaryValuesAcrossCalls) {
  std::string value("\0\x01nccl-unique-id\xff", 17);
  EXPECT_TRUE(*KvPut("collective", "group/0", value, /*overwrite=*/false));
  EXPECT_FALSE(*KvPut("collective", "group/0", "other", /*overwrite=*/false));
  EXPECT_EQ(**KvGet("collective", "group/0"), value);
  EXPECT_FALSE(KvGet("other-namespace", "group/0")->has_value());
  ASSERT_TRUE(*KvPut("collective", "group/1", "x"));

  auto keys = head().kvKeysRequest();
  keys.setNamespace("collective");
  keys.setPrefix("group/");
  auto listed = Send(kj::mv(keys));
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->getKeys().size(), 2u);
  EXPECT_EQ(std::string(listed->getKeys()[0].cStr()), "group/0");
  EXPECT_EQ(std::string(listed->getKeys()[1].cStr()), "group/1");

  auto del = [&] {
    auto request = head().kvDeleteRequest();
    request.setNamespace("collective");
    request.setKey("group/0");
    return Send(kj::mv(request));
  };
  EXPECT_TRUE(del()->getDeleted());
  EXPECT_FALSE(del()->getDeleted());
  EXPECT_FALSE(KvGet("collective", "group/0")->has_value());
}

TEST_F(HeadServerTest, KvDeletePrefixDeletesTheGroupsKeysAndRefusesAnEmptyPrefix) {
  ASSERT_TRUE(*KvPut("collective", "g1/0", "a"));
  ASSERT_TRUE(*KvPut("collective", "g1/1", "b"));
  ASSERT_TRUE(*KvPut("collective", "g10/0", "c"));
  auto del = [&](const char* prefix) {
    auto request = head().kvDeletePrefixRequest();
    request.setNamespace("collective");
    request.setPrefix(prefix);
    return Send(kj::mv(request));
  };
  auto deleted = del("g1/");
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(deleted->getDeleted(), 2u);
  EXPECT_FALSE(KvGet("collective", "g1/0")->has_value());
  EXPECT_EQ(**KvGet("collective", "g10/0"), "c");
  auto empty = del("");
  EXPECT_EQ(empty.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(**KvGet("collective", "g10/0"), "c");
}

TEST_F(HeadServerTest, JobsGetFreshIdsAndFinish) {
  auto reg = [&] {
    auto request = head().registerJobRequest();
    request.setDriverPid(1234);
    request.setDriverAddress("10.0.0.9");
    return Send(kj::mv(request));
  };
  auto first = reg();
  auto second = reg();
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_EQ(first->getJobId().size(), JobId::kSize);
  EXPECT_NE(JobId::FromRaw(first->getJobId().begin()), JobId::FromRaw(second->getJobId().begin()));

  clock_.AdvanceMs(250);
  auto finish = head().finishJobRequest();
  finish.setJobId(first->getJobId());
  ASSERT_TRUE(Send(kj::mv(finish)).ok());

  auto jobs = Send(head().listJobsRequest());
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->getJobs().size(), 2u);
  auto job = jobs->getJobs()[0];
  EXPECT_EQ(job.getJobId(), first->getJobId());
  EXPECT_EQ(job.getDriverPid(), 1234);
  EXPECT_EQ(std::string(job.getDriverAddress().cStr()), "10.0.0.9");
  EXPECT_FALSE(job.getAlive());
  EXPECT_EQ(job.getEndMs() - job.getStartMs(), 250u);
  EXPECT_TRUE(jobs->getJobs()[1].getAlive());
  EXPECT_EQ(jobs->getJobs()[1].getEndMs(), 0u);

  auto unknown = head().finishJobRequest();
  unknown.setJobId(capnp::Data::Reader(JobId::Nil().data(), JobId::kSize));
  EXPECT_EQ(Send(kj::mv(unknown)).status().code(), Code::kNotFound);
}

TEST_F(HeadServerTest, FailingStorePutIsAClearErrorAndTheHeadStaysUpWithItsData) {
  NodeId a = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(a).ok());
  ASSERT_TRUE(*KvPut("actors", "trainer", "v1"));

  store_.write_error = Unavailable("injected: redis went away");
  NodeId b = NodeId::FromRandom();
  Status node = RegisterNode(b);
  EXPECT_EQ(node.code(), Code::kUnavailable);
  EXPECT_EQ(node.message(), "registering node " + b.Hex() + ": injected: redis went away");
  Status kv = KvPut("actors", "trainer", "v2").status();
  EXPECT_EQ(kv.code(), Code::kUnavailable);
  EXPECT_EQ(kv.message(), "putting key 'trainer' in namespace 'actors': injected: redis went away");
  EXPECT_EQ(Send(head().registerJobRequest()).status().code(), Code::kUnavailable);

  // Still serving, and what was there before is intact.
  EXPECT_TRUE(*Heartbeat(a));
  auto view = View();
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->getNodes().size(), 1u);
  EXPECT_EQ(IdOf(view->getNodes()[0].getInfo().getNodeId()), a);
  EXPECT_EQ(**KvGet("actors", "trainer"), "v1");
  EXPECT_EQ(Send(head().listJobsRequest())->getJobs().size(), 0u);

  store_.write_error = Status::Ok();
  EXPECT_TRUE(RegisterNode(b).ok()) << "the head recovers when the store does";
  EXPECT_FALSE(*KvPut("actors", "trainer", "v2"));
  EXPECT_EQ(**KvGet("actors", "trainer"), "v2");
}

TEST_F(HeadServerTest, FailedRegisterJobListsNoJobAndLosesNothingStored) {
  JobId kept = *RegisterJob();
  ASSERT_TRUE(*KvPut("ns", "k", "v"));
  store_.FailNextWrites(1, Unavailable("injected: redis went away"));
  Result<JobId> failed = RegisterJob();
  EXPECT_EQ(failed.status().code(), Code::kUnavailable);
  EXPECT_EQ(failed.status().message(), "registering job 02000000: injected: redis went away");
  auto jobs = Send(head().listJobsRequest());
  ASSERT_EQ(jobs->getJobs().size(), 1u) << "the failed job is not listed";
  StopHead();
  StartHead();
  ASSERT_TRUE(JobAliveAndEnd(kept).has_value()) << "what was stored before is still there";
  EXPECT_FALSE(JobAliveAndEnd(JobIdOf(2)).has_value());
  EXPECT_EQ(**KvGet("ns", "k"), "v");
}

TEST_F(HeadServerTest, FinishingAJobIsOneWriteWithItsActorsAndAFailedOneChangesNothing) {
  JobId job = *RegisterJob();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(RegisterActor(ActorId::Of(job)).ok());
  auto finish = [&] {
    auto request = head().finishJobRequest();
    request.setJobId(capnp::Data::Reader(job.data(), JobId::kSize));
    return Send(kj::mv(request)).status();
  };
  store_.FailNextWrites(1, Unavailable("injected"));
  EXPECT_EQ(finish().code(), Code::kUnavailable);
  EXPECT_TRUE(JobAliveAndEnd(job)->first);
  for (auto actor : Send(head().listActorsRequest())->getActors()) {
    EXPECT_EQ(actor.getState(), proto::ActorState::PENDING);
  }
  int writes = store_.writes;
  ASSERT_TRUE(finish().ok());
  EXPECT_EQ(store_.writes, writes + 1) << "the job and its 3 actors in one batch";
  EXPECT_FALSE(JobAliveAndEnd(job)->first);
  for (auto actor : Send(head().listActorsRequest())->getActors()) {
    EXPECT_EQ(actor.getState(), proto::ActorState::DEAD);
  }
}

TEST_F(HeadServerTest, ConcurrentCallsApplyInOrderAndAnswerOnlyOnceWritten) {
  store_.HoldWrites();
  auto put = [&](const std::string& value) {
    auto request = head().kvPutRequest();
    request.setNamespace("ns");
    request.setKey("k");
    request.setValue(
        capnp::Data::Reader(reinterpret_cast<const kj::byte*>(value.data()), value.size()));
    request.setOverwrite(false);
    return request.send();
  };
  auto first = put("first");
  auto second = put("second");
  kj::WaitScope& wait = client_->getWaitScope();
  ASSERT_TRUE(PumpUntil([&] { return store_.held() == 1; }));
  EXPECT_FALSE(KvGet("ns", "k")->has_value()) << "not shown before the store confirmed it";
  EXPECT_FALSE(second.poll(wait)) << "the second waits for the first";
  store_.ReleaseWrites();
  EXPECT_TRUE(first.wait(wait).getAdded());
  EXPECT_FALSE(second.wait(wait).getAdded()) << "staged against the first one's result";
  EXPECT_EQ(**KvGet("ns", "k"), "first");
}

TEST_F(HeadServerTest, AJobWhoseDriverLeftWhileTheStoreFailedIsFinishedByTheNextCheck) {
  JobId job = *RegisterJob();
  store_.write_error = Unavailable("injected");
  leases_.erase(job);
  kj::WaitScope& wait = server_->getWaitScope();
  for (int i = 0; i < 3; ++i) kj::evalLater([] {}).wait(wait);
  EXPECT_TRUE(JobAliveAndEnd(job)->first) << "not finished while the store fails";
  store_.write_error = Status::Ok();
  head_->CheckLiveness().wait(wait);
  ASSERT_TRUE(PumpUntil([&] { return !JobAliveAndEnd(job)->first; }));
}

TEST_F(HeadServerTest, OpenReturnsTheStoreErrorWhenTheStoreIsUnreachable) {
  StopHead();
  store_.scan_error = Unavailable("injected: redis went away");
  auto opened = HeadServer::Open(HeadOptions(), store_, clock_);
  EXPECT_EQ(opened.status().code(), Code::kUnavailable);
  EXPECT_EQ(opened.status().message(), "loading the node table: injected: redis went away");
  store_.scan_error = Status::Ok();
  StartHead();
}

TEST_F(HeadServerTest, RestartedHeadServesTheTablesKeptInTheStore) {
  NodeId a = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(a).ok());
  ASSERT_TRUE(*KvPut("fn", "f", "pickled"));
  std::string job_id;
  {
    auto job = Send(head().registerJobRequest());  // a reply must not outlive its connection
    ASSERT_TRUE(job.ok());
    job_id.assign(reinterpret_cast<const char*>(job->getJobId().begin()), JobId::kSize);
  }

  StopHead();
  StartHead();
  auto view = View();
  ASSERT_TRUE(view.ok());
  ASSERT_EQ(view->getNodes().size(), 1u);
  EXPECT_TRUE(view->getNodes()[0].getAlive());
  EXPECT_FALSE(*Heartbeat(a)) << "a node alive before the restart registers with the new head";
  ASSERT_TRUE(RegisterNode(a).ok()) << "and is welcome";
  EXPECT_TRUE(*Heartbeat(a));
  EXPECT_EQ(**KvGet("fn", "f"), "pickled");
  auto jobs = Send(head().listJobsRequest());
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->getJobs().size(), 1u);
  auto next = Send(head().registerJobRequest());
  ASSERT_TRUE(next.ok());
  EXPECT_NE(std::string(reinterpret_cast<const char*>(next->getJobId().begin()), JobId::kSize),
            job_id);
}

}  // namespace
}  // namespace airt::head::testing
