// Starting a daemon and waiting for its ready line (common/daemon_process.h), with /bin/sh
// scripts as the daemons.
#include "common/daemon_process.h"

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "tests/testing/test_support.h"

namespace airt {
namespace {

using airt::testing::TempDir;
using namespace std::chrono_literals;

DaemonCommand Shell(const TempDir& dir, const std::string& script) {
  return DaemonCommand{
      {"/bin/sh", "-c", script}, dir.File("logs/daemon.out"), DaemonLifetime::kStarterThread};
}

TEST(DaemonProcess, WaitForReadyLineReturnsTheRestOfTheLine) {
  TempDir dir;
  DaemonCommand command =
      Shell(dir, "echo starting; echo 'head ready 127.0.0.1:4321'; exec sleep 60");
  Result<pid_t> pid = StartDaemon(command);  // the log's folder is made
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  Result<std::string> ready = WaitForReadyLine(command, *pid, "head ready ", 10s);
  ASSERT_TRUE(ready.ok()) << ready.status().ToString();
  EXPECT_EQ(*ready, "127.0.0.1:4321");
  EXPECT_TRUE(StopChild(*pid, std::chrono::steady_clock::now() + 10s));  // SIGTERM was enough
  EXPECT_NE(::kill(*pid, 0), 0);                                         // and it was reaped
}

TEST(DaemonProcess, WaitForReadyLineSaysTheDaemonExitedWithTheLogsLastLines) {
  TempDir dir;
  DaemonCommand command = Shell(dir, "echo 'airt-node: --num-cpus: bad' >&2; exit 2");
  Result<pid_t> pid = StartDaemon(command);
  ASSERT_TRUE(pid.ok());
  Result<std::string> ready = WaitForReadyLine(command, *pid, "node ready ", 10s);
  EXPECT_EQ(ready.status().code(), Code::kUnavailable);
  EXPECT_NE(ready.status().message().find("exit 2"), std::string::npos) << ready.status().message();
  EXPECT_NE(ready.status().message().find("--num-cpus: bad"), std::string::npos);
  EXPECT_NE(ready.status().message().find(command.log_path), std::string::npos);
}

TEST(DaemonProcess, WaitForReadyLineGivesUpAtTheDeadlineNamingTheLog) {
  TempDir dir;
  DaemonCommand command = Shell(dir, "trap '' TERM; exec sleep 60");  // ignores SIGTERM too
  Result<pid_t> pid = StartDaemon(command);
  ASSERT_TRUE(pid.ok());
  Result<std::string> ready = WaitForReadyLine(command, *pid, "head ready ", 100ms);
  EXPECT_EQ(ready.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(ready.status().message().find(command.log_path), std::string::npos);
  EXPECT_FALSE(StopChild(*pid, std::chrono::steady_clock::now() + 200ms));  // needed SIGKILL
  EXPECT_NE(::kill(*pid, 0), 0);
}

TEST(DaemonProcess, FindDaemonBinaryNamesEveryPlaceLooked) {
  TempDir dir;
  Result<std::string> found = FindDaemonBinary("airt-head", {dir.path(), dir.File("other")});
  EXPECT_EQ(found.status().code(), Code::kNotFound);
  EXPECT_NE(found.status().message().find(dir.path() + ", " + dir.File("other")), std::string::npos)
      << found.status().message();
  EXPECT_NE(found.status().message().find("AIRT_BIN_DIR"), std::string::npos);
  // A plain file that is not executable does not count.
  std::filesystem::create_directories(dir.File("other"));
  std::ofstream(dir.File("other/airt-head")) << "#!/bin/sh\n";
  EXPECT_FALSE(FindDaemonBinary("airt-head", {dir.File("other")}).ok());
  std::filesystem::permissions(dir.File("other/airt-head"), std::filesystem::perms::owner_exec,
                               std::filesystem::perm_options::add);
  EXPECT_EQ(*FindDaemonBinary("airt-head", {dir.path(), dir.File("other")}),
            dir.File("other/airt-head"));
}

TEST(DaemonProcess, SearchDirsStartWithAirtBinDirThenTheProgramsFolderAndItsSiblings) {
  ::setenv("AIRT_BIN_DIR", "/opt/airt/bin/", 1);
  std::vector<std::string> dirs = DaemonSearchDirs({});
  ::unsetenv("AIRT_BIN_DIR");
  ASSERT_GE(dirs.size(), 4u);
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  EXPECT_EQ(dirs[0], "/opt/airt/bin");
  EXPECT_EQ(dirs[1], self.string());
  EXPECT_EQ(dirs[2], (self.parent_path() / "head").string());
  EXPECT_EQ(dirs[3], (self.parent_path() / "worker").string());
}

}  // namespace
}  // namespace airt
