// A head killed with kill -9 and started again on the same address, with its tables in a real
// redis-server (started by each test on a free loopback port, without persistence, stopped by
// pid), while a driver (this test) and airt-node processes run (docs/fault_tolerance.md "A head
// that restarts"):
// - tasks running at the kill finish and every result arrives; while the head is down the driver
//   runs more tasks on the leases it holds (the head is not on an ordinary task's path) and gets
//   their results; after the restart new work (a new lease, an actor the head places) is
//   accepted, the driver's own calls to the head (KV, cluster view) reach the new head, the KV
//   written before the kill is read back, the driver's job is still listed alive, and the
//   driver's exit finishes it;
// - a node drained before the kill is still draining after it (reason and deadline kept), takes
//   no new lease, and, once its last lease ends, leaves, named by the restarted head as drained.
// Skipped where redis-server is not installed.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>

#include "airt/api.h"
#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "tests/e2e/actor_functions.h"
#include "tests/e2e/multinode_cluster.h"
#include "tests/testing/redis_server.h"

int NodePid();
std::vector<int64_t> NumberedSleep(std::string dir, int i, int ms);
int HoldUntilReleased(std::string dir);

namespace airt {
namespace {

using namespace std::chrono_literals;
constexpr int64_t kLong = 120'000;

using testing::Accepts;
using testing::FreePort;

// One node as the head's clusterView shows it.
struct NodeRow {
  std::string id;  // hex
  bool alive = false;
  bool draining = false;
  std::string drain_reason;
  uint64_t drain_deadline_ms = 0;
  std::string death_cause;
  uint32_t num_leases = 0;  // as its last heartbeat to this head said
  bool has_b_only = false;  // it declares the resource "b_only"
};

std::vector<NodeRow> View(const std::string& head) {
  capnp::EzRpcClient client(head);
  auto reply =
      client.getMain<proto::Head>().clusterViewRequest().send().wait(client.getWaitScope());
  std::vector<NodeRow> rows;
  for (auto n : reply.getNodes()) {
    NodeRow row;
    row.id = NodeId::FromRaw(n.getInfo().getNodeId().begin()).Hex();
    row.alive = n.getAlive();
    row.draining = n.getDraining();
    row.drain_reason = n.getDrainReason().cStr();
    row.drain_deadline_ms = n.getDrainDeadlineMs();
    row.death_cause = n.getDeathCause().cStr();
    row.num_leases = n.getNumLeases();
    for (auto r : n.getInfo().getTotal()) row.has_b_only |= r.getName() == "b_only";
    rows.push_back(row);
  }
  return rows;
}

NodeRow NodeB(const std::string& head) {
  for (const NodeRow& row : View(head)) {
    if (row.has_b_only) return row;
  }
  return {};
}

// The jobs of the driver with pid `pid`: {job id hex, alive}.
std::vector<std::pair<std::string, bool>> JobsOf(const std::string& head, int pid) {
  capnp::EzRpcClient client(head);
  auto reply = client.getMain<proto::Head>().listJobsRequest().send().wait(client.getWaitScope());
  std::vector<std::pair<std::string, bool>> jobs;
  for (auto j : reply.getJobs()) {
    if (j.getDriverPid() != pid || j.getJobId().size() != JobId::kSize) continue;
    jobs.emplace_back(JobId::FromRaw(j.getJobId().begin()).Hex(), j.getAlive());
  }
  return jobs;
}

size_t Started(const std::string& dir) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    n += entry.path().filename().string().rfind("started-", 0) == 0 ? 1 : 0;
  }
  return n;
}

class HeadRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string redis_server = testing::RedisServerBinary();
    if (redis_server.empty()) GTEST_SKIP() << "skipped: redis-server not installed";
    uint16_t port = FreePort();
    redis_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{redis_server, "--port", std::to_string(port), "--bind",
                                 "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
                                 dir_.path()},
        dir_.File("redis.log"));
    ASSERT_TRUE(testing::WaitUntil([&] { return Accepts(port) || !redis_->Running(); }, 10s));
    ASSERT_TRUE(redis_->Running()) << testing::ReadFile(dir_.File("redis.log"));
    // The nodes are not declared dead while the head is away (a long grace).
    cluster_ = std::make_unique<e2e::MultiNodeCluster>(
        std::vector<std::string>{"--object-store-memory=64M", "--cluster-view-interval-ms=100"},
        std::vector<std::string>{"--redis-address=127.0.0.1:" + std::to_string(port),
                                 "--redis-key-prefix=restart:", "--heartbeat-interval-ms=200",
                                 "--node-timeout-ms=20000", "--node-disconnect-grace-ms=20000"});
  }
  // The nodes and the head, then redis-server, each by pid.
  void TearDown() override {
    cluster_.reset();
    redis_.reset();
  }

  uint16_t HeadPort() const {
    const std::string& a = cluster_->address();
    return static_cast<uint16_t>(std::stoul(a.substr(a.rfind(':') + 1)));
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::ChildProcess> redis_;
  std::unique_ptr<e2e::MultiNodeCluster> cluster_;
};

TEST_F(HeadRestart, TasksRunningAtTheKillFinishAndWorkGoesOnWhileTheHeadIsDown) {
  ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("a", {"--num-cpus=4"}));
  cluster_->Init();
  std::string markers = dir_.File("markers");
  std::filesystem::create_directories(markers);
  std::vector<std::pair<std::string, bool>> jobs = JobsOf(cluster_->address(), ::getpid());
  ASSERT_EQ(jobs.size(), 1u);
  ASSERT_TRUE(jobs[0].second);
  ASSERT_TRUE(internal::KvPut("restart", "key", "before the kill", /*overwrite=*/true));

  // 20 tasks of 1-2 s; the leases that run them take several each, pipelined.
  constexpr int kTasks = 20;
  std::vector<ObjectRef<std::vector<int64_t>>> running;
  for (int i = 0; i < kTasks; ++i) {
    running.push_back(Task(NumberedSleep).Remote(markers, i, 1000 + 50 * i));
  }
  ASSERT_TRUE(testing::WaitUntil([&] { return Started(markers) > 0; }, 60s));

  // While the head is down: more tasks of the same shape go to the busy leases the driver holds,
  // and their results come back before the head is started again.
  constexpr int kWhileDown = 4;
  std::vector<std::vector<int64_t>> down_results;
  bool head_was_down = false;
  ASSERT_NO_FATAL_FAILURE(cluster_->RestartHead([&] {
    std::vector<ObjectRef<std::vector<int64_t>>> refs;
    for (int i = 0; i < kWhileDown; ++i) {
      refs.push_back(Task(NumberedSleep).Remote(markers, 100 + i, 100));
    }
    for (auto& ref : refs) down_results.push_back(*Get(ref, kLong));
    head_was_down = !Accepts(HeadPort());
  }));
  EXPECT_TRUE(head_was_down) << "the head was not down while those tasks ran";

  // Every task running at the kill finished, each with its own result.
  std::set<int64_t> workers;
  for (int i = 0; i < kTasks; ++i) {
    std::vector<int64_t> result = *Get(running[i], kLong);
    ASSERT_EQ(result.size(), 2u);
    EXPECT_EQ(result[0], i);
    workers.insert(result[1]);
  }
  ASSERT_EQ(down_results.size(), static_cast<size_t>(kWhileDown));
  for (int i = 0; i < kWhileDown; ++i) {
    EXPECT_EQ(down_results[i][0], 100 + i);
    EXPECT_EQ(workers.count(down_results[i][1]), 1u)
        << "task " << 100 + i << " ran on worker " << down_results[i][1]
        << ", not on one leased before the kill";
  }

  // New work after the restart: a task of another shape (a lease of its own) and an actor, which
  // the restarted head registers and places.
  EXPECT_EQ(*Get(Task(NodePid).SetResource("CPU", 0.5).Remote(), kLong), cluster_->node("a").pid());
  ActorHandle<Counter> actor = Actor(Counter::Create).Remote(40);
  EXPECT_EQ(*Get(actor.Task(&Counter::Add).Remote(2), kLong), 42);
  // The driver's own calls to the head go to the new one: the KV it wrote before the kill is read
  // back from Redis, and the head's view lists the node alive.
  EXPECT_EQ(internal::KvGet("restart", "key"), std::optional<std::string>("before the kill"));
  std::vector<internal::NodeInfo> nodes = internal::ClusterNodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_TRUE(nodes[0].alive);

  // The job table is intact: the driver's job is the same one and still alive.
  EXPECT_EQ(JobsOf(cluster_->address(), ::getpid()), jobs);
  // The driver, which reconnected to the new head, finishes its job as it leaves.
  Shutdown();
  std::vector<std::pair<std::string, bool>> after = JobsOf(cluster_->address(), ::getpid());
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].first, jobs[0].first);
  EXPECT_FALSE(after[0].second) << "the job is still listed alive after its driver's Shutdown";
}

TEST_F(HeadRestart, ADrainedNodeIsStillDrainingAfterTheHeadIsKilled) {
  ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("a", {"--num-cpus=2"}));
  ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("b", {"--num-cpus=2", "--resources={\"b_only\": 1}"}));
  cluster_->Init();
  int a_pid = cluster_->node("a").pid(), b_pid = cluster_->node("b").pid();
  NodeRow b = NodeB(cluster_->address());
  ASSERT_FALSE(b.id.empty());
  ASSERT_FALSE(b.draining);

  // A lease on b held by a task that runs until released: b keeps draining until it ends.
  std::string folder = dir_.File("hold");
  std::filesystem::create_directories(folder);
  ObjectRef<int> held = Task(HoldUntilReleased).SetResource("b_only", 1).Remote(folder);
  ASSERT_TRUE(testing::WaitUntil([&] { return std::filesystem::exists(folder + "/held"); }, 60s));
  // Asked for b (soft affinity): there while b takes work. (Another shape than the later tasks,
  // so that they do not reuse its lease.)
  NodeAffinitySchedulingStrategy prefer_b{b.id, /*soft=*/true};
  EXPECT_EQ(
      *Get(Task(NodePid).SetResource("CPU", 0.5).SetSchedulingStrategy(prefer_b).Remote(), kLong),
      b_pid);

  uint64_t deadline = 0;
  {
    capnp::EzRpcClient client(cluster_->address());
    auto request = client.getMain<proto::Head>().drainNodeRequest();
    NodeId id = *NodeId::FromHex(b.id);
    request.setNodeId(capnp::Data::Reader(id.data(), NodeId::kSize));
    request.setReason("maintenance window");
    request.setTimeoutMs(600'000);
    deadline = request.send().wait(client.getWaitScope()).getDeadlineMs();
  }
  ASSERT_GT(deadline, 0u);
  ASSERT_TRUE(NodeB(cluster_->address()).draining);

  ASSERT_NO_FATAL_FAILURE(cluster_->RestartHead());

  // The restarted head shows b alive and draining, with its reason and deadline, once b has
  // registered again and reported its lease in a heartbeat.
  NodeRow after;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        after = NodeB(cluster_->address());
        return after.alive && after.num_leases > 0;
      },
      60s))
      << testing::ReadFile(cluster_->Dir() + "/head-2.log");
  EXPECT_TRUE(after.draining);
  EXPECT_EQ(after.drain_reason, "maintenance window");
  EXPECT_EQ(after.drain_deadline_ms, deadline);

  // b takes no new lease: tasks asked for it run on a.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(*Get(Task(NodePid).SetSchedulingStrategy(prefer_b).Remote(), kLong), a_pid);
  }

  // Its last lease ends: b leaves, and the restarted head names its drain as the cause.
  std::ofstream(folder + "/release") << 1;
  EXPECT_EQ(*Get(held, kLong), b_pid);
  EXPECT_EQ(cluster_->node("b").Wait(60s), 0) << cluster_->Log("b");
  NodeRow gone;
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        gone = NodeB(cluster_->address());
        return !gone.alive;
      },
      60s));
  EXPECT_EQ(gone.death_cause, "it was drained (maintenance window) and left the cluster");
}

}  // namespace
}  // namespace airt
