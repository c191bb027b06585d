// airt::Cancel end to end: a real airt-head, an airt-node with one CPU starting real airt-worker
// processes, and this test as the driver. The functions (cancel_functions.cc) leave a marker
// file with their worker's pid, so the tests see what started, what never ran, and which
// process was killed.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/task_cluster.h"

int Add(int a, int b);
int MarkThenSleepMs(std::string marker, int ms);
int MarkRun(std::string marker, int value);

namespace airt {
namespace {

using namespace std::chrono_literals;
using airt::testing::ReadFile;
using airt::testing::WaitUntil;

class Cancel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new e2e::TaskCluster({"--num-cpus=1"}); }
  static void TearDownTestSuite() { delete cluster_; }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- node log ----\n" << cluster_->NodeLog();
  }

  // A fresh marker path in the cluster's temp folder.
  static std::string Marker(const std::string& name) {
    static int next = 0;
    return cluster_->dir().File(name + "-" + std::to_string(next++));
  }
  static bool Exists(const std::string& path) { return std::filesystem::exists(path); }
  // The pid a marker holds, once it is there (0 if not within the timeout).
  static pid_t PidIn(const std::string& marker) {
    if (!WaitUntil([&] { return Exists(marker); }, 30s)) return 0;
    return static_cast<pid_t>(std::stol(ReadFile(marker)));
  }

  static e2e::TaskCluster* cluster_;
};

e2e::TaskCluster* Cancel::cluster_ = nullptr;

TEST_F(Cancel, QueuedTasksAreDroppedAndNeverRun) {
  std::string busy_marker = Marker("busy");
  ObjectRef<int> busy = Task(MarkThenSleepMs).Remote(busy_marker, 1500);
  ASSERT_NE(PidIn(busy_marker), 0) << "the busy task never started";

  // The node's one CPU is taken: this task waits for a lease of its own shape, in the queue.
  std::string leased_marker = Marker("waits-for-lease");
  ObjectRef<int> waits_for_lease = Task(MarkRun).SetResource("CPU", 0.5).Remote(leased_marker, 1);
  // This one waits for its argument, the busy task's return.
  std::string argument_marker = Marker("waits-for-argument");
  ObjectRef<int> waits_for_argument = Task(MarkRun).Remote(argument_marker, busy);

  auto start = std::chrono::steady_clock::now();
  airt::Cancel(waits_for_lease);
  airt::Cancel(waits_for_argument);
  EXPECT_THROW(Get(waits_for_lease, 5000), TaskCancelledError);
  EXPECT_THROW(Get(waits_for_argument, 5000), TaskCancelledError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "cancelled returns fail at once";

  // The busy task is not affected; after it, tasks of both shapes run, the cancelled ones never.
  EXPECT_EQ(*Get(busy, 30000), 1500);
  EXPECT_EQ(*Get(Task(Add).SetResource("CPU", 0.5).Remote(1, 2), 30000), 3);
  EXPECT_EQ(*Get(Task(Add).Remote(busy, 1), 30000), 1501);
  EXPECT_FALSE(Exists(leased_marker));
  EXPECT_FALSE(Exists(argument_marker));
}

TEST_F(Cancel, ForceKillsTheWorkerOfARunningTask) {
  std::string marker = Marker("force");
  ObjectRef<int> running = Task(MarkThenSleepMs).Remote(marker, 60000);
  pid_t worker = PidIn(marker);
  ASSERT_NE(worker, 0) << "the task never started";

  auto start = std::chrono::steady_clock::now();
  airt::Cancel(running, /*force=*/true);
  EXPECT_THROW(Get(running, 10000), TaskCancelledError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  // The worker process is gone (killed and reaped by its node), not retried elsewhere, and the
  // CPU it held is free again: a task needing it runs at once.
  EXPECT_TRUE(WaitUntil([&] { return ::kill(worker, 0) != 0; }, 10s))
      << "worker " << worker << " still runs";
  EXPECT_EQ(*Get(Task(Add).Remote(2, 3), 20000), 5);
}

TEST_F(Cancel, RunningCppTaskIsReportedCancelledAndRunsToItsEnd) {
  std::string marker = Marker("non-force");
  ObjectRef<int> running = Task(MarkThenSleepMs).Remote(marker, 2000);
  pid_t worker = PidIn(marker);
  ASSERT_NE(worker, 0) << "the task never started";

  auto start = std::chrono::steady_clock::now();
  airt::Cancel(running);
  EXPECT_THROW(Get(running, 10000), TaskCancelledError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  // C++ code cannot be interrupted: the worker lives on and serves the next task.
  EXPECT_EQ(::kill(worker, 0), 0);
  EXPECT_EQ(*Get(Task(Add).Remote(3, 4), 20000), 7);
}

TEST_F(Cancel, FinishedTaskIsLeftAlone) {
  ObjectRef<int> sum = Task(Add).Remote(1, 2);
  EXPECT_EQ(*Get(sum), 3);
  airt::Cancel(sum);
  airt::Cancel(sum, /*force=*/true);
  EXPECT_EQ(*Get(sum), 3);
}

TEST_F(Cancel, PutCannotBeCancelled) {
  ObjectRef<int> put = Put(5);
  EXPECT_THROW(airt::Cancel(put), Exception);
  EXPECT_EQ(*Get(put), 5);
}

}  // namespace
}  // namespace airt
