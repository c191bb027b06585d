// Lineage reconstruction with real kill -9 (docs/fault_tolerance.md): a head, airt-node processes
// on this machine, and this test as the driver on the first node. A task's return held in the
// store of a node that is then killed is rebuilt on another node when the driver gets it, a chain
// of two such tasks is rebuilt arguments first, and the lineage errors say why when it cannot be.
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/multinode_cluster.h"

std::vector<uint8_t> MadeBytes(std::string dir, int n, int seed);
std::vector<uint8_t> AddToBytes(std::string dir, std::vector<uint8_t> in, int add, int ms);
int64_t SumBytes(std::vector<uint8_t> bytes);

namespace airt {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string>& kHeadFlags = e2e::kNodeKillHeadFlags;
const std::vector<std::string>& kNodeFlags = e2e::kNodeKillNodeFlags;
// Only the nodes with {special: 1} run the tasks: `second`, and after its death `third`.
const std::string kSpecial = "--resources={\"special\": 1}";
constexpr int kSize = 1 << 20;  // not inline: the return lives in its node's store

std::vector<uint8_t> Expected(int seed, int add) {
  std::vector<uint8_t> out(kSize);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + seed + add);
  return out;
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

// The runs marked `what` in `dir`, by node pid.
std::vector<int> Runs(const std::string& dir, const std::string& what) {
  std::vector<int> pids;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(what + "-", 0) != 0) continue;
    pids.push_back(std::stoi(name.substr(what.size() + 1)));
  }
  return pids;
}

class LineageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<e2e::MultiNodeCluster>(kNodeFlags, kHeadFlags);
    ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("first", {}));
    ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("second", {kSpecial}));
    markers_ = cluster_->Dir() + "/markers";
    std::filesystem::create_directories(markers_);
  }
  void TearDown() override {
    cluster_.reset();
    ::unsetenv("AIRT_MAX_LINEAGE_BYTES");
  }
  // Kills `second` (kill -9) and, with `replace`, starts `third` in its stead.
  void KillSecond(bool replace) {
    cluster_->node("second").Kill(SIGKILL);
    ASSERT_EQ(cluster_->node("second").Wait(60s), 128 + SIGKILL);
    if (replace) ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("third", {kSpecial}));
  }
  // Waits until `ref`'s task has finished, without a copy of it reaching this node (Wait would
  // prefetch it): a task on the same node reads it.
  void WaitReady(const ObjectRef<std::vector<uint8_t>>& ref) {
    EXPECT_GT(*Get(Task(SumBytes).SetResource("special", 1).Remote(ref), 60'000), 0);
  }

  std::unique_ptr<e2e::MultiNodeCluster> cluster_;
  std::string markers_;
};

TEST_F(LineageTest, AReturnWhoseNodeDiedIsRebuiltOnALiveNodeByGet) {
  cluster_->Init();
  ObjectRef<std::vector<uint8_t>> made =
      Task(MadeBytes).SetResource("special", 1).Remote(markers_, kSize, 5);
  ASSERT_NO_FATAL_FAILURE(WaitReady(made));
  int victim = cluster_->node("second").pid();
  ASSERT_NO_FATAL_FAILURE(KillSecond(/*replace=*/true));

  EXPECT_EQ(*Get(made, 120'000), Expected(5, 0));
  std::vector<int> runs = Runs(markers_, "made5");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_TRUE((runs[0] == victim) != (runs[1] == victim));
  int survivor = cluster_->node("third").pid();
  EXPECT_TRUE(runs[0] == survivor || runs[1] == survivor);
}

TEST_F(LineageTest, AChainIsRebuiltArgumentsFirstAfterTheArgumentsRefWasDropped) {
  cluster_->Init();
  ObjectRef<std::vector<uint8_t>> added = [&] {
    ObjectRef<std::vector<uint8_t>> made =
        Task(MadeBytes).SetResource("special", 1).Remote(markers_, kSize, 3);
    return Task(AddToBytes).SetResource("special", 1).Remote(markers_, made, 10, 0);
  }();
  ASSERT_NO_FATAL_FAILURE(WaitReady(added));
  ASSERT_NO_FATAL_FAILURE(KillSecond(/*replace=*/true));

  EXPECT_EQ(*Get(added, 120'000), Expected(3, 10));
  EXPECT_EQ(Runs(markers_, "made3").size(), 2u);
  EXPECT_EQ(Runs(markers_, "added10").size(), 2u);
}

TEST_F(LineageTest, ATaskThatMayNotRetryGivesMaxAttemptsExceeded) {
  cluster_->Init();
  ObjectRef<std::vector<uint8_t>> made =
      Task(MadeBytes).SetResource("special", 1).SetMaxRetries(0).Remote(markers_, kSize, 7);
  ASSERT_NO_FATAL_FAILURE(WaitReady(made));
  ASSERT_NO_FATAL_FAILURE(KillSecond(/*replace=*/true));
  try {
    Get(made, 120'000);
    FAIL() << "the lost object was read";
  } catch (const ObjectReconstructionFailedMaxAttemptsExceededError& e) {
    EXPECT_NE(std::string(e.what()).find(Hex(made.ID())), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_retries"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Runs(markers_, "made7").size(), 1u);
}

TEST_F(LineageTest, ATinyLineageCapGivesLineageEvicted) {
  ::setenv("AIRT_MAX_LINEAGE_BYTES", "1", 1);
  cluster_->Init();
  ObjectRef<std::vector<uint8_t>> made =
      Task(MadeBytes).SetResource("special", 1).Remote(markers_, kSize, 9);
  ASSERT_NO_FATAL_FAILURE(WaitReady(made));
  ASSERT_NO_FATAL_FAILURE(KillSecond(/*replace=*/false));
  try {
    Get(made, 120'000);
    FAIL() << "the lost object was read";
  } catch (const ObjectReconstructionFailedLineageEvictedError& e) {
    EXPECT_NE(std::string(e.what()).find(Hex(made.ID())), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max_lineage_bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace airt
