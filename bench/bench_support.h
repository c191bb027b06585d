// What every benchmark needs: an airt-store daemon in its own process, a scratch folder, a
// connection that waits for the daemon, timing helpers, and the raw TCP baseline of transfers.
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

// The contents of a file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);

// A daemon (airt-store, airt-head, airt-node) started with `argv`, its stdout and stderr
// appended to `log`. Killed by the kernel if the benchmark dies first; on destruction stopped by
// pid with SIGTERM, then SIGKILL after 10 s.
class DaemonProcess {
 public:
  DaemonProcess(std::vector<std::string> argv, std::string log);
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  // The rest of the first line of the log starting with `prefix` ("head ready " -> host:port).
  // kDeadlineExceeded after `timeout`; kUnavailable when the daemon exited first. Both messages
  // carry the log's last lines.
  Result<std::string> WaitForLine(const std::string& prefix, std::chrono::seconds timeout);

 private:
  std::string log_;
  pid_t pid_ = -1;
};

// Connects to the store at `socket`, retrying while it starts.
std::unique_ptr<objectstore::StoreClient> ConnectWithRetry(const std::string& socket,
                                                           std::chrono::seconds timeout);

// The store socket of the airt-node whose --temp-dir is `temp_dir` (its node-<id>/store.sock).
// kNotFound when no node folder there has one.
Result<std::string> NodeStoreSocket(const std::string& temp_dir);

// Waits until the store at `socket` has populated its arena (its background prefault costs
// seconds of kernel time for GiBs, which would otherwise compete with what is measured).
Status WaitForWarmStore(const std::string& socket);

// The baseline of a cross-node pull: copies `size` bytes `reps` times over loopback TCP from a
// child process's touched buffer into this process's touched buffer, one connection per copy (as
// a pull does). Returns GB/s (1e9 bytes) over the receiving side's time. kUnavailable when a
// socket call fails or the child dies; the child is always reaped.
Result<double> RawTcpCopyGbps(uint64_t size, int reps);

}  // namespace airt::bench
