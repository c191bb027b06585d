// The node's child processes: starting a worker binary (ProcessLauncher) and learning when a
// child exits (ChildReaper). Both belong to the node's event loop thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <kj/async-io.h>
#include <kj/timer.h>
#include <sys/types.h>

#include "common/status.h"

namespace airt::worker {

// What to run: `binary` with `args` (argv[1..]), the node's environment with `env` set on top,
// stdout and stderr appended to `log_path`.
struct ChildCommand {
  std::string binary;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string log_path;
};

// Starts child processes. One method, so tests can inject a launcher that fails.
class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // The child's pid. kFailedPrecondition naming the binary when it is not an executable file;
  // the errno's Status when the log cannot be opened or fork fails. A child that then fails to
  // exec writes why to its log and exits 127.
  virtual Result<pid_t> Launch(const ChildCommand& command) = 0;
};

// fork + exec. The child gets an empty signal mask and default SIGPIPE/SIGCHLD handling (the
// node blocks its stop signals and SIGCHLD in every thread, and a mask survives exec), and is
// killed if the thread that started it exits (PR_SET_PDEATHSIG), so a node that dies leaves no
// workers behind. Only async-signal-safe calls run between fork and exec.
class ForkExecLauncher final : public ProcessLauncher {
 public:
  Result<pid_t> Launch(const ChildCommand& command) override;
};

// "exited with code 3", "was killed by signal 9 (Killed)": a wait(2) status for logs and errors.
std::string DescribeWaitStatus(int status);

// Reaps the children it is told about, and only those (waitpid by pid, never -1, so a test's own
// children are left alone), on a signalfd for SIGCHLD, which the caller has blocked in every
// thread before starting any. A sweep every `sweep_interval` catches an exit whose SIGCHLD went
// to a thread that had not blocked it. Event-loop confined.
class ChildReaper {
 public:
  using OnExit = std::function<void(int wait_status)>;

  // kInternal when the signalfd cannot be made. Logs a warning when SIGCHLD is not blocked in
  // the calling thread (exits are then seen only by the sweep).
  static Result<std::unique_ptr<ChildReaper>> Open(kj::LowLevelAsyncIoProvider& io,
                                                   kj::Timer& timer,
                                                   kj::Duration sweep_interval = kj::SECONDS);
  ~ChildReaper();
  ChildReaper(const ChildReaper&) = delete;
  ChildReaper& operator=(const ChildReaper&) = delete;

  // Calls `on_exit` once `pid` (a child of this process) has exited and been reaped: right after
  // waitpid, in the same turn, so the pid is never used after it may have been reused. `on_exit`
  // may call Watch and Forget.
  void Watch(pid_t pid, OnExit on_exit);
  // Stops watching `pid` without reaping it.
  void Forget(pid_t pid);
  size_t watched() const { return watched_.size(); }

 private:
  ChildReaper(kj::Own<kj::AsyncInputStream> signals, kj::Timer& timer, kj::Duration sweep);
  kj::Promise<void> Loop();
  void ReapExited();

  kj::Own<kj::AsyncInputStream> signals_;
  kj::Timer& timer_;
  kj::Duration sweep_;
  std::map<pid_t, OnExit> watched_;
  char buffer_[128];                 // one signalfd_siginfo
  kj::Promise<void> run_ = nullptr;  // last: cancelled first
};

}  // namespace airt::worker
