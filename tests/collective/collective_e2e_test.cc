// Collective groups whose ranks are actors on a real head and node over loopback: the rendezvous
// through the head's KV, Gloo between the workers, and the hung-rank diagnosis through the
// workers' proto::Owner.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "airt/api.h"
#include "tests/collective/collective_functions.h"
#include "tests/e2e/task_cluster.h"

namespace airt::e2e {
namespace {

class CollectiveE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new TaskCluster({"--num-cpus=8"}); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_FALSE(HasFatalFailure()); }
  // `n` ranks, each an actor of its own worker.
  static std::vector<ActorHandle<Rank>> Ranks(int n) {
    std::vector<ActorHandle<Rank>> out;
    for (int i = 0; i < n; ++i) out.push_back(Actor(Rank::Create).Remote());
    return out;
  }
  static TaskCluster* cluster_;
};
TaskCluster* CollectiveE2e::cluster_ = nullptr;

TEST_F(CollectiveE2e, ActorsAgreeOnEveryOperationTypeAndOpOnTwoToFourRanks) {
  for (int world : {2, 4}) {
    std::vector<ObjectRef<std::string>> ranks;
    std::string group = "sweep" + std::to_string(world);
    auto actors = Ranks(world);
    for (int r = 0; r < world; ++r) {
      ranks.push_back(actors[r].Task(&Rank::Sweep).Remote(world, r, group));
    }
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(*Get(ranks[r]), "") << "world " << world << " rank " << r;
    }
  }
  EXPECT_TRUE(internal::KvGet("airt_collective", internal::JobIdHex() + "/sweep2/info/0") ==
              std::nullopt)
      << "the rendezvous keys are gone";
}

TEST_F(CollectiveE2e, Float32SumAllreduceAt64MiB) {
  auto actors = Ranks(2);
  auto a = actors[0].Task(&Rank::BigAllreduce).Remote(2, 0, 64);
  auto b = actors[1].Task(&Rank::BigAllreduce).Remote(2, 1, 64);
  EXPECT_EQ(*Get(a), (std::vector<float>{3.0f, 3.0f}));
  EXPECT_EQ(*Get(b), (std::vector<float>{3.0f, 3.0f}));
}

TEST_F(CollectiveE2e, EveryRankNamesTheRankThatSkippedAnOperationWithItsNodeAndPid) {
  std::vector<ObjectRef<std::string>> ranks;
  auto actors = Ranks(3);
  for (int r = 0; r < 3; ++r) ranks.push_back(actors[r].Task(&Rank::Skip).Remote(3, r, 2, 2000));
  EXPECT_EQ(*Get(ranks[2]), "skipped");
  for (int r : {0, 1}) {
    std::string message = *Get(ranks[r]);
    EXPECT_NE(message.find("allreduce #2 of collective group 'skip' (rank " + std::to_string(r) +
                           " of 3)"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("never reached it: rank 2 (node 127.0.0.1:"), std::string::npos)
        << message;
    EXPECT_NE(message.find("whose last operation was #1"), std::string::npos) << message;
    EXPECT_EQ(message.find("rank " + std::to_string(1 - r) + " (node"), std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace airt::e2e
