// Ray's placement_group_capture_child_tasks from the C++ API: one node of 3 CPUs, all of them in
// one placement group's bundle, so that a child task (1 CPU) can run only inside the group. A task
// (or an actor) placed with SetPlacementGroup(group, index, true) has its children run in the
// group, and theirs; without capture, or with a strategy of its own, the child waits for a CPU
// outside the group that never comes (the function reports that it did not start in its time).
#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/task_cluster.h"

int ChildResult(int ms, bool default_strategy);
int GrandchildResult(int ms);
class Spawner {
 public:
  static Spawner* Create();
  int Child(int ms);
};

namespace airt {
namespace {

constexpr int64_t kLong = 60'000;
constexpr int kNeverMs = 1500;  // how long a child that cannot start is given

class Capture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new e2e::TaskCluster({"--num-cpus=3", "--object-store-memory=64M"});
  }
  static void TearDownTestSuite() { delete cluster_; }
  void SetUp() override {
    PlacementGroupCreationOptions options;
    options.strategy = PlacementStrategy::STRICT_PACK;
    options.bundles = {{{"CPU", 3}}};
    group_ = CreatePlacementGroup(options);
    ASSERT_TRUE(group_.Wait(60));
  }
  void TearDown() override {
    RemovePlacementGroup(group_.ID());
    if (HasFailure()) std::cerr << "---- node log ----\n" << cluster_->NodeLog();
  }

  static e2e::TaskCluster* cluster_;
  PlacementGroup group_;
};

e2e::TaskCluster* Capture::cluster_ = nullptr;

TEST_F(Capture, ACapturingTasksChildRunsInItsGroup) {
  auto parent = Task(ChildResult).SetPlacementGroup(group_, 0, true).Remote(kLong, false);
  EXPECT_EQ(*Get(parent, kLong), 3);
}

TEST_F(Capture, WithoutCaptureTheChildWaitsForACpuOutsideTheGroup) {
  auto parent = Task(ChildResult).SetPlacementGroup(group_, 0).Remote(kNeverMs, false);
  EXPECT_EQ(*Get(parent, kLong), -1);
}

TEST_F(Capture, AChildWithAStrategyOfItsOwnIsNotCaptured) {
  auto parent = Task(ChildResult).SetPlacementGroup(group_, -1, true).Remote(kNeverMs, true);
  EXPECT_EQ(*Get(parent, kLong), -1);
}

TEST_F(Capture, ACapturedChildCapturesItsOwnChildren) {
  auto parent = Task(GrandchildResult).SetPlacementGroup(group_, 0, true).Remote(kLong);
  EXPECT_EQ(*Get(parent, kLong), 3);
}

TEST_F(Capture, AnActorsMethodsCaptureTheirChildren) {
  ActorHandle<Spawner> spawner =
      Actor(Spawner::Create).SetResource("CPU", 1).SetPlacementGroup(group_, 0, true).Remote();
  EXPECT_EQ(*Get(spawner.Task(&Spawner::Child).Remote(static_cast<int>(kLong)), kLong), 3);
  spawner.Kill();
}

}  // namespace
}  // namespace airt
