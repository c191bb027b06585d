// A small chaos run for CI (docs/fault_tolerance.md): chains of two tasks over 3 nodes, with one
// of the two nodes that run them killed (kill -9) while the chains run. Every result must be
// right: tasks in flight there are retried, and returns that lay there are rebuilt from their
// lineage (bench/chaos runs the same longer and prints figures).
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/multinode_cluster.h"

std::vector<uint8_t> MadeBytes(std::string dir, int n, int seed);
std::vector<uint8_t> AddToBytes(std::string dir, std::vector<uint8_t> in, int add, int ms);

namespace airt {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string>& kHeadFlags = e2e::kNodeKillHeadFlags;
const std::vector<std::string>& kNodeFlags = e2e::kNodeKillNodeFlags;
const std::string kSpecial = "--resources={\"special\": 2}";
constexpr int kChains = 12;
constexpr int kSize = 256 << 10;  // not inline

size_t CountMarked(const std::string& dir, const std::string& prefix) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    n += entry.path().filename().string().rfind(prefix, 0) == 0;
  }
  return n;
}

TEST(Chaos, ChainedTasksOverThreeNodesAreAllRightWhenANodeIsKilledMidRun) {
  e2e::MultiNodeCluster cluster(kNodeFlags, kHeadFlags);
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("first", {}));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("second", {kSpecial}));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("third", {kSpecial}));
  cluster.Init();
  std::string markers = cluster.Dir() + "/markers";
  std::filesystem::create_directories(markers);

  std::vector<ObjectRef<std::vector<uint8_t>>> results;
  for (int i = 0; i < kChains; ++i) {
    ObjectRef<std::vector<uint8_t>> made =
        Task(MadeBytes).SetResource("special", 1).SetMaxRetries(-1).Remote(markers, kSize, i);
    results.push_back(
        Task(AddToBytes).SetResource("special", 1).SetMaxRetries(-1).Remote(markers, made, 1, 150));
  }
  // Kill `second` once a third of the chains' second tasks have started.
  auto deadline = std::chrono::steady_clock::now() + 120s;
  while (CountMarked(markers, "added1-") < kChains / 3 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  cluster.node("second").Kill(SIGKILL);
  ASSERT_EQ(cluster.node("second").Wait(60s), 128 + SIGKILL);

  for (int i = 0; i < kChains; ++i) {
    std::shared_ptr<std::vector<uint8_t>> got = Get(results[i], 180'000);
    ASSERT_EQ(got->size(), static_cast<size_t>(kSize)) << "chain " << i;
    bool right = true;
    for (size_t k = 0; k < got->size() && right; ++k) {
      right = (*got)[k] == static_cast<uint8_t>(k * 7 + i + 1);
    }
    EXPECT_TRUE(right) << "chain " << i << " has wrong bytes";
  }
}

}  // namespace
}  // namespace airt
