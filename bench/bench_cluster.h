// What the cluster benchmarks (microbenchmark, fetch_bench) share: the flags that name the
// programs they start, and a loopback cluster of airt-head and airt-nodes in a scratch folder,
// each daemon's log beside it, every process stopped by pid when the cluster goes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_support.h"
#include "common/flags.h"
#include "common/status.h"

namespace airt::bench {

// The programs a cluster benchmark starts (defaults: this build tree's) and --quick.
struct ClusterFlags {
  ClusterFlags();
  std::string head_binary;
  std::string node_binary;
  std::string worker_binary;
  std::string functions;  // the library the workers load (--worker-code-search-path)
  bool quick = false;
};

// Parses --head-binary, --node-binary, --worker-binary, --functions (`functions_help` says what
// the benchmark's workers load from it), --quick (`quick_help`) and what `more` adds into `out`.
// An exit code when the program should end now (--help: 0, after the usage; a bad flag: 2,
// after the message and the usage), else none.
std::optional<int> ParseClusterFlags(const std::string& program, int argc, char** argv,
                                     const std::string& functions_help,
                                     const std::string& quick_help, ClusterFlags* out,
                                     const std::function<void(FlagSet&)>& more = nullptr);

// airt-head and airt-nodes on loopback in a scratch folder, stopped (nodes first, in the order
// they were started, then the head) and the folder removed when this goes.
class LocalCluster {
 public:
  explicit LocalCluster(ClusterFlags flags);
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Starts airt-head --port=0 and waits for it; its host:port.
  Result<std::string> StartHead(std::chrono::seconds timeout = std::chrono::seconds(30));
  // Starts an airt-node of the head named `name` (its --temp-dir and log `name`.log in the
  // scratch folder), whose workers load the flags' functions, with `flags`; does not wait.
  void StartNode(const std::string& name, const std::vector<std::string>& flags);
  // Waits until node `name` is ready and its store has populated its arena; its store socket.
  Result<std::string> WaitForNode(const std::string& name,
                                  std::chrono::seconds timeout = std::chrono::seconds(30));
  // The last `bytes` of daemon `name`'s log ("head" or a node's name); "" when it has none.
  std::string LogTail(const std::string& name, size_t bytes) const;
  const std::string& dir() const { return dir_.path(); }

 private:
  ClusterFlags flags_;
  ScratchDir dir_;  // removed last, once the daemons below have stopped
  std::unique_ptr<DaemonProcess> head_;
  std::string address_;
  std::vector<std::pair<std::string, std::unique_ptr<DaemonProcess>>> nodes_;
};

}  // namespace airt::bench
