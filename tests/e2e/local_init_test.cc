// airt::Init() with no address starts a local cluster, as ray.init() does: a driver process
// (local_init_driver) runs tasks on the head and node its Init started, and nothing it started
// (airt-head, airt-node, their workers) outlives it: not after Shutdown, not after a plain exit,
// not after SIGKILL. The test is the subreaper of what the driver leaves, so an orphan would
// come back to it instead of to the container's init, which does not reap.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "tests/testing/test_support.h"

namespace airt {
namespace {

namespace fs = std::filesystem;
using airt::testing::ChildProcess;
using airt::testing::ReadFile;
using airt::testing::TempDir;
using airt::testing::WaitForLine;
using airt::testing::WaitUntil;
using namespace std::chrono_literals;


// The file name of the binary `pid` runs; "" when it is gone (or a zombie).
std::string BinaryOf(pid_t pid) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec);
  return ec ? "" : exe.filename().string();
}

// The processes below `root`, as pid -> binary name.
std::map<pid_t, std::string> Descendants(pid_t root) {
  std::map<pid_t, pid_t> parents;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = std::stoi(name);
    parents[pid] = airt::testing::ParentPid(pid);
  }
  std::map<pid_t, std::string> below;
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [pid, parent] : parents) {
      if (below.count(pid) == 0 && (parent == root || below.count(parent) > 0)) {
        below[pid] = BinaryOf(pid);
        grew = true;
      }
    }
  }
  return below;
}

size_t CountOf(const std::map<pid_t, std::string>& processes, const std::string& binary) {
  size_t n = 0;
  for (const auto& [pid, name] : processes) n += name == binary ? 1 : 0;
  return n;
}

class LocalInit : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("AIRT_ADDRESS");  // the driver inherits the environment: no address anywhere
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- driver output ----\n" << ReadFile(dir_.File("driver.log"));
  }

  // Waits until none of `processes` exists, reaping those that were orphaned to this test.
  // Returns those still there after `timeout`; *reaped_here counts the ones this test reaped.
  static std::map<pid_t, std::string> WaitAllGone(std::map<pid_t, std::string> processes,
                                                  std::chrono::milliseconds timeout,
                                                  int* reaped_here) {
    WaitUntil(
        [&] {
          for (auto it = processes.begin(); it != processes.end();) {
            bool reaped = ::waitpid(it->first, nullptr, WNOHANG) == it->first;
            *reaped_here += reaped ? 1 : 0;
            bool gone = reaped || (::kill(it->first, 0) != 0 && errno == ESRCH);
            it = gone ? processes.erase(it) : std::next(it);
          }
          return processes.empty();
        },
        timeout);
    return processes;
  }

  // The session folders the driver's Init made under its TMPDIR.
  std::vector<std::string> SessionFolders() const {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_.File("tmp"), ec)) {
      if (entry.path().filename().string().rfind("airt-session-", 0) == 0) {
        found.push_back(entry.path().string());
      }
    }
    return found;
  }

  // Runs the driver in `mode` (shutdown or exit) to its end and checks what it printed and that
  // everything it started is gone, reaped by the driver itself.
  void RunDriverToTheEnd(const std::string& mode) {
    fs::create_directories(dir_.File("tmp"));
    std::string marker = dir_.File("driver.done");
    ChildProcess driver({AIRT_LOCAL_INIT_DRIVER_BIN, mode, dir_.File("tmp"), marker,
                         "--airt_code_search_path=" + std::string(AIRT_TASK_FUNCTIONS)},
                        dir_.File("driver.log"));
    ASSERT_TRUE(WaitForLine(dir_.File("driver.log"), "waiting", 120s, &driver));
    std::string out = ReadFile(dir_.File("driver.log"));
    EXPECT_NE(out.find("add 5\n"), std::string::npos);
    EXPECT_NE(out.find("sum ok\n"), std::string::npos);
    EXPECT_NE(out.find("slot 2\n"), std::string::npos);  // Config::resources reached the node
    EXPECT_NE(out.find("gpu 0\n"), std::string::npos);   // Config::num_gpus = 1
    std::map<pid_t, std::string> started = Descendants(driver.pid());
    EXPECT_EQ(CountOf(started, "airt-head"), 1u);
    EXPECT_EQ(CountOf(started, "airt-node"), 1u);
    EXPECT_GE(CountOf(started, "airt-worker"), 1u);
    ASSERT_EQ(SessionFolders().size(), 1u);
    fs::path session = SessionFolders()[0];
    EXPECT_NE(ReadFile((session / "logs" / "node.out").string()).find("node ready "),
              std::string::npos);

    std::ofstream(marker).put('\n');
    EXPECT_EQ(driver.Wait(60s), 0);
    int reaped_here = 0;
    std::map<pid_t, std::string> left = WaitAllGone(started, 30s, &reaped_here);
    for (const auto& [pid, name] : left) ADD_FAILURE() << name << " (pid " << pid << ") is left";
    EXPECT_EQ(reaped_here, 0) << "the driver did not wait for what it started";
    EXPECT_TRUE(SessionFolders().empty()) << "the session folder is left behind";
  }

  TempDir dir_;
};

TEST_F(LocalInit, InitWithoutAddressStartsAClusterThatShutdownStops) {
  RunDriverToTheEnd("shutdown");
  EXPECT_NE(ReadFile(dir_.File("driver.log")).find("shut down\n"), std::string::npos);
}

// Init runs on a thread that ends before the tasks: the daemons die with the process, not with
// the thread that started them.
TEST_F(LocalInit, ExitWithoutShutdownStopsTheLocalClusterInitStartedOnAnEndedThread) {
  RunDriverToTheEnd("exit");
}

TEST_F(LocalInit, KilledDriverLeavesNoDaemonBehind) {
  fs::create_directories(dir_.File("tmp"));
  ChildProcess driver({AIRT_LOCAL_INIT_DRIVER_BIN, "hang", dir_.File("tmp")},
                      dir_.File("driver.log"));
  // The default code search path (the driver's folder) holds the task's library.
  ASSERT_TRUE(WaitForLine(dir_.File("driver.log"), "submitted", 60s, &driver));
  std::map<pid_t, std::string> started;
  bool running = WaitUntil(
      [&] {
        started = Descendants(driver.pid());
        return CountOf(started, "airt-worker") >= 1;
      },
      60s);
  ASSERT_TRUE(running) << "no worker runs the task";
  EXPECT_EQ(CountOf(started, "airt-head"), 1u);
  EXPECT_EQ(CountOf(started, "airt-node"), 1u);

  driver.Kill(SIGKILL);
  EXPECT_EQ(driver.Wait(10s), 128 + SIGKILL);
  int reaped_here = 0;
  std::map<pid_t, std::string> left = WaitAllGone(started, 30s, &reaped_here);
  for (const auto& [pid, name] : left) ADD_FAILURE() << name << " (pid " << pid << ") is left";
}

}  // namespace
}  // namespace airt
