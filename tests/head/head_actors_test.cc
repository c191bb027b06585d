// The actor directory and job leases over EzRpc on loopback: register, get, list, update and kill
// actors; finishing a job (by finishJob or by its driver's connection closing) kills its actors;
// heartbeats tell nodes which jobs finished.
#include <chrono>

#include <gtest/gtest.h>
#include <kj/async-io.h>
#include <kj/timer.h>

#include "head/internal/wire.h"
#include "tests/head/head_rpc_fixture.h"

namespace airt::head::testing {
namespace {

using namespace std::chrono_literals;

class HeadActorsTest : public HeadRpcTest {
 protected:
  // getActor by id (`name` empty) or by name; the reply's info when found, kNotFound otherwise.
  Result<capnp::Response<proto::Head::GetActorResults>> Get(const ActorId* id,
                                                            const std::string& name = "",
                                                            const std::string& ns = "") {
    auto request = head().getActorRequest();
    if (id != nullptr) request.setActorId(capnp::Data::Reader(id->data(), ActorId::kSize));
    request.setName(name);
    request.setNamespace(ns);
    auto reply = Send(kj::mv(request));
    if (reply.ok() && !reply->getFound()) return NotFound("no such actor");
    return reply;
  }

  Result<capnp::Response<proto::Head::KillActorResults>> Kill(const ActorId& id,
                                                              const std::string& cause) {
    auto request = head().killActorRequest();
    request.setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
    request.setCause(cause);
    return Send(kj::mv(request));
  }

  Status Update(const ActorId& id, const std::function<void(proto::ActorInfo::Builder)>& edit) {
    auto request = head().updateActorRequest();
    auto info = request.initInfo();
    info.setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
    edit(info);
    return Send(kj::mv(request)).status();
  }

  Status FinishJob(const JobId& id) {
    auto request = head().finishJobRequest();
    request.setJobId(capnp::Data::Reader(id.data(), JobId::kSize));
    return Send(kj::mv(request)).status();
  }

  // Runs the loop (the head serves on this thread) until `condition` holds or 10 s pass.

  static std::string Str(capnp::Text::Reader text) { return std::string(text.cStr()); }
};

TEST_F(HeadActorsTest, RegisteredActorIsFoundByIdAndByNameAndListed) {
  JobId job = *RegisterJob();
  ActorId counter = ActorId::Of(job), other = ActorId::Of(job);
  ASSERT_TRUE(RegisterActor(counter, "counter", "team", [](proto::ActorInfo::Builder info) {
                info.setState(proto::ActorState::ALIVE);  // forced to PENDING
                info.setDetached(true);
                info.setLanguage(1);
              }).ok());
  ASSERT_TRUE(RegisterActor(other).ok());

  auto by_id = Get(&counter);
  ASSERT_TRUE(by_id.ok()) << by_id.status().ToString();
  auto info = by_id->getInfo();
  EXPECT_EQ(info.getActorId(), capnp::Data::Reader(counter.data(), ActorId::kSize));
  EXPECT_EQ(info.getJobId(), capnp::Data::Reader(job.data(), JobId::kSize));
  EXPECT_EQ(Str(info.getName()), "counter");
  EXPECT_EQ(Str(info.getNamespace()), "team");
  EXPECT_EQ(Str(info.getClassName()), "Counter::Create");
  EXPECT_EQ(info.getState(), proto::ActorState::PENDING);
  EXPECT_EQ(info.getMaxRestarts(), 1);
  EXPECT_TRUE(info.getDetached());
  EXPECT_EQ(info.getLanguage(), 1);
  EXPECT_EQ(info.getWorkerId().size(), 0u);

  auto by_name = Get(nullptr, "counter", "team");
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  EXPECT_EQ(by_name->getInfo().getActorId(), info.getActorId());
  EXPECT_EQ(Get(nullptr, "counter", "").status().code(), Code::kNotFound) << "another namespace";
  ActorId stranger = ActorId::Of(job);
  EXPECT_EQ(Get(&stranger).status().code(), Code::kNotFound);

  auto list = Send(head().listActorsRequest());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->getActors().size(), 2u);
  EXPECT_EQ(list->getActors()[0].getActorId(), info.getActorId());
  EXPECT_EQ(list->getActors()[1].getActorId(), capnp::Data::Reader(other.data(), ActorId::kSize));
}

TEST_F(HeadActorsTest, RegisterActorRefusesATakenNameAndAFinishedJob) {
  JobId job = *RegisterJob();
  ActorId first = ActorId::Of(job);
  ASSERT_TRUE(RegisterActor(first, "trainer", "team").ok());
  Status taken = RegisterActor(ActorId::Of(job), "trainer", "team");
  EXPECT_EQ(taken.code(), Code::kAlreadyExists);
  EXPECT_EQ(taken.message(), "the actor name 'trainer' in namespace 'team' exists already (actor " +
                                 first.Hex() + ")");
  ASSERT_TRUE(FinishJob(job).ok());
  Status finished = RegisterActor(ActorId::Of(job), "late");
  EXPECT_EQ(finished.code(), Code::kFailedPrecondition);
  EXPECT_NE(finished.message().find("which has finished"), std::string::npos);
  Status unknown = RegisterActor(ActorId::Of(JobId::FromRandom()));
  EXPECT_EQ(unknown.code(), Code::kFailedPrecondition);
}

TEST_F(HeadActorsTest, UpdateShowsTheWorkerAndKillReturnsIt) {
  JobId job = *RegisterJob();
  ActorId id = ActorId::Of(job);
  ASSERT_TRUE(RegisterActor(id, "counter").ok());
  WorkerId worker = WorkerId::FromRandom();
  ASSERT_TRUE(Update(id, [&](proto::ActorInfo::Builder info) {
                info.setState(proto::ActorState::ALIVE);
                info.setWorkerAddress("10.0.0.2:5000");
                info.setNodeAddress("10.0.0.2:7000");
                info.setWorkerId(capnp::Data::Reader(worker.data(), WorkerId::kSize));
                info.setPid(4321);
                info.setName("ignored");  // names stay
              }).ok());
  auto alive = Get(nullptr, "counter");
  ASSERT_TRUE(alive.ok()) << alive.status().ToString();
  EXPECT_EQ(alive->getInfo().getState(), proto::ActorState::ALIVE);
  EXPECT_EQ(Str(alive->getInfo().getWorkerAddress()), "10.0.0.2:5000");
  EXPECT_EQ(alive->getInfo().getPid(), 4321);

  auto killed = Kill(id, "");
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  EXPECT_EQ(killed->getInfo().getState(), proto::ActorState::DEAD);
  EXPECT_EQ(Str(killed->getInfo().getDeathCause()), "the actor was killed");
  EXPECT_EQ(Str(killed->getInfo().getNodeAddress()), "10.0.0.2:7000");
  EXPECT_EQ(killed->getInfo().getWorkerId(), capnp::Data::Reader(worker.data(), WorkerId::kSize));
  EXPECT_EQ(Get(nullptr, "counter").status().code(), Code::kNotFound) << "DEAD: not by name";
  EXPECT_EQ(Get(&id)->getInfo().getState(), proto::ActorState::DEAD) << "still by id";

  Status late =
      Update(id, [](proto::ActorInfo::Builder info) { info.setState(proto::ActorState::ALIVE); });
  EXPECT_EQ(late.code(), Code::kFailedPrecondition);
  EXPECT_EQ(Kill(id, "again")->getInfo().getDeathCause(), "the actor was killed");
  ActorId stranger = ActorId::Of(job);
  EXPECT_EQ(Kill(stranger, "x").status().code(), Code::kNotFound);
  EXPECT_EQ(Update(stranger, [](proto::ActorInfo::Builder) {}).code(), Code::kNotFound);
}

TEST_F(HeadActorsTest, FinishJobMarksItsActorsDeadButNotDetachedOnes) {
  JobId job = *RegisterJob();
  ActorId plain = ActorId::Of(job), detached = ActorId::Of(job);
  ASSERT_TRUE(RegisterActor(plain, "plain").ok());
  ASSERT_TRUE(RegisterActor(detached, "detached", "", [](proto::ActorInfo::Builder info) {
                info.setDetached(true);
              }).ok());
  ASSERT_TRUE(FinishJob(job).ok());
  auto dead = Get(&plain);
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead->getInfo().getState(), proto::ActorState::DEAD);
  EXPECT_EQ(Str(dead->getInfo().getDeathCause()), "the driver of job " + job.Hex() + " exited");
  EXPECT_TRUE(Get(nullptr, "detached").ok()) << "a detached actor outlives its job";
  EXPECT_TRUE(RegisterActor(ActorId::Of(*RegisterJob()), "plain").ok()) << "the name is free";
}

// A driver over a connection of its own: when the connection closes, its job finishes.
TEST_F(HeadActorsTest, ClosingTheDriversConnectionFinishesItsJobAndKillsItsActors) {
  uint port = server_->getPort().wait(server_->getWaitScope());
  auto driver = std::make_unique<capnp::EzRpcClient>("127.0.0.1", port);
  JobId job;
  {
    auto request = driver->getMain<proto::Head>().registerJobRequest();
    request.setDriverPid(999);
    auto reply = request.send().wait(driver->getWaitScope());
    job = JobId::FromRaw(reply.getJobId().begin());
    proto::JobLease::Client lease = reply.getLease();  // held by the connection from here
    auto actor = driver->getMain<proto::Head>().registerActorRequest();
    FillActor(actor.initInfo(), ActorId::Of(job), "worker-0");
    actor.send().wait(driver->getWaitScope());
    ASSERT_TRUE(Get(nullptr, "worker-0").ok());
    EXPECT_TRUE(JobAliveAndEnd(job)->first);
    driver.reset();  // the lease's client goes with its connection
  }
  ASSERT_TRUE(PumpUntil([&] { return !JobAliveAndEnd(job)->first; }));
  EXPECT_NE(JobAliveAndEnd(job)->second, 0u) << "an end time";
  EXPECT_EQ(Get(nullptr, "worker-0").status().code(), Code::kNotFound);
}

TEST_F(HeadActorsTest, DroppingTheLeaseFinishesTheJobOnlyOnce) {
  JobId dropped = *RegisterJob();
  JobId finished = *RegisterJob();
  ASSERT_TRUE(FinishJob(finished).ok());
  uint64_t end = JobAliveAndEnd(finished)->second;
  clock_.AdvanceMs(500);
  leases_.erase(dropped);
  leases_.erase(finished);
  ASSERT_TRUE(PumpUntil([&] { return !JobAliveAndEnd(dropped)->first; }));
  EXPECT_EQ(JobAliveAndEnd(finished)->second, end) << "finished before: unchanged";
  auto beat = head().heartbeatRequest();
  NodeId node = NodeId::FromRandom();
  beat.setNodeId(capnp::Data::Reader(node.data(), NodeId::kSize));
  auto reply = Send(kj::mv(beat));
  ASSERT_TRUE(reply.ok());
  EXPECT_EQ(reply->getFinishedSeq(), 2u) << "each job's finish numbered once";
}

// The lease may outlive the server that handed it out (a test's head stops first); dropping it
// then does nothing.
TEST_F(HeadActorsTest, LeaseOutlivingItsHeadDoesNothing) {
  kj::WaitScope& wait = server_->getWaitScope();
  auto opened = HeadServer::Open(HeadOptions(), store_, clock_);
  ASSERT_TRUE(opened.ok());
  std::optional<proto::Head::Client> local(kj::mv(*opened));
  std::optional<proto::JobLease::Client> lease;
  JobId job;
  {
    auto reply = local->registerJobRequest().send().wait(wait);
    job = JobId::FromRaw(reply.getJobId().begin());
    lease = reply.getLease();
  }
  local.reset();  // the last reference: the server goes
  kj::evalLater([] {}).wait(wait);
  lease.reset();
  kj::evalLater([] {}).wait(wait);
  auto alive = JobAliveAndEnd(job);  // the fixture's head reads the same store
  ASSERT_FALSE(alive.has_value()) << "the fixture's head loaded its jobs before this one";
  std::optional<std::string> row = *backing_.Get("job:00000001");
  ASSERT_TRUE(row.has_value());
  Result<internal::JobRecord> record = internal::DecodeJobRow(*row);
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->id, job);
  EXPECT_TRUE(record->alive) << "nobody finished it";
}

TEST_F(HeadActorsTest, HeartbeatAnswersTheJobsFinishedSinceJobsSeen) {
  NodeId node = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(node).ok());
  JobId a = *RegisterJob(), b = *RegisterJob(), c = *RegisterJob();
  auto beat = [&](uint64_t seen) {
    auto request = head().heartbeatRequest();
    request.setNodeId(capnp::Data::Reader(node.data(), NodeId::kSize));
    request.setJobsSeen(seen);
    auto reply = Send(kj::mv(request));
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    std::vector<JobId> jobs;
    for (capnp::Data::Reader id : reply->getFinishedJobs()) {
      jobs.push_back(id.size() == JobId::kSize ? JobId::FromRaw(id.begin()) : JobId::Nil());
    }
    EXPECT_TRUE(reply->getKnown());
    return std::make_pair(jobs, reply->getFinishedSeq());
  };
  EXPECT_EQ(beat(0), std::make_pair(std::vector<JobId>{}, uint64_t{0}));
  ASSERT_TRUE(FinishJob(b).ok());
  leases_.erase(a);
  ASSERT_TRUE(PumpUntil([&] { return !JobAliveAndEnd(a)->first; }));
  EXPECT_EQ(beat(0), std::make_pair(std::vector<JobId>{b, a}, uint64_t{2}));
  EXPECT_EQ(beat(1), std::make_pair(std::vector<JobId>{a}, uint64_t{2}));
  EXPECT_EQ(beat(2), std::make_pair(std::vector<JobId>{}, uint64_t{2}));
  ASSERT_TRUE(FinishJob(c).ok());
  EXPECT_EQ(beat(2), std::make_pair(std::vector<JobId>{c}, uint64_t{3}));
}

}  // namespace
}  // namespace airt::head::testing
