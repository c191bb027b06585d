// Worker leases across real processes: an airt-head, airt-node processes that start
// airt_fake_worker processes (--worker-binary), and this test as the submitter talking to the
// nodes over Cap'n Proto RPC. Spillback from a busy node to the other, GPU ids and
// CUDA_VISIBLE_DEVICES, an infeasible shape, SIGTERM stopping every worker, killWorker, and a
// job's workers and objects going when its driver disconnects. Every process is stopped by pid;
// waits have deadlines.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>
#include <kj/async-io.h>
#include <kj/timer.h>

#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"
#include "objectstore/object_store.h"
#include "tests/testing/test_support.h"

namespace airt::e2e {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::ReadFile;
using testing::WaitUntil;

bool Has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

bool Gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

struct Reply {
  Status status;
  std::string kind;  // "granted", "spillback", "infeasible"; "" when the call failed
  uint64_t lease_id = 0;
  WorkerId worker;
  int32_t pid = 0;
  std::vector<uint32_t> gpu_ids;
  std::string text;  // the spillback address or the infeasible message
};

class LeaseProcess : public ::testing::Test {
 protected:
  struct Node {
    std::string log;
    std::unique_ptr<ChildProcess> process;
    NodeId id;
    std::string address;  // "127.0.0.1:<node port>"
    std::string logs;     // its logs/ folder
    std::string store;    // its object store's socket
  };

  LeaseProcess() { ::unsetenv("AIRT_FAKE_WORKER_MODE"); }
  ~LeaseProcess() override { ::unsetenv("AIRT_FAKE_WORKER_MODE"); }

  void TearDown() override {
    if (!HasFailure()) return;
    std::cerr << "---- airt-head ----\n" << ReadFile(head_log_);
    for (const auto& node : nodes_) {
      std::cerr << "---- " << node->log << " ----\n" << ReadFile(node->log);
    }
  }

  // airt-head on a free port, and a client to it on this thread's event loop. Its node timeout is
  // long: nothing here tests a node's death, and a loaded machine delays heartbeats by seconds.
  void StartHead() {
    head_log_ = dir_.File("head.log");
    head_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{AIRT_HEAD_BIN, "--port=0", "--heartbeat-interval-ms=50",
                                 "--node-timeout-ms=30000", "--temp-dir=" + dir_.File("head")},
        head_log_);
    std::string address =
        airt::testing::WaitForLine(head_log_, "head ready ", 30s, head_.get()).value_or("");
    ASSERT_FALSE(address.empty()) << "airt-head exited before it was ready";
    head_address_ = address;
    size_t colon = address.rfind(':');
    head_client_ = std::make_unique<capnp::EzRpcClient>(
        address.substr(0, colon), static_cast<uint>(std::stoul(address.substr(colon + 1))));
  }

  // airt-node against the head with `worker` as its worker binary ("": the node's default);
  // waits for it to be ready and learns its node port and folder from the head.
  Node* StartNode(std::vector<std::string> flags, std::string worker = AIRT_FAKE_WORKER_BIN) {
    std::vector<std::string> argv = {AIRT_NODE_BIN,
                                     "--head-address=" + head_address_,
                                     "--temp-dir=" + dir_.File("airt"),
                                     "--object-store-memory=16M",
                                     "--memory=1G",
                                     "--cluster-view-interval-ms=50",
                                     "--head-retry-max-ms=200"};
    if (!worker.empty()) argv.push_back("--worker-binary=" + worker);
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto node = std::make_unique<Node>();
    node->log = dir_.File("node-" + std::to_string(nodes_.size()) + ".log");
    node->process = std::make_unique<ChildProcess>(argv, node->log);
    Node* n = node.get();
    nodes_.push_back(std::move(node));
    std::string hex =
        airt::testing::WaitForLine(n->log, "node ready ", 30s, n->process.get()).value_or("");
    auto id = NodeId::FromHex(hex);
    EXPECT_TRUE(id.ok()) << "no ready line";
    if (!id.ok()) return n;
    n->id = *id;
    auto view = head().clusterViewRequest().send().wait(wait());
    for (auto status : view.getNodes()) {
      auto info = status.getInfo();
      auto bytes = info.getNodeId();
      if (NodeId::FromRaw(bytes.begin()) != n->id) continue;
      n->address = std::string(info.getAddress().cStr()) + ":" + std::to_string(info.getNodePort());
      n->logs = std::string(info.getTempDir().cStr()) + "/logs";
      n->store = info.getStoreSocket().cStr();
    }
    EXPECT_FALSE(n->address.empty()) << "the head does not list node " << hex;
    return n;
  }

  proto::Head::Client head() { return head_client_->getMain<proto::Head>(); }
  kj::WaitScope& wait() { return head_client_->getWaitScope(); }
  kj::Timer& timer() { return head_client_->getIoProvider().getTimer(); }

  // A client of the node at "host:port", kept for the test.
  proto::Node::Client NodeAt(const std::string& address) {
    auto& client = clients_[address];
    if (client == nullptr) client = std::make_unique<capnp::EzRpcClient>(address);
    return client->getMain<proto::Node>();
  }

  Reply Lease(const std::string& node_address, const std::map<std::string, double>& shape) {
    auto request = NodeAt(node_address).requestWorkerLeaseRequest();
    auto resources = request.initShape().initResources(shape.size());
    size_t i = 0;
    for (const auto& [name, amount] : shape) {
      resources[i].setName(name);
      resources[i++].setAmount(amount);
    }
    request.setJobId(capnp::Data::Reader(job_.data(), JobId::kSize));
    Reply out;
    out.status = CatchKj([&] {
      auto response = timer().timeoutAfter(30 * kj::SECONDS, request.send()).wait(wait());
      auto reply = response.getReply();
      if (reply.isGranted()) {
        out.kind = "granted";
        auto granted = reply.getGranted();
        out.lease_id = granted.getLeaseId();
        out.worker = WorkerId::FromRaw(granted.getWorker().getWorkerId().begin());
        out.pid = granted.getWorker().getPid();
        holders_.push_back(response.getHolder());  // held for the test, as a submitter does
        for (uint32_t gpu : granted.getGpuIds()) out.gpu_ids.push_back(gpu);
      } else if (reply.isSpillback()) {
        out.kind = "spillback";
        out.text = reply.getSpillback();
      } else {
        out.kind = "infeasible";
        out.text = reply.getInfeasible();
      }
    });
    return out;
  }

  // killWorker's answer, or the call's error.
  Result<bool> KillWorker(const std::string& node_address, const WorkerId& worker) {
    auto request = NodeAt(node_address).killWorkerRequest();
    request.setWorkerId(capnp::Data::Reader(worker.data(), WorkerId::kSize));
    bool killed = false;
    Status s = CatchKj([&] {
      killed = timer().timeoutAfter(10 * kj::SECONDS, request.send()).wait(wait()).getKilled();
    });
    if (!s.ok()) return s;
    return killed;
  }

  Status Return(const std::string& node_address, uint64_t lease_id) {
    auto request = NodeAt(node_address).returnWorkerLeaseRequest();
    request.setLeaseId(lease_id);
    return CatchKj([&] { timer().timeoutAfter(10 * kj::SECONDS, request.send()).wait(wait()); });
  }

  std::string WorkerLogPath(const Node& node, const WorkerId& worker) const {
    return node.logs + "/worker-" + worker.Hex().substr(0, 12) + ".log";
  }
  bool WaitForWorkerLog(const Node& node, const WorkerId& worker, const std::string& text) {
    return WaitUntil([&] { return Has(ReadFile(WorkerLogPath(node, worker)), text); }, 20s);
  }

  testing::TempDir dir_;
  JobId job_ = JobId::FromRandom();
  std::string head_log_;
  std::string head_address_;
  std::unique_ptr<ChildProcess> head_;
  std::vector<std::unique_ptr<Node>> nodes_;
  // The clients go before the head's, which keeps this thread's EzRpc loop.
  std::unique_ptr<capnp::EzRpcClient> head_client_;
  std::map<std::string, std::unique_ptr<capnp::EzRpcClient>> clients_;
  std::vector<proto::LeaseHolder::Client> holders_;  // of every grant; before clients_ go
};

TEST_F(LeaseProcess, SpillsBackFromABusyNodeToTheOther) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* busy = StartNode({"--num-cpus=1"});
  Node* other = StartNode({"--num-cpus=2"});
  ASSERT_FALSE(HasFailure());

  Reply local = Lease(busy->address, {{"CPU", 1}});
  ASSERT_EQ(local.kind, "granted") << local.status.ToString();
  EXPECT_TRUE(WaitForWorkerLog(*busy, local.worker, "registered"));

  Reply spilled = Lease(busy->address, {{"CPU", 1}});
  ASSERT_EQ(spilled.kind, "spillback") << spilled.status.ToString() << spilled.text;
  EXPECT_EQ(spilled.text, other->address);

  Reply there = Lease(spilled.text, {{"CPU", 1}});
  ASSERT_EQ(there.kind, "granted") << there.status.ToString() << there.text;
  EXPECT_TRUE(WaitForWorkerLog(*other, there.worker, "registered"))
      << "the worker runs on the other node, its log in that node's folder";
  EXPECT_NE(there.pid, local.pid);
}

TEST_F(LeaseProcess, GrantsGpuIdsAndSetsCudaVisibleDevices) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* node = StartNode({"--num-cpus=4", "--num-gpus=4"});
  ASSERT_FALSE(HasFailure());
  Reply two = Lease(node->address, {{"GPU", 2}});
  ASSERT_EQ(two.kind, "granted") << two.status.ToString();
  EXPECT_EQ(two.gpu_ids, (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(WaitForWorkerLog(*node, two.worker, "CUDA_VISIBLE_DEVICES=0,1\n"));
  Reply half = Lease(node->address, {{"GPU", 0.5}});
  ASSERT_EQ(half.kind, "granted") << half.status.ToString();
  EXPECT_EQ(half.gpu_ids, (std::vector<uint32_t>{2}));
  Reply whole = Lease(node->address, {{"GPU", 1}});
  ASSERT_EQ(whole.kind, "granted") << whole.status.ToString();
  EXPECT_EQ(whole.gpu_ids, (std::vector<uint32_t>{3}));
  EXPECT_TRUE(WaitForWorkerLog(*node, whole.worker, "CUDA_VISIBLE_DEVICES=3\n"));
  Reply cpu = Lease(node->address, {{"CPU", 1}});
  ASSERT_EQ(cpu.kind, "granted") << cpu.status.ToString();
  EXPECT_TRUE(WaitForWorkerLog(*node, cpu.worker, "CUDA_VISIBLE_DEVICES=\n"));
}

TEST_F(LeaseProcess, InfeasibleShapeNamesItAndEveryNodesTotals) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* a = StartNode({"--num-cpus=1", "--infeasible-grace-ms=300"});
  StartNode({"--num-cpus=2"});
  ASSERT_FALSE(HasFailure());
  Reply reply = Lease(a->address, {{"GPU", 1}});
  ASSERT_EQ(reply.kind, "infeasible") << reply.status.ToString();
  EXPECT_TRUE(Has(reply.text, "{GPU: 1}")) << reply.text;
  EXPECT_TRUE(Has(reply.text, "(this node) has {CPU: 1")) << reply.text;
  EXPECT_TRUE(Has(reply.text, "has {CPU: 2")) << reply.text;
}

TEST_F(LeaseProcess, SigtermStopsEveryWorkerBeforeTheNodeExits) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* node = StartNode({"--num-cpus=3"});
  ASSERT_FALSE(HasFailure());
  std::vector<Reply> leases;
  for (int i = 0; i < 3; ++i) {
    leases.push_back(Lease(node->address, {{"CPU", 1}}));
    ASSERT_EQ(leases.back().kind, "granted") << leases.back().status.ToString();
  }
  ASSERT_TRUE(Return(node->address, leases[0].lease_id).ok());  // one idle, two leased
  for (const Reply& r : leases) EXPECT_FALSE(Gone(r.pid));

  node->process->Kill(SIGTERM);
  EXPECT_EQ(node->process->Wait(20s), 0);
  for (const Reply& r : leases) {
    EXPECT_TRUE(Gone(r.pid)) << "worker pid " << r.pid << " outlived its node";
    EXPECT_TRUE(Has(ReadFile(WorkerLogPath(*node, r.worker)), "stopping on SIGTERM"));
  }
  EXPECT_TRUE(Has(ReadFile(node->log), "all 3 workers stopped"));
}

TEST_F(LeaseProcess, SigtermKillsAWorkerThatIgnoresIt) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  ::setenv("AIRT_FAKE_WORKER_MODE", "ignore-sigterm", 1);  // the node's workers inherit it
  Node* node = StartNode({"--num-cpus=1", "--worker-stop-grace-ms=300"});
  ASSERT_FALSE(HasFailure());
  Reply lease = Lease(node->address, {{"CPU", 1}});
  ASSERT_EQ(lease.kind, "granted") << lease.status.ToString();
  node->process->Kill(SIGTERM);
  EXPECT_EQ(node->process->Wait(20s), 0);
  EXPECT_TRUE(Gone(lease.pid));
  EXPECT_TRUE(Has(ReadFile(node->log), "sending SIGKILL"));
}

TEST_F(LeaseProcess, KillWorkerKillsAtOnceAndTheLeaseIsGone) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  ::setenv("AIRT_FAKE_WORKER_MODE", "ignore-sigterm", 1);  // only SIGKILL ends it
  Node* node = StartNode({"--num-cpus=1", "--worker-stop-grace-ms=60000"});
  ASSERT_FALSE(HasFailure());
  Reply lease = Lease(node->address, {{"CPU", 1}});
  ASSERT_EQ(lease.kind, "granted") << lease.status.ToString();
  Result<bool> killed = KillWorker(node->address, lease.worker);
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  EXPECT_TRUE(*killed);
  EXPECT_TRUE(WaitUntil([&] { return Gone(lease.pid); }, 20s)) << "killed and reaped";
  EXPECT_TRUE(Return(node->address, lease.lease_id).ok()) << "its lease's return is a no-op";
  EXPECT_FALSE(*KillWorker(node->address, lease.worker));
  // Its CPU is free again: the next lease is granted here.
  Reply next = Lease(node->address, {{"CPU", 1}});
  EXPECT_EQ(next.kind, "granted") << next.status.ToString();
}

// A driver process (airt_job_driver_tool) registers its job and holds the job's lease; when it is
// killed, its connection closes, the head finishes the job, and the node stops the job's workers,
// idle or leased, and deletes its objects.
TEST_F(LeaseProcess, AJobsWorkersAndObjectsGoWhenItsDriverIsKilled) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* node = StartNode({"--num-cpus=3", "--worker-stop-grace-ms=500"});
  ASSERT_FALSE(HasFailure());
  std::string driver_log = dir_.File("driver.log");
  ChildProcess driver({AIRT_JOB_DRIVER_TOOL_BIN, head_address_}, driver_log);
  auto job = JobId::FromHex(
      airt::testing::WaitForLine(driver_log, "job ", 30s, &driver).value_or("no job line"));
  ASSERT_TRUE(job.ok()) << ReadFile(driver_log);
  job_ = *job;
  Reply leased = Lease(node->address, {{"CPU", 1}});
  Reply idle = Lease(node->address, {{"CPU", 1}});
  ASSERT_EQ(leased.kind, "granted") << leased.status.ToString();
  ASSERT_EQ(idle.kind, "granted") << idle.status.ToString();
  ASSERT_TRUE(Return(node->address, idle.lease_id).ok());
  auto store = objectstore::StoreClient::Connect(node->store);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ObjectId object = ObjectId::ForPut(TaskId::ForDriver(job_), 1);
  const uint8_t bytes[] = {1, 2, 3};
  ASSERT_TRUE((*store)->Put(object, bytes).ok());
  EXPECT_FALSE(Gone(leased.pid));

  driver.Kill(SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return Gone(leased.pid) && Gone(idle.pid); }, 20s))
      << "the finished job's workers outlived it";
  EXPECT_TRUE(WaitUntil([&] { return !(*store)->Contains(object); }, 20s))
      << "the finished job's object is still in the store";
  EXPECT_TRUE(Return(node->address, leased.lease_id).ok()) << "its lease ended with the job";
  EXPECT_TRUE(WaitUntil(
      [&] { return Has(ReadFile(node->log), "job " + job_.Hex() + " ended on this node"); }, 20s));
  EXPECT_TRUE(Has(ReadFile(WorkerLogPath(*node, leased.worker)), "stopping on SIGTERM"));
}

#ifdef AIRT_WORKER_BIN
// Without --worker-binary the node runs the airt-worker of its own build (build/api/ beside
// build/worker/), which registers with it, and stops it when the lease comes back disconnected.
TEST_F(LeaseProcess, RunsTheAirtWorkerOfItsBuildByDefault) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* node = StartNode({"--num-cpus=1"}, "");
  ASSERT_FALSE(HasFailure());
  Reply lease = Lease(node->address, {{"CPU", 1}});
  ASSERT_EQ(lease.kind, "granted") << lease.status.ToString();
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/" + std::to_string(lease.pid) + "/exe", ec);
  EXPECT_EQ(exe, std::filesystem::canonical(AIRT_WORKER_BIN)) << ec.message();
  auto request = NodeAt(node->address).returnWorkerLeaseRequest();
  request.setLeaseId(lease.lease_id);
  request.setDisconnectWorker(true);
  request.send().wait(wait());
  EXPECT_TRUE(WaitUntil([&] { return Gone(lease.pid); }, 20s)) << "stopped and reaped";
}
#endif

}  // namespace
}  // namespace airt::e2e
