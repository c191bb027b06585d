// Placement groups through a head restart: the head keeps its tables in a real redis-server (started
// by the test on a free loopback port, without persistence, stopped by pid) and is killed with
// SIGKILL while two nodes hold a group's bundles and an actor runs in one. The restarted head
// reads the group back CREATED where it was, and each node, registering again, reports the
// bundles it holds: those of the group stay (the actor in them lives on), and the bundle of a
// group whose row is gone from Redis is released on its node. Skipped where redis-server is not
// installed.
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/actor_functions.h"
#include "tests/e2e/multinode_cluster.h"
#include "tests/testing/redis_server.h"

int NodePid();
int SleepMs(int ms);

namespace airt {
namespace {

using namespace std::chrono_literals;
constexpr int64_t kLong = 60'000;
constexpr const char* kPrefix = "pgtest:";

using testing::Accepts;
using testing::FreePort;

// What `command` prints.
std::string Output(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[256];
  while (::fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  ::pclose(pipe);
  return out;
}

std::vector<int> BundlePids(const PlacementGroup& group, int bundles) {
  std::vector<ObjectRef<int>> refs;
  for (int i = 0; i < bundles; ++i) {
    refs.push_back(Task(NodePid).SetResource("CPU", 1).SetPlacementGroup(group, i).Remote());
  }
  std::vector<int> pids;
  for (auto& ref : refs) pids.push_back(*Get(ref, kLong));
  return pids;
}

PlacementGroup Detached(const std::string& name, std::vector<std::map<std::string, double>> bundles) {
  PlacementGroupCreationOptions options;
  options.name = name;
  options.strategy = PlacementStrategy::PACK;
  options.bundles = std::move(bundles);
  options.detached = true;
  return CreatePlacementGroup(options);
}

// Each test's redis-server: without persistence, on a free port in its own folder, stopped by pid
// when the test ends. The test is skipped where redis-server (or redis-cli) is not installed.
class RedisBacked : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_cli_ = testing::BinaryOnPath("redis-cli");
    std::string binary = testing::RedisServerBinary();
    if (binary.empty() || redis_cli_.empty()) GTEST_SKIP() << "skipped: redis not installed";
    redis_port_ = FreePort();
    redis_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{binary, "--port", std::to_string(redis_port_), "--bind",
                                 "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
                                 dir_.path()},
        dir_.File("redis.log"));
    ASSERT_TRUE(testing::WaitUntil([&] { return Accepts(redis_port_) || !redis_->Running(); },
                                   10s));
    ASSERT_TRUE(redis_->Running()) << testing::ReadFile(dir_.File("redis.log"));
  }

  testing::TempDir dir_;
  std::string redis_cli_;
  uint16_t redis_port_ = 0;
  std::unique_ptr<testing::ChildProcess> redis_;
};
class PlacementGroupHeadRestart : public RedisBacked {};
class DriverHeadRestart : public RedisBacked {};

std::vector<std::string> HeadFlags(uint16_t redis_port) {
  return {"--redis-address=127.0.0.1:" + std::to_string(redis_port),
          std::string("--redis-key-prefix=") + kPrefix, "--heartbeat-interval-ms=200",
          "--node-timeout-ms=20000", "--node-disconnect-grace-ms=20000"};
}

TEST_F(PlacementGroupHeadRestart, ReservationsAreReconciledWithTheNodesAfterAKill) {
  e2e::MultiNodeCluster cluster({"--num-cpus=2", "--object-store-memory=64M"},
                                HeadFlags(redis_port_));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("a", {"--resources={\"a_only\": 1}"}));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("b", {"--resources={\"b_only\": 1}"}));
  cluster.Init();

  // `kept`: a bundle on a, one on b. `gone`: b's last CPU.
  PlacementGroup kept = Detached("kept", {{{"CPU", 1}, {"a_only", 0.1}},
                                          {{"CPU", 1}, {"b_only", 0.1}}});
  ASSERT_TRUE(kept.Wait(60));
  PlacementGroup gone = Detached("gone", {{{"CPU", 1}, {"b_only", 0.5}}});
  ASSERT_TRUE(gone.Wait(60));
  std::vector<int> pids = BundlePids(kept, 2);
  EXPECT_EQ(pids[0], cluster.node("a").pid());
  EXPECT_EQ(pids[1], cluster.node("b").pid());
  ActorHandle<Counter> actor = Actor(Counter::Create).SetPlacementGroup(kept, 0).Remote(7);
  ASSERT_EQ(*Get(actor.Task(&Counter::Add).Remote(1), kLong), 8);

  // While the head is down, `gone`'s row leaves Redis: the restarted head does not know it.
  std::string deleted;
  ASSERT_NO_FATAL_FAILURE(cluster.RestartHead([&] {
    deleted = Output(redis_cli_ + " -p " + std::to_string(redis_port_) + " DEL " + kPrefix + "pg:" +
                     gone.ID());
  }));
  EXPECT_EQ(deleted, "1\n");

  // b gives `gone`'s bundle back once it registered again: a task needing its CPU and b_only runs.
  EXPECT_EQ(*Get(Task(SleepMs).SetResource("CPU", 1).SetResource("b_only", 0.5).Remote(1), kLong),
            1);
  // `kept` stayed where it was: its bundles were not prepared again (which would have stopped the
  // actor's worker), and its tasks run on the same nodes.
  EXPECT_EQ(*Get(actor.Task(&Counter::Add).Remote(1), kLong), 9);
  EXPECT_EQ(*Get(actor.Task(&Counter::NodePid).Remote(), kLong), pids[0]);
  EXPECT_EQ(*Get(Task(NodePid).SetResource("CPU", 1).SetPlacementGroup(kept, 1).Remote(), kLong),
            pids[1]);
}

// The driver's actors reach the restarted head over a new connection: one created before the kill
// is still called, one created after it is registered, named and found, and the first's state
// written while the head was down (it was just constructed) is not taken for a kill.
TEST_F(DriverHeadRestart, ActorsAreCreatedAndFoundByNameAfterTheHeadRestarted) {
  e2e::MultiNodeCluster cluster({"--num-cpus=2", "--object-store-memory=64M"},
                                HeadFlags(redis_port_));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("a", {}));
  cluster.Init();

  ActorHandle<Counter> before = Actor(Counter::Create).Remote(1);
  ASSERT_NO_FATAL_FAILURE(cluster.RestartHead());
  EXPECT_EQ(*Get(before.Task(&Counter::Add).Remote(1), kLong), 2);

  ActorHandle<Counter> after = Actor(Counter::Create).SetName("after").Remote(10);
  EXPECT_EQ(*Get(after.Task(&Counter::Add).Remote(1), kLong), 11);
  std::optional<ActorHandle<Counter>> found = GetActor<Counter>("after");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*Get(found->Task(&Counter::Add).Remote(1), kLong), 12);
}

}  // namespace
}  // namespace airt
