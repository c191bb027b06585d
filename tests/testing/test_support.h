// Helpers for airt's tests: a private temp folder, child processes that are always killed by pid,
// and waiting for a condition with a deadline (never a fixed sleep).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace airt::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A child process started from argv (argv[0] is a path). Killed with SIGKILL and reaped on
// destruction if still running, and killed by the kernel if the test process dies first
// (PR_SET_PDEATHSIG), so a failing or killed test never leaves it behind. Its stdout and stderr
// go to `log_path` when given, else are inherited.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, std::string log_path = "");
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  void Kill(int signal);
  // Waits for the exit; the exit code (128 + signal for a killed child), or -1 at the timeout.
  int Wait(std::chrono::milliseconds timeout);
  bool Running();

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

// Polls `condition` until it holds or `timeout` passes; returns whether it held.
bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// The contents of a file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);

// Whether process `pid` runs: it exists and is not a zombie (exited, not reaped yet).
bool ProcessRunning(pid_t pid);
// Whether process `pid` is gone: it exited and was reaped (no such process).
bool ProcessGone(pid_t pid);
// The parent of process `pid` (from /proc/<pid>/stat); -1 when it is gone.
pid_t ParentPid(pid_t pid);

// The rest of the first complete line of `text` that starts with `prefix`; nullopt when none.
std::optional<std::string> LineAfter(std::string_view text, std::string_view prefix);

// Waits for a daemon's ready line ("head ready 127.0.0.1:4321") in the log file at `path`:
// the rest of the first complete line starting with `prefix`. nullopt when none came within
// `timeout`, or when `process` (if given) exited first.
std::optional<std::string> WaitForLine(const std::string& path, std::string_view prefix,
                                       std::chrono::milliseconds timeout,
                                       ChildProcess* process = nullptr);

}  // namespace airt::testing
