// The node's lease service over the real RPC stack (LeaseFixture): grants with the right GPU ids
// and CUDA_VISIBLE_DEVICES, reuse of idle workers, returns, the queue, cancelling by dropping the
// call, spillback from the head's view, infeasible requests, and the edge's validation. Workers
// are real airt_fake_worker processes.
#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "common/rpc_status.h"
#include "tests/worker/lease_fixture.h"

namespace airt {
namespace {

using namespace std::chrono_literals;
using testing::LeaseReply;
using testing::NodeSetup;
using Kind = LeaseReply::Kind;

constexpr auto kMs = kj::MILLISECONDS;

bool Has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The fixture is named for the unit under test, the node's lease service.
class LeaseService : public testing::LeaseFixture {
 protected:
  // Waits for the worker's log to show its CUDA_VISIBLE_DEVICES line.
  std::string CudaLine(const LeaseReply& reply) {
    std::string line;
    PumpUntil([&] {
      std::string log = WorkerLog(reply.worker.id);
      size_t at = log.find("CUDA_VISIBLE_DEVICES");
      if (at == std::string::npos) return false;
      line = log.substr(at, log.find('\n', at) - at);
      return true;
    });
    return line;
  }
};

TEST_F(LeaseService, GrantsWholeGpusWithTheirIdsAsCudaVisibleDevices) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 8}, {"GPU", 4}}}));
  LeaseReply two = Lease({{"CPU", 1}, {"GPU", 2}});
  ASSERT_EQ(two.kind, Kind::kGranted) << two.status.ToString();
  EXPECT_EQ(two.gpu_ids, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(CudaLine(two), "CUDA_VISIBLE_DEVICES=0,1");
  EXPECT_EQ(two.worker.host, "127.0.0.1");
  EXPECT_NE(two.worker.port, 0);
  // The worker got the node's arguments.
  std::string log = WorkerLog(two.worker.id);
  EXPECT_TRUE(Has(log, "--worker-id=" + two.worker.id.Hex())) << log;
  EXPECT_TRUE(Has(log, "--job-id=" + job_.Hex())) << log;
  EXPECT_TRUE(Has(log, "--node-address=127.0.0.1 --node-port=")) << log;
  EXPECT_TRUE(Has(log, "--store-socket=" + dir_.File("store.sock"))) << log;
  EXPECT_TRUE(Has(log, "--transfer-address=127.0.0.1:9")) << log;
  EXPECT_TRUE(Has(log, "--code-search-path=" + dir_.File("code"))) << log;

  // A CPU lease sees no GPU at all.
  LeaseReply cpu = Lease({{"CPU", 1}});
  ASSERT_EQ(cpu.kind, Kind::kGranted) << cpu.status.ToString();
  EXPECT_TRUE(cpu.gpu_ids.empty());
  EXPECT_EQ(CudaLine(cpu), "CUDA_VISIBLE_DEVICES=");
  EXPECT_EQ(Snap().resources.available.Get("GPU").ToString(), "2");
}

TEST_F(LeaseService, FractionalGpusShareOneIdAndAWholeGpuNeverJoinsThem) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 8}, {"GPU", 4}}}));
  LeaseReply two = Lease({{"GPU", 2}});
  ASSERT_EQ(two.kind, Kind::kGranted) << two.status.ToString();
  LeaseReply half_a = Lease({{"GPU", 0.5}});
  LeaseReply half_b = Lease({{"GPU", 0.5}});
  ASSERT_EQ(half_a.kind, Kind::kGranted) << half_a.status.ToString();
  ASSERT_EQ(half_b.kind, Kind::kGranted) << half_b.status.ToString();
  EXPECT_EQ(half_a.gpu_ids, (std::vector<uint32_t>{2}));
  EXPECT_EQ(half_b.gpu_ids, (std::vector<uint32_t>{2}));
  EXPECT_NE(half_a.worker.id, half_b.worker.id) << "two leases, two workers";
  EXPECT_EQ(CudaLine(half_b), "CUDA_VISIBLE_DEVICES=2");
  LeaseReply whole = Lease({{"GPU", 1}});
  ASSERT_EQ(whole.kind, Kind::kGranted) << whole.status.ToString();
  EXPECT_EQ(whole.gpu_ids, (std::vector<uint32_t>{3})) << "never the shared id 2";
  EXPECT_EQ(CudaLine(whole), "CUDA_VISIBLE_DEVICES=3");
}

TEST_F(LeaseService, ReusesAnIdleWorkerOfTheSameJobAndGpus) {
  ASSERT_NO_FATAL_FAILURE(StartNode({}));
  LeaseReply first = Lease({{"CPU", 1}});
  ASSERT_EQ(first.kind, Kind::kGranted) << first.status.ToString();
  ASSERT_TRUE(Return(first.lease_id).ok());
  LeaseReply again = Lease({{"CPU", 2}});
  ASSERT_EQ(again.kind, Kind::kGranted) << again.status.ToString();
  EXPECT_EQ(again.worker.id, first.worker.id);
  EXPECT_EQ(again.worker.pid, first.worker.pid);
  EXPECT_NE(again.lease_id, first.lease_id);
  ASSERT_TRUE(Return(again.lease_id).ok());
  // Another job gets a worker of its own.
  LeaseReply other = Lease({{"CPU", 1}}, JobId::FromRandom());
  ASSERT_EQ(other.kind, Kind::kGranted) << other.status.ToString();
  EXPECT_NE(other.worker.id, first.worker.id);
  EXPECT_EQ(Snap().pool.started, 2u);
  EXPECT_EQ(Snap().pool.reused, 1u);
}

TEST_F(LeaseService, ReturnFreesTheResourcesAndTheHeartbeatShowsIt) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 2}, {"GPU", 1}}}));
  ASSERT_TRUE(WaitForHeartbeatAvailable("CPU", 2));
  LeaseReply lease = Lease({{"CPU", 2}, {"GPU", 1}});
  ASSERT_EQ(lease.kind, Kind::kGranted) << lease.status.ToString();
  ASSERT_TRUE(WaitForHeartbeatAvailable("CPU", 0));
  EXPECT_EQ(head_state_->Heartbeats().back().available.at("GPU"), 0);
  EXPECT_EQ(head_state_->Heartbeats().back().gpu_ids_in_use, (std::vector<uint32_t>{0}));
  ASSERT_TRUE(Return(lease.lease_id).ok());
  ASSERT_TRUE(WaitForHeartbeatAvailable("CPU", 2));
  EXPECT_EQ(head_state_->Heartbeats().back().available.at("GPU"), 1);
  EXPECT_TRUE(head_state_->Heartbeats().back().gpu_ids_in_use.empty());
  // Returned once: a second return names the lease.
  Status twice = Return(lease.lease_id);
  EXPECT_EQ(twice.code(), Code::kNotFound);
  EXPECT_TRUE(Has(twice.message(), "lease " + std::to_string(lease.lease_id))) << twice.message();
}

TEST_F(LeaseService, QueuedRequestIsGrantedWhenALeaseIsReturned) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 1}}}));
  LeaseReply held = Lease({{"CPU", 1}});
  ASSERT_EQ(held.kind, Kind::kGranted) << held.status.ToString();
  kj::Promise<LeaseReply> queued = Request({{"CPU", 1}});
  ASSERT_TRUE(PumpUntil([&] { return Snap().num_queued == 1; }));
  ASSERT_TRUE(Return(held.lease_id).ok());
  LeaseReply granted = Await(queued);
  ASSERT_EQ(granted.kind, Kind::kGranted) << granted.status.ToString();
  EXPECT_EQ(granted.worker.id, held.worker.id) << "the returned worker, reused";
  EXPECT_EQ(Snap().num_queued, 0u);
}

TEST_F(LeaseService, DroppingTheCallTakesTheRequestOutOfTheQueue) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 1}}}));
  LeaseReply held = Lease({{"CPU", 1}});
  ASSERT_EQ(held.kind, Kind::kGranted) << held.status.ToString();
  {
    kj::Promise<LeaseReply> dropped = Request({{"CPU", 1}});
    ASSERT_TRUE(PumpUntil([&] { return Snap().num_queued == 1; }));
  }  // the client cancels the call
  ASSERT_TRUE(PumpUntil([&] { return Snap().num_queued == 0; }));
  ASSERT_TRUE(Return(held.lease_id).ok());
  // Nothing was granted to the cancelled request: the CPU is free for the next one.
  EXPECT_EQ(Snap().num_leases, 0u);
  EXPECT_EQ(Snap().resources.available.Get("CPU").ToString(), "1");
  LeaseReply next = Lease({{"CPU", 1}});
  ASSERT_EQ(next.kind, Kind::kGranted) << next.status.ToString();
}

TEST_F(LeaseService, DroppingTheCallWhileItsWorkerStartsFreesTheResourcesAndKeepsTheWorker) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 1}}}));
  ::setenv("AIRT_FAKE_WORKER_MODE", "slow-register", 1);
  {
    kj::Promise<LeaseReply> dropped = Request({{"CPU", 1}});
    ASSERT_TRUE(PumpUntil([&] { return Snap().num_granting == 1; }));
    EXPECT_EQ(Snap().resources.available.Get("CPU").ToString(), "0");
  }
  // Freed at once, not when the worker registers.
  ASSERT_TRUE(PumpUntil([&] { return Snap().resources.available.Get("CPU").ToString() == "1"; }));
  ASSERT_EQ(Snap().pool.workers.size(), 1u);
  EXPECT_EQ(Snap().pool.workers[0].state, worker::WorkerSnapshot::State::kStarting);
  // Once registered it waits idle, and the next lease gets it.
  ASSERT_TRUE(PumpUntil([&] {
    auto workers = Snap().pool.workers;
    return workers.size() == 1 && workers[0].state == worker::WorkerSnapshot::State::kIdle;
  }));
  EXPECT_EQ(Snap().num_granting, 0u);
  EXPECT_EQ(Snap().num_leases, 0u);
  LeaseReply next = Lease({{"CPU", 1}});
  ASSERT_EQ(next.kind, Kind::kGranted) << next.status.ToString();
  EXPECT_EQ(Snap().pool.started, 1u);
  EXPECT_EQ(Snap().pool.reused, 1u);
}

TEST_F(LeaseService, SpillsBackToTheNodeTheHeadSaysHasRoom) {
  testing::ViewNode other;
  other.info.id = NodeId::FromRandom();
  other.info.address = "10.1.2.3";
  other.info.node_port = 4567;
  other.info.total = {{"CPU", 4}, {"GPU", 2}};
  other.available = {{"CPU", 3}, {"GPU", 1.5}};
  head_state_->AddViewNode(other);
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 1}}}));
  ASSERT_TRUE(WaitForFreshView());
  LeaseReply local = Lease({{"CPU", 1}});
  ASSERT_EQ(local.kind, Kind::kGranted) << local.status.ToString();
  LeaseReply spilled = Lease({{"CPU", 1}});
  ASSERT_EQ(spilled.kind, Kind::kSpillback) << spilled.status.ToString();
  EXPECT_EQ(spilled.text, "10.1.2.3:4567");
  // A GPU this node lacks, free there (1.5 of 2 GPUs, a fractional amount in the view).
  LeaseReply gpu = Lease({{"GPU", 1}});
  ASSERT_EQ(gpu.kind, Kind::kSpillback) << gpu.status.ToString();
  EXPECT_EQ(gpu.text, "10.1.2.3:4567");
  // When the other node fills up, a request that fits here waits here.
  other.available = {{"GPU", 1.5}};
  head_state_->AddViewNode(other);
  ASSERT_TRUE(WaitForFreshView());
  kj::Promise<LeaseReply> waiting = Request({{"CPU", 1}});
  ASSERT_TRUE(PumpUntil([&] { return Snap().num_queued == 1; }));
  // ... and goes there once the view shows room again.
  other.available = {{"CPU", 1}};
  head_state_->AddViewNode(other);
  LeaseReply later = Await(waiting);
  ASSERT_EQ(later.kind, Kind::kSpillback) << later.status.ToString();
  EXPECT_EQ(later.text, "10.1.2.3:4567");
}

TEST_F(LeaseService, ARequestTheHeadPlacedHereWaitsHereOrIsRefusedAtOnce) {
  testing::ViewNode other;
  other.info.id = NodeId::FromRandom();
  other.info.address = "10.1.2.3";
  other.info.node_port = 4567;
  other.info.total = {{"CPU", 8}};
  other.available = {{"CPU", 8}};
  head_state_->AddViewNode(other);
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 1}}}));
  ASSERT_TRUE(WaitForFreshView());
  LeaseReply held = Lease({{"CPU", 1}});
  ASSERT_EQ(held.kind, Kind::kGranted) << held.status.ToString();
  // The other node has room, but the head chose this one: the request waits here.
  kj::Promise<LeaseReply> placed = Request({{"CPU", 1}}, JobId(), {.placed = true});
  ASSERT_TRUE(PumpUntil([&] { return Snap().num_queued == 1; }));
  ASSERT_TRUE(Return(held.lease_id).ok());
  LeaseReply granted = Await(placed);
  EXPECT_EQ(granted.kind, Kind::kGranted) << granted.status.ToString();
  // A shape this node can never hold is refused at once, not after a grace period.
  LeaseReply refused = Lease({{"CPU", 2}}, JobId(), {.placed = true});
  ASSERT_EQ(refused.kind, Kind::kInfeasible) << refused.status.ToString();
  EXPECT_TRUE(Has(refused.text, "the head placed {CPU: 2} on a node that can never run it"))
      << refused.text;
}

TEST_F(LeaseService, InfeasibleAfterTheGracePeriodNamingTheShapeAndTotals) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 2}}, .infeasible_grace = 300 * kMs}));
  ASSERT_TRUE(WaitForFreshView());
  auto start = std::chrono::steady_clock::now();
  LeaseReply reply = Lease({{"CPU", 64}});
  ASSERT_EQ(reply.kind, Kind::kInfeasible) << reply.status.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms) << "not before the grace period";
  EXPECT_TRUE(Has(reply.text, "{CPU: 64}")) << reply.text;
  EXPECT_TRUE(Has(reply.text, "{CPU: 2}")) << reply.text;
  EXPECT_TRUE(Has(reply.text, node_id_.Hex().substr(0, 8) + " (this node)")) << reply.text;
  EXPECT_EQ(Snap().num_queued, 0u);
}

TEST_F(LeaseService, BadRequestsGetInvalidArgumentNamingTheField) {
  ASSERT_NO_FATAL_FAILURE(StartNode({}));
  auto call = [&](auto fill) {
    auto request = node().requestWorkerLeaseRequest();
    request.setJobId(capnp::Data::Reader(job_.data(), JobId::kSize));
    fill(request);
    return CatchKj([&] { timer().timeoutAfter(10 * kj::SECONDS, request.send()).wait(wait()); });
  };
  Status short_job = call([](auto& r) {
    const uint8_t three[3] = {1, 2, 3};
    r.setJobId(capnp::Data::Reader(three, 3));
  });
  EXPECT_EQ(short_job.code(), Code::kInvalidArgument);
  EXPECT_EQ(short_job.message().rfind("jobId: ", 0), 0u) << short_job.message();

  Status negative = call([](auto& r) {
    auto res = r.initShape().initResources(1);
    res[0].setName("CPU");
    res[0].setAmount(-1);
  });
  EXPECT_EQ(negative.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(negative.message(), "shape: ")) << negative.message();
  EXPECT_TRUE(Has(negative.message(), "negative")) << negative.message();

  Status twice = call([](auto& r) {
    auto res = r.initShape().initResources(2);
    res[0].setName("CPU");
    res[0].setAmount(1);
    res[1].setName("CPU");
    res[1].setAmount(2);
  });
  EXPECT_EQ(twice.code(), Code::kInvalidArgument);
  EXPECT_EQ(twice.message().rfind("shape.resources[1].name: ", 0), 0u) << twice.message();

  Status gpu = call([](auto& r) {
    auto res = r.initShape().initResources(1);
    res[0].setName("GPU");
    res[0].setAmount(1.5);
  });
  EXPECT_EQ(gpu.code(), Code::kInvalidArgument);
  EXPECT_TRUE(Has(gpu.message(), "GPU")) << gpu.message();

  Status language = call([](auto& r) { r.setLanguage(static_cast<proto::Language>(7)); });
  EXPECT_EQ(language.code(), Code::kInvalidArgument);
  EXPECT_EQ(language.message().rfind("language: ", 0), 0u) << language.message();

  Status python = call([](auto& r) { r.setLanguage(proto::Language::PYTHON); });
  EXPECT_EQ(python.code(), Code::kUnimplemented) << python.ToString();

  // registerWorker: a bad id, and an id the node never started.
  auto reg = [&](size_t id_size, uint16_t port) {
    auto request = node().registerWorkerRequest();
    auto worker = request.initWorker();
    WorkerId id = WorkerId::FromRandom();
    worker.setWorkerId(capnp::Data::Reader(id.data(), id_size));
    worker.setHost("127.0.0.1");
    worker.setPort(port);
    worker.setPid(1234);
    return CatchKj([&] { timer().timeoutAfter(10 * kj::SECONDS, request.send()).wait(wait()); });
  };
  Status bad_id = reg(5, 80);
  EXPECT_EQ(bad_id.code(), Code::kInvalidArgument);
  EXPECT_EQ(bad_id.message().rfind("worker.workerId: ", 0), 0u) << bad_id.message();
  Status no_port = reg(WorkerId::kSize, 0);
  EXPECT_EQ(no_port.code(), Code::kInvalidArgument);
  EXPECT_EQ(no_port.message().rfind("worker.port: ", 0), 0u) << no_port.message();
  Status stranger = reg(WorkerId::kSize, 80);
  EXPECT_EQ(stranger.code(), Code::kNotFound) << stranger.ToString();
  // The node still serves.
  EXPECT_EQ(Lease({{"CPU", 1}}).kind, Kind::kGranted);
}

}  // namespace
}  // namespace airt
