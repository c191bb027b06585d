// Actors end to end: a real airt-head, an airt-node starting real airt-worker processes, this test
// as one driver and actor_driver processes as others.
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <sys/types.h>

#include "airt/api.h"
#include "ray/api.h"
#include "tests/e2e/actor_functions.h"
#include "tests/testing/test_support.h"

namespace airt {
namespace {

using airt::testing::ChildProcess;
using airt::testing::ProcessRunning;
using airt::testing::ReadFile;
using airt::testing::TempDir;
using airt::testing::WaitForLine;
using airt::testing::WaitUntil;
using namespace std::chrono_literals;


// Calls Value until the actor answers (its restart may take a moment); nullopt after 20 s.
std::optional<int> ValueOnceBack(ActorHandle<Counter>& counter) {
  std::optional<int> value;
  WaitUntil(
      [&] {
        try {
          value = *Get(counter.Task(&Counter::Value).Remote(), 20'000);
          return true;
        } catch (const ActorError&) {
          return false;  // the call was in flight when it died; the next goes to the restart
        }
      },
      20s);
  return value;
}

// Whether, within 20 s, a call fails with an ActorDiedError whose message holds `why`.
bool SoonDead(ActorHandle<Counter>& counter, const std::string& why) {
  return WaitUntil(
      [&] {
        try {
          Get(counter.Task(&Counter::Value).Remote(), 20'000);
          return false;
        } catch (const ActorDiedError& e) {
          return std::string(e.what()).find(why) != std::string::npos;
        }
      },
      20s);
}

// Add(k) on a handle found by name once the actor answers (a call in flight when its worker died
// fails; the next reaches the restarted actor); nullopt after 30 s.
std::optional<int> AddOnceBack(ActorHandle<Counter>& counter, int k) {
  std::optional<int> value;
  WaitUntil(
      [&] {
        try {
          value = *Get(counter.Task(&Counter::Add).Remote(k), 20'000);
          return true;
        } catch (const ActorDiedError&) {
          throw;
        } catch (const ActorError&) {
          return false;
        }
      },
      30s);
  return value;
}

class Actors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    head_ = new ChildProcess(
        {AIRT_HEAD_BIN, "--port=0", "--heartbeat-interval-ms=100", "--infeasible-grace-ms=300"},
        dir_->File("head.log"));
    address_ = WaitForLine(dir_->File("head.log"), "head ready ", 30s, head_).value_or("");
    ASSERT_FALSE(address_.empty()) << ReadFile(dir_->File("head.log"));
    node_ = new ChildProcess(
        {AIRT_NODE_BIN, "--head-address=" + address_, "--num-cpus=2", "--object-store-memory=128M",
         "--temp-dir=" + dir_->path(), "--worker-binary=" + std::string(AIRT_WORKER_BIN),
         "--infeasible-grace-ms=300",
         "--worker-code-search-path=" + std::string(AIRT_TASK_FUNCTIONS)},
        dir_->File("node.log"));
    ASSERT_TRUE(WaitForLine(dir_->File("node.log"), "node ready ", 30s, node_))
        << ReadFile(dir_->File("node.log"));
    ::setenv("AIRT_ADDRESS", address_.c_str(), 1);  // actor_driver processes inherit it
    Init();
  }
  static void TearDownTestSuite() {
    Shutdown();
    delete node_;  // killed by pid
    delete head_;
    delete dir_;
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- node log ----\n" << ReadFile(dir_->File("node.log"));
  }

  static TempDir* dir_;
  static ChildProcess* head_;
  static ChildProcess* node_;
  static std::string address_;
};

TempDir* Actors::dir_ = nullptr;
ChildProcess* Actors::head_ = nullptr;
ChildProcess* Actors::node_ = nullptr;
std::string Actors::address_;

TEST_F(Actors, MethodsRunOnOneInstanceInSubmissionOrder) {
  ActorHandle<Counter> counter = Actor(Counter::Create).Remote(10);
  std::vector<ObjectRef<std::vector<int>>> calls;
  for (int i = 0; i < 200; ++i) calls.push_back(counter.Task(&Counter::Append).Remote(i));
  std::vector<int> expected;
  for (int i = 0; i < 200; ++i) {
    expected.push_back(i);
    ASSERT_EQ(*Get(calls[i]), expected) << "call " << i;
  }
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(5)), 15);
  EXPECT_EQ(*Get(counter.Task(&Counter::Value).Remote()), 15);
}

TEST_F(Actors, TakeRefsAndGiveResultsToTasks) {
  ActorHandle<Counter> counter = Actor(Counter::Create).Remote(0);
  ObjectRef<int> two = Put(2);
  ObjectRef<int> after = counter.Task(&Counter::Add).Remote(two);
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(after)), 4);
}

TEST_F(Actors, AMethodsExceptionReachesGetAndTheActorLivesOn) {
  ActorHandle<Counter> counter = Actor(Counter::Create).Remote(1);
  try {
    Get(counter.Task(&Counter::Throw).Remote(std::string("no thanks")));
    FAIL() << "expected a TaskError";
  } catch (const TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("no thanks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Counter::Throw"), std::string::npos) << e.what();
  }
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(1)), 2);
}

TEST_F(Actors, AConstructorThatThrowsLeavesTheActorDead) {
  ActorHandle<Counter> counter = Actor(Counter::CreateChecked).Remote(-1);
  try {
    Get(counter.Task(&Counter::Value).Remote(), 20'000);
    FAIL() << "expected an ActorDiedError";
  } catch (const ActorDiedError& e) {
    EXPECT_NE(std::string(e.what()).find("start must be >= 0"), std::string::npos) << e.what();
  }
}

TEST_F(Actors, NamedActorsAreFoundAndNamesAreUnique) {
  ActorHandle<Counter> named = Actor(Counter::Create).SetName("the-counter").Remote(7);
  std::optional<ActorHandle<Counter>> found = GetActor<Counter>("the-counter");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->ID(), named.ID());
  EXPECT_EQ(*Get(found->Task(&Counter::Add).Remote(1)), 8);
  EXPECT_FALSE(GetActor<Counter>("no-such-counter").has_value());
  EXPECT_FALSE(GetActor<Counter>("the-counter", "another-namespace").has_value());
  EXPECT_THROW(Actor(Counter::Create).SetName("the-counter").Remote(0), Exception);
}

TEST_F(Actors, KilledActorsFailTheirCallsAndFreeTheirName) {
  ActorHandle<Counter> counter =
      Actor(Counter::Create).SetName("doomed").SetMaxRestarts(3).Remote(1);
  int pid = *Get(counter.Task(&Counter::Pid).Remote());
  counter.Kill();
  EXPECT_TRUE(WaitUntil([&] { return !ProcessRunning(pid); }, 10s)) << "the worker still runs";
  EXPECT_THROW(Get(counter.Task(&Counter::Value).Remote(), 20'000), ActorDiedError);
  EXPECT_FALSE(GetActor<Counter>("doomed").has_value());
  ActorHandle<Counter> again = Actor(Counter::Create).SetName("doomed").Remote(2);
  EXPECT_EQ(*Get(again.Task(&Counter::Value).Remote()), 2);
}

TEST_F(Actors, AKilledProcessRestartsTheActorUntilRestartsRunOut) {
  ActorHandle<Counter> counter = Actor(Counter::Create).SetMaxRestarts(1).Remote(5);
  EXPECT_EQ(*Get(counter.Task(&Counter::Add).Remote(10)), 15);
  int pid = *Get(counter.Task(&Counter::Pid).Remote());
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // Restarted: the constructor ran again on a new worker.
  EXPECT_EQ(ValueOnceBack(counter), 5);
  int second = *Get(counter.Task(&Counter::Pid).Remote());
  EXPECT_NE(second, pid);
  ASSERT_EQ(::kill(second, SIGKILL), 0);
  // No restarts left.
  EXPECT_TRUE(SoonDead(counter, "max_restarts=1"));
}

TEST_F(Actors, WithoutRestartsADeadProcessMeansADeadActor) {
  ActorHandle<Counter> counter = Actor(Counter::Create).Remote(5);
  int pid = *Get(counter.Task(&Counter::Pid).Remote());
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  EXPECT_TRUE(SoonDead(counter, ""));
}

TEST_F(Actors, MaxConcurrencyRunsMethodsSideBySide) {
  ActorHandle<Counter> wide = Actor(Counter::Create).SetMaxConcurrency(4).Remote(0);
  std::vector<ObjectRef<bool>> meets;
  for (int i = 0; i < 4; ++i) meets.push_back(wide.Task(&Counter::Meet).Remote(4));
  for (auto& met : meets) EXPECT_TRUE(*Get(met));
  // One at a time: two calls can never meet.
  ActorHandle<Counter> narrow = Actor(Counter::Create).Remote(0);
  auto first = narrow.Task(&Counter::Meet).Remote(2);
  auto second = narrow.Task(&Counter::Meet).Remote(2);
  EXPECT_FALSE(*Get(first));
  EXPECT_TRUE(*Get(second)) << "the first call had left: the counter reached 2 at the second";
}

TEST_F(Actors, AnotherDriversNamedActorIsReachableAndDiesWithItsDriver) {
  ChildProcess driver({AIRT_ACTOR_DRIVER_BIN, "shared-counter", "shared", "wait"},
                      dir_->File("driver-wait.log"));
  std::string pid =
      WaitForLine(dir_->File("driver-wait.log"), "actor pid ", 30s, &driver).value_or("");
  ASSERT_FALSE(pid.empty()) << ReadFile(dir_->File("driver-wait.log"));
  std::optional<ActorHandle<Counter>> shared = GetActor<Counter>("shared-counter", "shared");
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(*Get(shared->Task(&Counter::Add).Remote(1)), 101);

  driver.Kill(SIGKILL);  // no Shutdown: the head sees its connection drop
  driver.Wait(10s);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessRunning(std::stoi(pid)); }, 20s))
      << "the killed driver's actor still runs";
  EXPECT_THROW(Get(shared->Task(&Counter::Value).Remote(), 20'000), ActorDiedError);
  EXPECT_FALSE(GetActor<Counter>("shared-counter", "shared").has_value());
}

// The head restarts an actor, not its owner: the owner is stopped (SIGSTOP) while its actor's
// worker is killed, and the actor is back before the owner runs again. The owner then reaches the
// new incarnation; when the owner dies, the head stops the worker it restarted.
TEST_F(Actors, TheHeadRestartsALiveOwnersActorAndStopsItWhenTheOwnerDies) {
  std::string go = dir_->File("owner-may-call");
  std::string log = dir_->File("driver-follow.log");
  ChildProcess driver({AIRT_ACTOR_DRIVER_BIN, "followed", "owned", "follow", "1", go}, log);
  std::string first = WaitForLine(log, "actor pid ", 30s, &driver).value_or("");
  ASSERT_FALSE(first.empty()) << ReadFile(log);
  driver.Kill(SIGSTOP);
  ASSERT_EQ(::kill(std::stoi(first), SIGKILL), 0);
  // This process is another driver: it finds the actor back ALIVE on a new worker while the
  // owner cannot run.
  std::optional<ActorHandle<Counter>> followed = GetActor<Counter>("followed", "owned");
  ASSERT_TRUE(followed.has_value());
  EXPECT_EQ(AddOnceBack(*followed, 10), 110) << ReadFile(dir_->File("head.log"));
  int second = *Get(followed->Task(&Counter::Pid).Remote(), 20'000);
  EXPECT_NE(second, std::stoi(first));
  EXPECT_NE(ReadFile(dir_->File("head.log")).find("restarted by the head"), std::string::npos);

  driver.Kill(SIGCONT);
  { std::ofstream(go) << "go\n"; }
  std::string after = WaitForLine(log, "after restart ", 40s, &driver).value_or("");
  EXPECT_EQ(after, "111 pid " + std::to_string(second)) << ReadFile(log);

  driver.Kill(SIGKILL);  // its job ends: the actor shares its fate
  driver.Wait(10s);
  EXPECT_TRUE(WaitUntil([&] { return !ProcessRunning(second); }, 20s))
      << "the worker the head restarted outlived the actor's owner";
  EXPECT_TRUE(SoonDead(*followed, "exited"));
  EXPECT_FALSE(GetActor<Counter>("followed", "owned").has_value());
}

TEST_F(Actors, ADriversCleanExitStopsItsActors) {
  ChildProcess driver({AIRT_ACTOR_DRIVER_BIN, "leaving-counter", "shared", "exit"},
                      dir_->File("driver-exit.log"));
  std::string pid =
      WaitForLine(dir_->File("driver-exit.log"), "actor pid ", 30s, &driver).value_or("");
  ASSERT_FALSE(pid.empty()) << ReadFile(dir_->File("driver-exit.log"));
  EXPECT_EQ(driver.Wait(30s), 0) << ReadFile(dir_->File("driver-exit.log"));
  EXPECT_TRUE(WaitUntil([&] { return !ProcessRunning(std::stoi(pid)); }, 20s))
      << "the driver's actor outlived it";
}

TEST_F(Actors, ADetachedActorOutlivesItsDriverAndAnotherDriverFindsCallsAndKillsIt) {
  ChildProcess driver({AIRT_ACTOR_DRIVER_BIN, "keeper", "ns", "detached"},
                      dir_->File("driver-detached.log"));
  std::string pid =
      WaitForLine(dir_->File("driver-detached.log"), "actor pid ", 30s, &driver).value_or("");
  std::string job = WaitForLine(dir_->File("driver-detached.log"), "job ", 30s).value_or("");
  ASSERT_FALSE(pid.empty() || job.empty()) << ReadFile(dir_->File("driver-detached.log"));
  EXPECT_EQ(driver.Wait(30s), 0) << ReadFile(dir_->File("driver-detached.log"));
  // The node has ended the job (its other workers would be gone now) and kept the actor's.
  std::string kept = "job " + job + " finished; its 1 detached actors' workers keep running";
  ASSERT_TRUE(WaitUntil(
      [&] { return ReadFile(dir_->File("node.log")).find(kept) != std::string::npos; }, 20s))
      << ReadFile(dir_->File("node.log"));
  EXPECT_TRUE(ProcessRunning(std::stoi(pid)));

  // This process is another driver, of another job.
  std::optional<ActorHandle<Counter>> keeper = GetActor<Counter>("keeper", "ns");
  ASSERT_TRUE(keeper.has_value()) << "the head kept the detached actor when its job finished";
  EXPECT_EQ(*Get(keeper->Task(&Counter::Add).Remote(1), 20'000), 101);
  EXPECT_EQ(*Get(keeper->Task(&Counter::Pid).Remote()), std::stoi(pid));

  keeper->Kill();
  EXPECT_TRUE(WaitUntil([&] { return !ProcessRunning(std::stoi(pid)); }, 10s));
  EXPECT_FALSE(GetActor<Counter>("keeper", "ns").has_value());
  EXPECT_THROW(Get(keeper->Task(&Counter::Value).Remote(), 20'000), ActorDiedError);
}

// Starts actor_driver to create the detached Counter `name` (100) with `max_restarts` and exit;
// the pid of the actor's worker, 0 when that failed.
int DetachedActorOfAnExitedDriver(const TempDir& dir, const std::string& name, int max_restarts) {
  std::string log = dir.File("driver-" + name + ".log");
  ChildProcess driver({AIRT_ACTOR_DRIVER_BIN, name, "ns", "detached", std::to_string(max_restarts)},
                      log);
  std::string pid = WaitForLine(log, "actor pid ", 30s, &driver).value_or("");
  if (pid.empty() || driver.Wait(30s) != 0) {
    ADD_FAILURE() << ReadFile(log);
    return 0;
  }
  return std::stoi(pid);
}

TEST_F(Actors, ADetachedActorWhoseCreatorHasExitedIsRestartedByTheHeadWithinMaxRestarts) {
  int pid = DetachedActorOfAnExitedDriver(*dir_, "phoenix", 1);
  ASSERT_NE(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // Nobody holds it: the head sees its worker go and restarts it (the constructor runs again).
  ASSERT_TRUE(WaitUntil(
      [&] {
        return ReadFile(dir_->File("head.log")).find("restarted by the head") != std::string::npos;
      },
      60s))  // a lease and a new worker's start on a loaded machine
      << ReadFile(dir_->File("head.log"));
  // This process is a second driver: it finds the actor by name and calls it.
  std::optional<ActorHandle<Counter>> phoenix = GetActor<Counter>("phoenix", "ns");
  ASSERT_TRUE(phoenix.has_value());
  EXPECT_EQ(AddOnceBack(*phoenix, 1), 101);
  int second = *Get(phoenix->Task(&Counter::Pid).Remote(), 20'000);
  EXPECT_NE(second, pid);

  // Its one restart is spent: the next death is final, for this holder and for GetActor.
  ASSERT_EQ(::kill(second, SIGKILL), 0);
  EXPECT_TRUE(SoonDead(*phoenix, "may not restart (max_restarts=1, restarted 1 times)"));
  EXPECT_TRUE(WaitUntil([] { return !GetActor<Counter>("phoenix", "ns").has_value(); }, 20s))
      << "the directory has it DEAD too";
}

TEST_F(Actors, ADetachedActorWithoutRestartsWhoseCreatorHasExitedIsDeadWhenItsProcessDies) {
  int pid = DetachedActorOfAnExitedDriver(*dir_, "orphan", 0);
  ASSERT_NE(pid, 0);
  std::optional<ActorHandle<Counter>> orphan = GetActor<Counter>("orphan", "ns");
  ASSERT_TRUE(orphan.has_value());
  EXPECT_EQ(*Get(orphan->Task(&Counter::Add).Remote(1), 20'000), 101);

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  EXPECT_TRUE(SoonDead(*orphan, "may not restart (max_restarts=0"));
  EXPECT_TRUE(WaitUntil([] { return !GetActor<Counter>("orphan", "ns").has_value(); }, 20s))
      << "the directory has it DEAD too";
}

TEST_F(Actors, ADetachedActorMustBeNamed) {
  EXPECT_THROW(Actor(Counter::Create).SetDetached().Remote(1), Exception);
}

TEST_F(Actors, MaxTaskRetriesResendsTheCallsInFlightToTheRestartedActorInOrder) {
  ActorHandle<Counter> counter =
      Actor(Counter::Create).SetMaxRestarts(1).SetMaxTaskRetries(1).Remote(7);
  int first = *Get(counter.Task(&Counter::Pid).Remote());
  ObjectRef<int> dies = counter.Task(&Counter::ExitOnce).Remote(dir_->File("exit-once-retried"));
  ObjectRef<int> after = counter.Task(&Counter::Add).Remote(1);
  // The restarted actor (the constructor ran again: 7) ran ExitOnce before Add.
  EXPECT_EQ(*Get(dies, 30'000), 7);
  EXPECT_EQ(*Get(after, 30'000), 8);
  EXPECT_NE(*Get(counter.Task(&Counter::Pid).Remote()), first);
}

TEST_F(Actors, WithoutMaxTaskRetriesTheCallInFlightFailsButTheActorRestarts) {
  ActorHandle<Counter> counter = Actor(Counter::Create).SetMaxRestarts(1).Remote(7);
  EXPECT_THROW(
      Get(counter.Task(&Counter::ExitOnce).Remote(dir_->File("exit-once-not-retried")), 30'000),
      ActorUnavailableError);
  EXPECT_EQ(ValueOnceBack(counter), 7);
}

// Ray's ActorUnavailableError: the call in flight when the process is killed fails with it while
// the actor restarts; once no restart is left, with ActorDiedError.
TEST_F(Actors, ACallInFlightIsUnavailableWhileTheActorRestartsAndDeadOnceItCannot) {
  ActorHandle<Counter> counter = Actor(Counter::Create).SetMaxRestarts(1).Remote(3);
  int pid = *Get(counter.Task(&Counter::Pid).Remote());
  ObjectRef<int> busy = counter.Task(&Counter::SleepMs).Remote(60'000);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  try {
    Get(busy, 30'000);
    FAIL() << "expected an ActorUnavailableError";
  } catch (const ActorUnavailableError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("restarting"), std::string::npos) << what;
    EXPECT_NE(what.find("max_task_retries=0"), std::string::npos) << what;
  }
  EXPECT_EQ(ValueOnceBack(counter), 3);
  int second = *Get(counter.Task(&Counter::Pid).Remote());
  ASSERT_NE(second, pid);
  busy = counter.Task(&Counter::SleepMs).Remote(60'000);
  ASSERT_EQ(::kill(second, SIGKILL), 0);
  try {
    Get(busy, 30'000);
    FAIL() << "expected an ActorDiedError";
  } catch (const ActorDiedError& e) {
    EXPECT_NE(std::string(e.what()).find("max_restarts=1"), std::string::npos) << e.what();
  }
}

TEST_F(Actors, ResentCallsFailOnceTheActorCannotRestart) {
  ActorHandle<Counter> counter = Actor(Counter::Create).SetMaxTaskRetries(-1).Remote(7);
  try {
    Get(counter.Task(&Counter::ExitOnce).Remote(dir_->File("exit-once-no-restart")), 30'000);
    FAIL() << "expected an ActorDiedError";
  } catch (const ActorDiedError& e) {
    EXPECT_NE(std::string(e.what()).find("max_restarts=0"), std::string::npos) << e.what();
  }
}

TEST_F(Actors, AnActorNoNodeCanHoldDiesNamingItsShapeAndTheTotals) {
  ActorHandle<Counter> big = Actor(Counter::Create).SetResource("CPU", 64).Remote(0);
  try {
    Get(big.Task(&Counter::Value).Remote(), 20'000);
    FAIL() << "expected an ActorDiedError";
  } catch (const ActorDiedError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("no node can ever run {CPU: 64}: node "), std::string::npos) << what;
    EXPECT_NE(what.find(" has {CPU: 2"), std::string::npos) << what;
  }
}

TEST_F(Actors, HandlesTravelIntoTasksAndBackOut) {
  ActorHandle<Counter> counter = Actor(Counter::Create).Remote(100);
  EXPECT_EQ(*Get(Task(AddThroughHandle).Remote(counter, 5)), 105);
  EXPECT_EQ(*Get(counter.Task(&Counter::Value).Remote()), 105);
  ObjectRef<ActorHandle<Counter>> made = Task(MakeCounter).Remote(40);
  ActorHandle<Counter> inner = *Get(made);
  EXPECT_EQ(*Get(inner.Task(&Counter::Add).Remote(2)), 42);
}

TEST_F(Actors, TasksSubmitTasksAndBlockingGetsGiveBackTheirCpu) {
  // Three tasks of {CPU: 1} on a node of 2 CPUs, each waiting in Get for 4 tasks of its own: only
  // a worker that gives its CPU back while it waits lets the inner tasks run.
  std::vector<ObjectRef<int>> outer;
  for (int i = 0; i < 3; ++i) outer.push_back(Task(SumOfSubtasks).Remote(4));
  for (auto& sum : outer) EXPECT_EQ(*Get(sum, 60'000), 12);
}

TEST_F(Actors, RayNamesWork) {
  ray::ActorHandle<Counter> counter = ray::Actor(Counter::Create).Remote(3);
  EXPECT_EQ(*ray::Get(counter.Task(&Counter::Add).Remote(4)), 7);
  counter.Kill();
  EXPECT_THROW(ray::Get(counter.Task(&Counter::Value).Remote()), ray::internal::RayActorException);
}

}  // namespace
}  // namespace airt
