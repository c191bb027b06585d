// Node death with real kill -9: a head, airt-node processes on this machine, and this test as the
// driver on the first node. A killed node's tasks finish on another node with their results, its
// actor restarts elsewhere, its objects raise ObjectLostError, `airt status` shows it DEAD and
// why; a node the head declared dead is refused when it comes back, and a node whose head stays
// away exits after its reconnect window.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/actor_functions.h"
#include "tests/e2e/multinode_cluster.h"

int NodePid();
int SquareSlowly(std::string dir, int x, int ms);
std::vector<uint8_t> Bytes(int n, int seed);

namespace airt {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::ReadFile;

// A killed node's connection drops: the head sees its death within the grace (the heartbeat
// timeout is long, so that a loaded machine's late heartbeats do not kill a survivor).
const std::vector<std::string>& kHeadFlags = e2e::kNodeKillHeadFlags;
// For the test that needs the timeout itself.
const std::vector<std::string> kShortTimeoutHeadFlags = {
    "--heartbeat-interval-ms=200", "--node-timeout-ms=3000", "--node-disconnect-grace-ms=300"};
const std::vector<std::string>& kNodeFlags = e2e::kNodeKillNodeFlags;
const std::string kSpecial = "--resources={\"special\": 1}";

// The pid of the node where a SquareSlowly marker appeared in `dir`; 0 when none by the deadline.
int WaitForRunningNode(const std::string& dir) {
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("running-", 0) == 0) return std::stoi(name.substr(8));
    }
    std::this_thread::sleep_for(20ms);
  }
  return 0;
}

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// `airt status` against the cluster's head; its output.
std::string Status(e2e::MultiNodeCluster& cluster) {
  std::string log = cluster.Dir() + "/status.out";
  ChildProcess airt({AIRT_CLI_BIN, "status", "--address=" + cluster.address()}, log);
  EXPECT_EQ(airt.Wait(60s), 0) << ReadFile(log);
  return ReadFile(log);
}

// The name of the node (second or third) whose pid is `pid`; the other one.
std::pair<std::string, std::string> VictimAndSurvivor(e2e::MultiNodeCluster& cluster, int pid) {
  if (cluster.node("second").pid() == pid) return {"second", "third"};
  return {"third", "second"};
}

TEST(NodeDeath, TasksOfAKilledNodeFinishOnAnotherWithTheirResults) {
  e2e::MultiNodeCluster cluster(kNodeFlags, kHeadFlags);
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("first", {}));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("second", {kSpecial}));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("third", {kSpecial}));
  cluster.Init();
  std::string markers = cluster.Dir() + "/markers";
  std::filesystem::create_directories(markers);

  // Only `second` and `third` have {special: 1}: the lease lands on one of them, which runs the
  // tasks one after another.
  std::vector<ObjectRef<int>> squares;
  for (int x = 1; x <= 6; ++x) {
    squares.push_back(
        Task(SquareSlowly).SetResource("special", 1).SetMaxRetries(3).Remote(markers, x, 700));
  }
  int victim_pid = WaitForRunningNode(markers);
  ASSERT_NE(victim_pid, 0) << "no task started";
  auto [victim, survivor] = VictimAndSurvivor(cluster, victim_pid);
  // A result the victim holds in its store (1 MiB: not inline), made there before the kill.
  ObjectRef<std::vector<uint8_t>> held =
      Task(Bytes).SetResource("special", 1).SetMaxRetries(0).Remote(1 << 20, 3);
  cluster.node(victim).Kill(SIGKILL);
  ASSERT_EQ(cluster.node(victim).Wait(60s), 128 + SIGKILL);

  for (int x = 1; x <= 6; ++x) {
    EXPECT_EQ(*Get(squares[x - 1], 120'000), x * x) << "task " << x;
  }
  // The survivor ran what the victim had not finished.
  EXPECT_TRUE(std::filesystem::exists(markers + "/running-" +
                                      std::to_string(cluster.node(survivor).pid()) + "-6"));
  try {
    std::shared_ptr<std::vector<uint8_t>> bytes = Get(held, 120'000);
    // It may have been made on the survivor after the kill: then it is whole.
    EXPECT_EQ(bytes->size(), 1u << 20);
  } catch (const ObjectLostError& e) {
    EXPECT_NE(std::string(e.what()).find(Hex(held.ID())), std::string::npos) << e.what();
  } catch (const WorkerCrashedError&) {
    // Its worker died with the node and it may not be retried (max_retries 0).
  }

  std::string status = Status(cluster);
  EXPECT_NE(status.find("DEAD"), std::string::npos) << status;
  EXPECT_NE(status.find("died at "), std::string::npos) << status;
  EXPECT_NE(status.find("connection to the head dropped"), std::string::npos) << status;
}

TEST(NodeDeath, AnActorOfAKilledNodeAnswersAgainFromAnotherNode) {
  e2e::MultiNodeCluster cluster(kNodeFlags, kHeadFlags);
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("first", {}));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("second", {kSpecial}));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("third", {kSpecial}));
  cluster.Init();
  ActorHandle<Counter> counter =
      Actor(Counter::Create).SetResource("special", 1).SetMaxRestarts(2).Remote(5);
  int victim_pid = *Get(counter.Task(&Counter::NodePid).Remote(), 60'000);
  auto [victim, survivor] = VictimAndSurvivor(cluster, victim_pid);
  ASSERT_NE(victim_pid, cluster.node("first").pid());
  cluster.node(victim).Kill(SIGKILL);
  ASSERT_EQ(cluster.node(victim).Wait(60s), 128 + SIGKILL);

  // Calls in flight when it died may fail (max_task_retries 0); a call made once it restarted
  // answers from the survivor, with the state its constructor gives it again.
  int answered = 0;
  auto deadline = std::chrono::steady_clock::now() + 90s;
  while (answered == 0 && std::chrono::steady_clock::now() < deadline) {
    try {
      answered = *Get(counter.Task(&Counter::NodePid).Remote(), 30'000);
    } catch (const ActorError&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  EXPECT_EQ(answered, cluster.node(survivor).pid());
  EXPECT_EQ(*Get(counter.Task(&Counter::Value).Remote(), 30'000), 5);
}

TEST(NodeDeath, ANodeDeclaredDeadIsRefusedWhenItComesBackAndExits) {
  e2e::MultiNodeCluster cluster(kNodeFlags, kShortTimeoutHeadFlags);
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("first", {}));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("second", {}));
  // Stopped, `second` keeps its connection but heartbeats no more: the head's timeout declares it
  // dead. Resumed, it hears that the head does not know it, registers, and is refused.
  cluster.node("second").Kill(SIGSTOP);
  auto deadline = std::chrono::steady_clock::now() + 60s;
  std::string status;
  while (std::chrono::steady_clock::now() < deadline) {
    status = Status(cluster);
    if (status.find("1 alive, 1 dead") != std::string::npos) break;
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_NE(status.find("1 alive, 1 dead"), std::string::npos) << status;
  EXPECT_NE(status.find("no heartbeat for"), std::string::npos) << status;
  cluster.node("second").Kill(SIGCONT);
  EXPECT_EQ(cluster.node("second").Wait(60s), 1) << cluster.Log("second");
  std::string log = cluster.Log("second");
  EXPECT_NE(log.find("the head refused node"), std::string::npos) << log;
  EXPECT_NE(log.find("restart it clean"), std::string::npos) << log;
  EXPECT_TRUE(cluster.node("first").Running());
}

TEST(NodeDeath, ANodeExitsWhenTheHeadStaysAwayPastItsReconnectWindow) {
  e2e::MultiNodeCluster cluster(kNodeFlags, kHeadFlags);
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("first", {"--head-reconnect-timeout-s=2",
                                                    "--head-retry-max-ms=200"}));
  cluster.head().Kill(SIGKILL);
  ASSERT_EQ(cluster.head().Wait(60s), 128 + SIGKILL);
  EXPECT_EQ(cluster.node("first").Wait(60s), 1) << cluster.Log("first");
  std::string log = cluster.Log("first");
  EXPECT_NE(log.find("could not reach the head"), std::string::npos) << log;
  EXPECT_NE(log.find("reconnect window of 2 s"), std::string::npos) << log;
}

}  // namespace
}  // namespace airt
