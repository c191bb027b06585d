// A lease's owner dying, end to end: a real airt-head, an airt-node with two CPUs starting real
// airt-worker processes, and this test as the driver. A task submits a long subtask (on a lease
// its worker holds) and the test SIGKILLs that worker: the node sees the lease's holder dropped
// with the dead process's connection, returns the lease and stops the subtask's worker, so the
// node's CPUs serve the same job again without the job ending.
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/task_cluster.h"

int Add(int a, int b);
int SubmitThenSleepMs(std::string child_marker, int child_ms, std::string marker, int ms);

namespace airt {
namespace {

using namespace std::chrono_literals;
using airt::testing::ReadFile;
using airt::testing::WaitUntil;


// The pid a marker holds, once it is there (0 if not within 30 s).
pid_t PidIn(const std::string& marker) {
  if (!WaitUntil([&] { return std::filesystem::exists(marker); }, 30s)) return 0;
  return static_cast<pid_t>(std::stol(ReadFile(marker)));
}

TEST(LeaseOwner, TheLeasesOfAKilledWorkerComeBackWhileItsJobGoesOn) {
  e2e::TaskCluster cluster({"--num-cpus=2"});
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  std::string parent_marker = cluster.dir().File("parent");
  std::string child_marker = cluster.dir().File("child");
  constexpr int kLong = 600000;  // ten minutes: only a reclaimed lease frees its CPU in time

  ObjectRef<int> parent =
      Task(SubmitThenSleepMs).SetMaxRetries(0).Remote(child_marker, kLong, parent_marker, kLong);
  pid_t parent_pid = PidIn(parent_marker);
  pid_t child_pid = PidIn(child_marker);
  ASSERT_NE(parent_pid, 0) << "the parent task never started\n" << cluster.NodeLog();
  ASSERT_NE(child_pid, 0) << "its subtask never started\n" << cluster.NodeLog();
  ASSERT_NE(parent_pid, child_pid);

  ASSERT_EQ(::kill(parent_pid, SIGKILL), 0);
  EXPECT_THROW(Get(parent, 60000), WorkerCrashedError);

  // Both CPUs are free again: the subtask's lease went back when its holder's process died.
  EXPECT_EQ(*Get(Task(Add).SetResource("CPU", 2).Remote(1, 2), 30000), 3) << cluster.NodeLog();
  EXPECT_TRUE(WaitUntil([&] { return airt::testing::ProcessGone(child_pid); }, 30s))
      << "the subtask's worker, mid-task for a dead owner, is stopped";
}

}  // namespace
}  // namespace airt
