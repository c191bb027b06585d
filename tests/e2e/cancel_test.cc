// airt::Cancel end to end: a real airt-head, an airt-node with one CPU starting real airt-worker
// processes, and this test as the driver. The functions (cancel_functions.cc) leave a marker
// file with their worker's pid, so the tests see what started, what never ran, and which
// process was killed. Actor calls are cancelled on a Counter (actor_functions.cc, no CPU held),
// whose Append shows which calls ran and in what order.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/actor_functions.h"
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

TEST_F(Cancel, ActorCallQueuedAtTheCallerIsDroppedAndTheCallsAfterItGoOn) {
  ActorHandle<Counter> counter = Actor(Counter::Create).Remote(0);
  ASSERT_EQ(*Get(counter.Task(&Counter::Value).Remote(), 30000), 0);
  // Its argument comes from a slow task: the call waits in this process's queue for the actor,
  // and the call after it waits behind it (calls go in submission order).
  ObjectRef<int> slow = Task(MarkThenSleepMs).Remote(Marker("actor-argument"), 5000);
  ObjectRef<std::vector<int>> waiting = counter.Task(&Counter::Append).Remote(slow);
  ObjectRef<std::vector<int>> next = counter.Task(&Counter::Append).Remote(2);

  auto start = std::chrono::steady_clock::now();
  airt::Cancel(waiting);
  EXPECT_THROW(Get(waiting, 5000), TaskCancelledError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "cancelled returns fail at once";
  // The next call no longer waits for the slow argument: it ran while the slow task still runs.
  EXPECT_EQ(*Get(next, 4000), std::vector<int>{2});
  EXPECT_EQ(Wait(std::vector<ObjectRef<int>>{slow}, 1, 0).ready.size(), 0u);
  // Once the argument is there, the cancelled call is still never sent.
  EXPECT_EQ(*Get(slow, 30000), 5000);
  EXPECT_EQ(*Get(counter.Task(&Counter::Append).Remote(3), 30000), (std::vector<int>{2, 3}));
  counter.Kill();
}

TEST_F(Cancel, SentActorCallIsCancelledAndTheCallsAfterItKeepTheirOrder) {
  ActorHandle<Counter> counter = Actor(Counter::Create).Remote(0);
  ASSERT_EQ(*Get(counter.Task(&Counter::Value).Remote(), 30000), 0);
  ObjectRef<int> first = counter.Task(&Counter::SleepMs).Remote(100);
  ObjectRef<int> busy = counter.Task(&Counter::SleepMs).Remote(1500);
  ObjectRef<std::vector<int>> queued = counter.Task(&Counter::Append).Remote(1);
  ObjectRef<std::vector<int>> next = counter.Task(&Counter::Append).Remote(2);
  // The first call's answer comes after this process sent every call above (it sends them as it
  // takes them): the one cancelled below is in flight, not queued here.
  EXPECT_EQ(*Get(first, 30000), 100);

  auto start = std::chrono::steady_clock::now();
  airt::Cancel(queued);
  EXPECT_THROW(Get(queued, 5000), TaskCancelledError);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "not after the busy call";
  EXPECT_EQ(*Get(busy, 30000), 1500) << "the call before it is not affected";
  // A C++ actor reads a call off the wire as it runs it, so it may have run the cancelled one
  // (its result thrown away) before the cancel reached it; the next one runs after it either way.
  std::vector<int> seen = *Get(next, 30000);
  EXPECT_TRUE(seen == std::vector<int>{2} || seen == (std::vector<int>{1, 2}));
  std::vector<int> later = *Get(counter.Task(&Counter::Append).Remote(3), 30000);
  seen.push_back(3);
  EXPECT_EQ(later, seen) << "the actor lives on, its calls in order";
  // A finished call is left alone.
  airt::Cancel(next);
  EXPECT_EQ(Get(next)->back(), 2);
  counter.Kill();
}

TEST_F(Cancel, CancelledActorCallIsNotResentAfterARestart) {
  ActorHandle<Counter> counter =
      Actor(Counter::Create).SetMaxRestarts(1).SetMaxTaskRetries(-1).Remote(0);
  ASSERT_EQ(*Get(counter.Task(&Counter::Value).Remote(), 30000), 0);
  // All sent at once; the actor's process dies at ExitOnce, with the calls after it in flight.
  ObjectRef<int> first = counter.Task(&Counter::SleepMs).Remote(100);
  ObjectRef<int> busy = counter.Task(&Counter::SleepMs).Remote(1500);
  ObjectRef<int> dies = counter.Task(&Counter::ExitOnce).Remote(Marker("exit-once"));
  ObjectRef<std::vector<int>> cancelled = counter.Task(&Counter::Append).Remote(7);
  ObjectRef<std::vector<int>> after = counter.Task(&Counter::Append).Remote(8);
  // The first call's answer comes after this process sent every call above (it sends them as it
  // takes them, long before an answer): the one cancelled below is in flight, not queued here.
  EXPECT_EQ(*Get(first, 30000), 100);
  airt::Cancel(cancelled);
  EXPECT_THROW(Get(cancelled, 5000), TaskCancelledError);
  // The restarted actor gets the calls in flight again (max_task_retries=-1), but not the
  // cancelled one: Append(8) finds nothing before it.
  EXPECT_EQ(*Get(busy, 30000), 1500);
  EXPECT_EQ(*Get(dies, 30000), 0);
  EXPECT_EQ(*Get(after, 30000), std::vector<int>{8});
  EXPECT_THROW(Get(cancelled, 0), TaskCancelledError);
  counter.Kill();
}

TEST_F(Cancel, ForceOnAnActorCallThrowsAndLeavesTheCall) {
  ActorHandle<Counter> counter = Actor(Counter::Create).Remote(0);
  ObjectRef<int> call = counter.Task(&Counter::SleepMs).Remote(300);
  try {
    airt::Cancel(call, /*force=*/true);
    ADD_FAILURE() << "force on an actor call did not throw";
  } catch (const Exception& e) {
    EXPECT_NE(std::string(e.what()).find("force=True is not supported for actor tasks"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(*Get(call, 30000), 300);
  counter.Kill();
}

}  // namespace
}  // namespace airt
