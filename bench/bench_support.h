// What every benchmark needs: an airt-store daemon in its own process, a scratch folder, a
// connection that waits for the daemon, and timing helpers.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "common/status.h"
#include "objectstore/object_store.h"

namespace airt::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Prints "<program>: <what>: <status>" and exits 1. Benchmarks stop at the first failure.
[[noreturn]] void Die(const Status& status, const std::string& what);

// The airt-store next to this binary in the build tree (build/objectstore/airt-store).
std::string DefaultStoreBinary();

// A folder under /tmp, removed with its contents on destruction.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// An airt-store daemon started with `args`; its stdout is read through a pipe. Stopped with
// SIGTERM on destruction, and killed by the kernel if the benchmark dies first.
class StoreProcess {
 public:
  StoreProcess(const std::string& binary, const std::vector<std::string>& args);
  ~StoreProcess();
  StoreProcess(const StoreProcess&) = delete;
  StoreProcess& operator=(const StoreProcess&) = delete;

  // The rest of the first stdout line starting with `prefix` ("transfer " -> "127.0.0.1:4321").
  Result<std::string> WaitForLine(const std::string& prefix, std::chrono::seconds timeout);

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffered_;
};

// Connects to the store at `socket`, retrying while it starts.
std::unique_ptr<objectstore::StoreClient> ConnectWithRetry(const std::string& socket,
                                                           std::chrono::seconds timeout);

}  // namespace airt::bench
