// The node's worker processes through its lease service (LeaseFixture): a worker that dies gives
// its lease's resources back, one that never registers or exits at start fails the lease with
// kUnavailable naming its log, idle workers are stopped after the idle timeout, a disconnecting
// return stops the worker, and StopAll escalates to SIGKILL. Workers are real airt_fake_worker
// processes; AIRT_FAKE_WORKER_MODE (inherited by them) picks their misbehaviour.
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "tests/worker/lease_fixture.h"

namespace airt {
namespace {

using testing::LeaseReply;
using testing::NodeSetup;
using Kind = LeaseReply::Kind;

constexpr auto kMs = kj::MILLISECONDS;

bool Has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}


class WorkerPool : public testing::LeaseFixture {};

TEST_F(WorkerPool, AKilledWorkerGivesItsResourcesBack) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 2}, {"GPU", 1}}}));
  LeaseReply lease = Lease({{"CPU", 2}, {"GPU", 1}});
  ASSERT_EQ(lease.kind, Kind::kGranted) << lease.status.ToString();
  ASSERT_EQ(Snap().resources.available.Get("CPU").ToString(), "0");
  ASSERT_EQ(::kill(lease.worker.pid, SIGKILL), 0);
  ASSERT_TRUE(PumpUntil([&] { return Snap().num_leases == 0; }));
  EXPECT_EQ(Snap().resources.available, Snap().resources.total);
  EXPECT_TRUE(Snap().pool.workers.empty());
  EXPECT_TRUE(airt::testing::ProcessGone(lease.worker.pid)) << "reaped by the node";
  EXPECT_EQ(Return(lease.lease_id).code(), Code::kNotFound);
  LeaseReply next = Lease({{"CPU", 2}, {"GPU", 1}});
  ASSERT_EQ(next.kind, Kind::kGranted) << next.status.ToString();
  EXPECT_NE(next.worker.id, lease.worker.id);
}

TEST_F(WorkerPool, AWorkerThatNeverRegistersIsKilledAndTheLeaseFailsUnavailable) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 1}}, .register_timeout = 300 * kMs}));
  ::setenv("AIRT_FAKE_WORKER_MODE", "hang", 1);
  LeaseReply reply = Lease({{"CPU", 1}});
  EXPECT_EQ(reply.status.code(), Code::kUnavailable) << reply.status.ToString();
  EXPECT_TRUE(Has(reply.status.message(), "did not register within 300 ms"))
      << reply.status.message();
  EXPECT_TRUE(Has(reply.status.message(), dir_.path() + "/worker-")) << reply.status.message();
  ASSERT_TRUE(PumpUntil([&] { return Snap().pool.workers.empty(); }));
  EXPECT_EQ(Snap().resources.available.Get("CPU").ToString(), "1");
  ::unsetenv("AIRT_FAKE_WORKER_MODE");
  EXPECT_EQ(Lease({{"CPU", 1}}).kind, Kind::kGranted);
}

TEST_F(WorkerPool, AWorkerThatExitsBeforeRegisteringFailsTheLeaseUnavailable) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 1}}}));
  ::setenv("AIRT_FAKE_WORKER_MODE", "exit", 1);
  LeaseReply reply = Lease({{"CPU", 1}});
  EXPECT_EQ(reply.status.code(), Code::kUnavailable) << reply.status.ToString();
  EXPECT_TRUE(Has(reply.status.message(), "exited with code 3 before it registered"))
      << reply.status.message();
  EXPECT_TRUE(Has(reply.status.message(), "see its logs " + dir_.path() + "/worker-"))
      << reply.status.message();
  EXPECT_EQ(Snap().resources.available.Get("CPU").ToString(), "1");
}

TEST_F(WorkerPool, AnIdleWorkerIsStoppedAfterTheIdleTimeout) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.idle_timeout = 200 * kMs}));
  LeaseReply lease = Lease({{"CPU", 1}});
  ASSERT_EQ(lease.kind, Kind::kGranted) << lease.status.ToString();
  ASSERT_TRUE(Return(lease.lease_id).ok());
  ASSERT_TRUE(PumpUntil([&] { return Snap().pool.workers.empty(); }));
  EXPECT_TRUE(Has(WorkerLog(lease.worker.id), "stopping on SIGTERM"));
  EXPECT_TRUE(airt::testing::ProcessGone(lease.worker.pid));
}

TEST_F(WorkerPool, AReusedWorkerIsNotStoppedByItsEarlierIdleTimeout) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.idle_timeout = 300 * kMs}));
  LeaseReply lease = Lease({{"CPU", 1}});
  ASSERT_EQ(lease.kind, Kind::kGranted) << lease.status.ToString();
  ASSERT_TRUE(Return(lease.lease_id).ok());
  LeaseReply again = Lease({{"CPU", 1}});
  ASSERT_EQ(again.kind, Kind::kGranted) << again.status.ToString();
  ASSERT_EQ(again.worker.id, lease.worker.id);
  // An observation window of twice the idle timeout: the worker must stay up while leased.
  EXPECT_FALSE(PumpUntil([&] { return airt::testing::ProcessGone(lease.worker.pid); }, std::chrono::milliseconds(600)));
  EXPECT_EQ(Snap().pool.workers.size(), 1u);
}

TEST_F(WorkerPool, ReturningWithDisconnectStopsTheWorker) {
  ASSERT_NO_FATAL_FAILURE(StartNode({}));
  LeaseReply lease = Lease({{"CPU", 1}});
  ASSERT_EQ(lease.kind, Kind::kGranted) << lease.status.ToString();
  ASSERT_TRUE(Return(lease.lease_id, /*disconnect_worker=*/true).ok());
  ASSERT_TRUE(PumpUntil([&] { return Snap().pool.workers.empty(); }));
  EXPECT_TRUE(Has(WorkerLog(lease.worker.id), "stopping on SIGTERM"));
  LeaseReply next = Lease({{"CPU", 1}});
  ASSERT_EQ(next.kind, Kind::kGranted) << next.status.ToString();
  EXPECT_NE(next.worker.id, lease.worker.id) << "a new worker, not the stopped one";
}

TEST_F(WorkerPool, StopAllKillsAWorkerThatIgnoresSigterm) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.stop_grace = 300 * kMs}));
  LeaseReply polite = Lease({{"CPU", 1}});
  ASSERT_EQ(polite.kind, Kind::kGranted) << polite.status.ToString();
  ::setenv("AIRT_FAKE_WORKER_MODE", "ignore-sigterm", 1);
  LeaseReply stubborn = Lease({{"CPU", 1}});
  ASSERT_EQ(stubborn.kind, Kind::kGranted) << stubborn.status.ToString();
  ::unsetenv("AIRT_FAKE_WORKER_MODE");
  ASSERT_NE(polite.worker.pid, stubborn.worker.pid);

  auto start = std::chrono::steady_clock::now();
  timer().timeoutAfter(10 * kj::SECONDS, pool().StopAll()).wait(wait());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250));
  EXPECT_TRUE(airt::testing::ProcessGone(polite.worker.pid));
  EXPECT_TRUE(airt::testing::ProcessGone(stubborn.worker.pid));
  EXPECT_TRUE(Has(WorkerLog(polite.worker.id), "stopping on SIGTERM"));
  EXPECT_FALSE(Has(WorkerLog(stubborn.worker.id), "stopping on SIGTERM"));
  EXPECT_EQ(Snap().num_leases, 0u) << "the dead workers' leases end";
  // A stopping pool starts no workers.
  LeaseReply refused = Lease({{"CPU", 1}});
  EXPECT_EQ(refused.status.code(), Code::kUnavailable) << refused.status.ToString();
}

}  // namespace
}  // namespace airt
