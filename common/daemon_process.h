// Starting airt-head and airt-node from another process (the `airt` command, a driver's Init) and
// waiting for the line each prints once it serves: "head ready HOST:PORT", "node ready <id>".
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "common/status.h"

namespace airt {

// Where airt-head and airt-node are looked for, in order: $AIRT_BIN_DIR; the running executable's
// folder; the folder of the executable or library holding each of `code` (addresses of functions,
// found with dladdr); each of those folders' build-tree siblings ../head and ../worker; their
// sibling ../bin (an install's lib/ -> bin/); then the folders of $PATH. Without duplicates.
std::vector<std::string> DaemonSearchDirs(std::initializer_list<const void*> code);

// The first `name` in `dirs` that is an executable file. kNotFound names every place looked.
Result<std::string> FindDaemonBinary(const std::string& name, const std::vector<std::string>& dirs);

// How long a started daemon lives.
enum class DaemonLifetime : uint8_t {
  // A session of its own: outlives the process that started it (`airt start`).
  kDetached,
  // A process group of its own, killed (SIGKILL) when the thread that started it exits
  // (PR_SET_PDEATHSIG): a cluster that dies with its driver.
  kStarterThread,
};

struct DaemonCommand {
  std::vector<std::string> argv;  // argv[0]: the binary's path
  std::string log_path;           // stdout and stderr, truncated; its folder is made
  DaemonLifetime lifetime = DaemonLifetime::kDetached;
};

// fork + exec, stdin from /dev/null, an empty signal mask, no descriptor of this process but
// 0-2. Only async-signal-safe calls run between fork and exec, so any thread may call it. The
// child's pid; the errno's Status when the log cannot be opened or fork fails. A child that cannot
// exec exits 127 (WaitForReadyLine then says so).
Result<pid_t> StartDaemon(const DaemonCommand& command);

// Waits until `pid`, a child of this process started from `command`, has written a line starting
// with `ready_prefix` to its log; the rest of that line. kUnavailable when it exits first (it is
// then reaped), with the log's last lines; kDeadlineExceeded naming the log after `timeout` (it
// is left running).
Result<std::string> WaitForReadyLine(const DaemonCommand& command, pid_t pid,
                                     std::string_view ready_prefix,
                                     std::chrono::milliseconds timeout);

// Sends SIGTERM to `pid`, a child of this process not yet reaped (so its pid cannot have been
// reused), waits for it until `deadline`, then sends SIGKILL; reaps it. True when it exited before
// the SIGKILL.
bool StopChild(pid_t pid, std::chrono::steady_clock::time_point deadline);

}  // namespace airt
