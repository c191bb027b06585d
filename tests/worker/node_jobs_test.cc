// The node ending workers on its own (LeaseFixture): Node.killWorker kills a worker at once and
// gives its lease's resources back; a job the head's heartbeat answer lists as finished has every
// worker stopped, idle or leased, its waiting requests failed and its objects deleted from the
// node's store; a lease whose holder capability is dropped (its requester died) is returned and
// its worker stopped, unless it is detached. Workers are real airt_fake_worker processes.
#include <signal.h>

#include <cerrno>
#include <string>

#include <gtest/gtest.h>

#include "common/rpc_status.h"
#include "tests/worker/lease_fixture.h"

namespace airt {
namespace {

using testing::LeaseReply;
using Kind = LeaseReply::Kind;


std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

class NodeJobs : public testing::LeaseFixture {
 protected:
  // killWorker's answer, or the call's error.
  Result<bool> KillWorker(const WorkerId& worker, size_t id_size = WorkerId::kSize) {
    auto request = node().killWorkerRequest();
    request.setWorkerId(capnp::Data::Reader(worker.data(), id_size));
    bool killed = false;
    Status s = CatchKj([&] {
      killed = timer().timeoutAfter(10 * kj::SECONDS, request.send()).wait(wait()).getKilled();
    });
    if (!s.ok()) return s;
    return killed;
  }
  std::string Cpus() const { return Snap().resources.available.Get("CPU").ToString(); }
};

TEST_F(NodeJobs, KillWorkerKillsAtOnceAndGivesItsLeaseBack) {
  // A worker that ignores SIGTERM: only a SIGKILL ends it at once.
  ::setenv("AIRT_FAKE_WORKER_MODE", "ignore-sigterm", 1);
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 2}}, .stop_grace = 60 * kj::SECONDS}));
  LeaseReply lease = Lease({{"CPU", 2}});
  ASSERT_EQ(lease.kind, Kind::kGranted) << lease.status.ToString();
  EXPECT_EQ(Cpus(), "0");

  Result<bool> killed = KillWorker(lease.worker.id);
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  EXPECT_TRUE(*killed);
  EXPECT_EQ(Cpus(), "2") << "the lease's resources come back with the answer";
  EXPECT_EQ(Snap().num_leases, 0u);
  ASSERT_TRUE(PumpUntil([&] { return airt::testing::ProcessGone(lease.worker.pid); })) << "SIGKILL, not a grace period";
  ASSERT_TRUE(PumpUntil([&] { return Snap().pool.workers.empty(); }));
  EXPECT_TRUE(Return(lease.lease_id).ok()) << "returning a killed worker's lease is a no-op";
  EXPECT_EQ(Return(lease.lease_id).code(), Code::kNotFound) << "but only once";

  Result<bool> again = KillWorker(lease.worker.id);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again) << "no such worker any more";
  Result<bool> stranger = KillWorker(WorkerId::FromRandom());
  ASSERT_TRUE(stranger.ok());
  EXPECT_FALSE(*stranger);
  Status bad = KillWorker(WorkerId::FromRandom(), 5).status();
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.message().rfind("workerId: ", 0), 0u) << bad.message();

  // The freed CPUs serve the next lease.
  ::unsetenv("AIRT_FAKE_WORKER_MODE");
  LeaseReply next = Lease({{"CPU", 2}});
  EXPECT_EQ(next.kind, Kind::kGranted) << next.status.ToString();
}

TEST_F(NodeJobs, KillWorkerKillsAnIdleWorker) {
  ASSERT_NO_FATAL_FAILURE(StartNode({}));
  LeaseReply lease = Lease({{"CPU", 1}});
  ASSERT_EQ(lease.kind, Kind::kGranted) << lease.status.ToString();
  ASSERT_TRUE(Return(lease.lease_id).ok());
  EXPECT_TRUE(*KillWorker(lease.worker.id));
  ASSERT_TRUE(PumpUntil([&] { return airt::testing::ProcessGone(lease.worker.pid); }));
  EXPECT_EQ(Cpus(), "4");
}

TEST_F(NodeJobs, AFinishedJobsWorkersStopItsLeasesEndAndItsObjectsGo) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 4}}, .stop_grace = 500 * kj::MILLISECONDS}));
  JobId other = JobId::FromRandom();
  LeaseReply leased = Lease({{"CPU", 1}});
  LeaseReply idle = Lease({{"CPU", 1}});
  LeaseReply kept = Lease({{"CPU", 1}}, other);
  for (const LeaseReply* r : {&leased, &idle, &kept}) {
    ASSERT_EQ(r->kind, Kind::kGranted) << r->status.ToString();
  }
  ASSERT_TRUE(Return(idle.lease_id).ok());
  ObjectId put = ObjectId::ForPut(TaskId::ForDriver(job_), 1);
  ObjectId returned = ObjectId::ForReturn(TaskId::Of(ActorId::Of(job_)), 1);
  ObjectId others = ObjectId::ForPut(TaskId::ForDriver(other), 1);
  for (const ObjectId& id : {put, returned, others}) {
    ASSERT_TRUE(store().Put(id, Bytes("value")).ok());
  }

  head_state_->FinishJob(job_);
  ASSERT_TRUE(PumpUntil([&] { return Cleanup().jobs_ended == 1; }));
  EXPECT_TRUE(airt::testing::ProcessGone(leased.worker.pid));
  EXPECT_TRUE(airt::testing::ProcessGone(idle.worker.pid));
  EXPECT_FALSE(airt::testing::ProcessGone(kept.worker.pid)) << "another job's worker stays";
  ASSERT_EQ(Snap().pool.workers.size(), 1u);
  EXPECT_EQ(Snap().pool.workers[0].id, kept.worker.id);
  EXPECT_EQ(Cpus(), "3");
  EXPECT_EQ(Snap().num_leases, 1u);
  EXPECT_TRUE(Return(leased.lease_id).ok()) << "the job's lease ended on the node: a no-op";
  EXPECT_EQ(Cleanup().objects_deleted, 2u);
  EXPECT_FALSE(store().Contains(put));
  EXPECT_FALSE(store().Contains(returned));
  EXPECT_TRUE(store().Contains(others));
  EXPECT_TRUE(WorkerLog(leased.worker.id).find("stopping on SIGTERM") != std::string::npos)
      << WorkerLog(leased.worker.id);

  // The node tells the head how far it has read; the job is not ended twice.
  ASSERT_TRUE(PumpUntil([&] { return head_state_->Heartbeats().back().jobs_seen == 1; }));
  EXPECT_EQ(Session().jobs_seen, 1u);
  EXPECT_EQ(Session().finished_jobs, 1u);
  head_state_->FinishJob(other);
  ASSERT_TRUE(PumpUntil([&] { return Cleanup().jobs_ended == 2; }));
  EXPECT_TRUE(airt::testing::ProcessGone(kept.worker.pid));
  EXPECT_EQ(Cpus(), "4");
  EXPECT_EQ(Cleanup().objects_deleted, 3u);
}

TEST_F(NodeJobs, ADetachedActorsWorkerOutlivesItsJobAndTheJobsObjectsWaitForIt) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 2}}, .stop_grace = 500 * kj::MILLISECONDS}));
  LeaseReply plain = Lease({{"CPU", 1}});
  LeaseReply detached = Lease({{"CPU", 1}}, JobId(), {.detached = true});
  for (const LeaseReply* r : {&plain, &detached}) {
    ASSERT_EQ(r->kind, Kind::kGranted) << r->status.ToString();
  }
  ObjectId put = ObjectId::ForPut(TaskId::ForDriver(job_), 1);
  ASSERT_TRUE(store().Put(put, Bytes("value")).ok());

  head_state_->FinishJob(job_);
  ASSERT_TRUE(PumpUntil([&] { return airt::testing::ProcessGone(plain.worker.pid); }));
  ASSERT_TRUE(PumpUntil([&] { return Snap().pool.workers.size() == 1; }));
  EXPECT_EQ(Snap().pool.workers[0].id, detached.worker.id);
  EXPECT_EQ(Snap().pool.workers[0].state, worker::WorkerSnapshot::State::kLeased);
  EXPECT_FALSE(airt::testing::ProcessGone(detached.worker.pid));
  EXPECT_EQ(Snap().num_leases, 1u);
  EXPECT_EQ(Cpus(), "1") << "the detached lease keeps its CPU";
  EXPECT_EQ(Cleanup().jobs_ending, 1u);
  EXPECT_EQ(Cleanup().jobs_ended, 0u);
  EXPECT_TRUE(store().Contains(put)) << "the detached actor may still read its job's objects";

  // ray.kill of the actor: its worker goes, and with it the job's last trace on this node.
  Result<bool> killed = KillWorker(detached.worker.id);
  ASSERT_TRUE(killed.ok() && *killed);
  ASSERT_TRUE(PumpUntil([&] { return Cleanup().jobs_ended == 1; }));
  EXPECT_TRUE(airt::testing::ProcessGone(detached.worker.pid));
  EXPECT_FALSE(store().Contains(put));
  EXPECT_EQ(Cpus(), "2");
}

TEST_F(NodeJobs, DroppingTheHolderOfAHeldLeaseReturnsItAndStopsItsWorker) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 2}}, .stop_grace = 500 * kj::MILLISECONDS}));
  LeaseReply lease = Lease({{"CPU", 2}});
  ASSERT_EQ(lease.kind, Kind::kGranted) << lease.status.ToString();
  EXPECT_EQ(Cpus(), "0");

  DropHolder(lease.lease_id);  // as when the requester dies holding it
  ASSERT_TRUE(PumpUntil([&] { return Snap().num_leases == 0 && Cpus() == "2"; }));
  ASSERT_TRUE(PumpUntil([&] { return airt::testing::ProcessGone(lease.worker.pid); })) << "its worker is stopped";
  EXPECT_EQ(Return(lease.lease_id).code(), Code::kNotFound) << "returned already";
  // The freed CPUs serve the next request, with a new worker.
  LeaseReply next = Lease({{"CPU", 2}});
  ASSERT_EQ(next.kind, Kind::kGranted) << next.status.ToString();
  EXPECT_NE(next.worker.id, lease.worker.id);
}

TEST_F(NodeJobs, DroppingTheHolderAfterReturningTheLeaseChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 2}}}));
  LeaseReply first = Lease({{"CPU", 1}});
  LeaseReply other = Lease({{"CPU", 1}});
  for (const LeaseReply* r : {&first, &other}) {
    ASSERT_EQ(r->kind, Kind::kGranted) << r->status.ToString();
  }
  ASSERT_TRUE(Return(first.lease_id).ok());
  DropHolder(first.lease_id);
  // Calls after the drop on the same connection see its effect: the idle worker is reused.
  LeaseReply again = Lease({{"CPU", 1}});
  ASSERT_EQ(again.kind, Kind::kGranted) << again.status.ToString();
  EXPECT_EQ(again.worker.id, first.worker.id);
  EXPECT_FALSE(airt::testing::ProcessGone(first.worker.pid));
  EXPECT_EQ(Snap().num_leases, 2u);
  EXPECT_EQ(Cpus(), "0") << "the other lease is untouched";
}

TEST_F(NodeJobs, ADetachedLeaseOutlivesItsDroppedHolder) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 2}}}));
  LeaseReply detached = Lease({{"CPU", 1}}, JobId(), {.placed = true, .detached = true});
  ASSERT_EQ(detached.kind, Kind::kGranted) << detached.status.ToString();
  DropHolder(detached.lease_id);           // its creator exited; a detached actor lives on
  LeaseReply after = Lease({{"CPU", 1}});  // sent after the drop: the node has seen it
  ASSERT_EQ(after.kind, Kind::kGranted) << after.status.ToString();
  EXPECT_EQ(Snap().num_leases, 2u);
  EXPECT_EQ(Cpus(), "0");
  EXPECT_FALSE(airt::testing::ProcessGone(detached.worker.pid));
  EXPECT_TRUE(Return(detached.lease_id).ok()) << "still held, so it can be returned";
}

TEST_F(NodeJobs, AFinishedJobsWaitingRequestsFail) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 1}}}));
  LeaseReply held = Lease({{"CPU", 1}});
  ASSERT_EQ(held.kind, Kind::kGranted) << held.status.ToString();
  kj::Promise<LeaseReply> waiting = Request({{"CPU", 1}});
  ASSERT_TRUE(PumpUntil([&] { return Snap().num_queued == 1; }));
  head_state_->FinishJob(job_);
  LeaseReply failed = Await(waiting);
  EXPECT_EQ(failed.status.code(), Code::kFailedPrecondition) << failed.status.ToString();
  EXPECT_NE(failed.status.message().find("job " + job_.Hex() + " has finished"), std::string::npos);
  ASSERT_TRUE(PumpUntil([&] { return Cleanup().jobs_ended == 1; }));
  EXPECT_EQ(Snap().num_queued, 0u);
  EXPECT_EQ(Cpus(), "1");
}

TEST_F(NodeJobs, ADetachedActorsWaitingRequestOutlivesItsJob) {
  // The head restarts a detached actor of a finished job: its request is not void.
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 1}}}));
  LeaseReply held = Lease({{"CPU", 1}});
  ASSERT_EQ(held.kind, Kind::kGranted) << held.status.ToString();
  kj::Promise<LeaseReply> waiting = Request({{"CPU", 1}}, JobId(), {.detached = true});
  ASSERT_TRUE(PumpUntil([&] { return Snap().num_queued == 1; }));
  head_state_->FinishJob(job_);  // ends the plain lease, which frees the CPU for the other
  LeaseReply granted = Await(waiting);
  ASSERT_EQ(granted.kind, Kind::kGranted) << granted.status.ToString();
  EXPECT_FALSE(airt::testing::ProcessGone(granted.worker.pid));
  EXPECT_EQ(Cpus(), "0") << "the detached lease holds the CPU";
}

TEST_F(NodeJobs, ADetachedActorsWorkerStartingWhenItsJobEndsIsNotStopped) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 1}}}));
  ::setenv("AIRT_FAKE_WORKER_MODE", "slow-register", 1);  // 500 ms: the job ends meanwhile
  kj::Promise<LeaseReply> starting = Request({{"CPU", 1}}, JobId(), {.detached = true});
  ASSERT_TRUE(PumpUntil([&] { return Snap().num_granting == 1; }));
  head_state_->FinishJob(job_);
  ASSERT_TRUE(PumpUntil([&] { return Session().finished_jobs == 1; }));
  LeaseReply granted = Await(starting);
  ::unsetenv("AIRT_FAKE_WORKER_MODE");
  ASSERT_EQ(granted.kind, Kind::kGranted) << granted.status.ToString();
  EXPECT_FALSE(airt::testing::ProcessGone(granted.worker.pid));
  EXPECT_EQ(Cleanup().jobs_ended, 0u) << "the job's objects wait for the detached actor's worker";
}

}  // namespace
}  // namespace airt
