// The processes `airt start` launched on this machine, recorded under the temp folder so that
// `airt status` finds the head and `airt stop` stops exactly what was started:
//   <temp>/session/head_address   "host:port" of the head started here
//   <temp>/session/pids/<name>.pid  one per daemon: its pid and the binary it runs
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "common/status.h"

namespace airt::cli {

struct Daemon {
  std::string name;  // "head", "node-<id prefix>"
  pid_t pid = -1;
  std::string binary;  // the path it was started from
};

class Session {
 public:
  explicit Session(std::string temp_dir) : dir_(std::move(temp_dir) + "/session") {}

  // Starts `argv` detached (its own session, stdout and stderr to `log_path`), records it as
  // `name`, and waits for a stdout line starting with `ready_prefix`; returns the rest of that
  // line. kDeadlineExceeded or kUnavailable (it exited) name the log file to read.
  Result<std::string> Launch(const std::string& name, const std::vector<std::string>& argv,
                             const std::string& log_path, const std::string& ready_prefix,
                             std::chrono::seconds timeout);

  Status SaveHeadAddress(const std::string& address);
  std::optional<std::string> HeadAddress() const;

  std::vector<Daemon> Daemons() const;
  // SIGTERM to each recorded daemon that is still the process we started (checked through
  // /proc/<pid>/exe, so a reused pid is never signalled), SIGKILL after `grace`; forgets them.
  // Returns how many were running.
  int StopAll(std::chrono::seconds grace);

 private:
  std::string dir_;
};

}  // namespace airt::cli
