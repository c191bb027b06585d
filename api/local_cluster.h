// The cluster a driver starts for itself when Init is given no address, as ray.init() does: an
// airt-head and one airt-node on 127.0.0.1, on free ports, with a temp folder of their own.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "common/status.h"

namespace airt {

struct LocalClusterOptions {
  std::optional<int> num_cpus;              // the node's CPUs; unset: this machine's
  std::optional<int> num_gpus;              // the node's GPUs; unset: those the node detects
  std::map<std::string, double> resources;  // the node's custom resources
  // DIR[:DIR...] (or library files) whose AIRT_REMOTE functions workers load; empty: the folder
  // of the running executable, as Ray's C++ driver does.
  std::string code_search_path;
  std::optional<uint64_t> object_store_memory;  // bytes; unset: the node's default
};

// Applies Ray's `ray start` flags (Config::head_args) to `options`: --num-cpus=N, --num-gpus=N,
// --resources=JSON (an object of numbers; single quotes around it are dropped, as a shell would),
// --object-store-memory=BYTES; each as "--flag=value" or as "--flag" and "value". Later flags win.
// kInvalidArgument names a flag airt does not take (and the ones it does) or a bad value.
Status ApplyHeadArgs(const std::vector<std::string>& args, LocalClusterOptions* options);

// Owns the daemons it started. They are stopped when it is destroyed (in the process that started
// them: not in a fork of it), and killed by the kernel (PR_SET_PDEATHSIG) when the process dies
// without destroying it; they fork from a thread the LocalCluster owns, so the thread that called
// Start may end first.
class LocalCluster {
 public:
  // Finds airt-head and airt-node (FindDaemonBinary over DaemonSearchDirs), makes a folder under
  // $TMPDIR (else /tmp), starts the head, then the node, and waits until both are ready.
  // kInvalidArgument: a negative count or a resource amount that is not finite. kNotFound: a
  // binary is missing (the message names every place looked). kUnavailable, kDeadlineExceeded: a
  // daemon did not start; the message names its log, and the folder is kept for reading it.
  static Result<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  // Stops the node, then the head (SIGTERM; SIGKILL after a 10 s grace), reaps both, and removes
  // the folder.
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  const std::string& head_address() const { return head_address_; }  // 127.0.0.1:PORT
  const std::string& temp_dir() const { return temp_dir_; }  // logs/ holds the daemons' output
  const std::vector<pid_t>& pids() const { return pids_; }   // the head's, then the node's

 private:
  class StarterThread;

  explicit LocalCluster(std::string temp_dir);
  // Starts `argv` (its output in logs/<name>.out) and waits for its ready line; the rest of it.
  Result<std::string> Launch(const std::string& name, std::vector<std::string> argv,
                             const std::string& ready_prefix);

  std::string temp_dir_;
  std::string head_address_;
  std::vector<pid_t> pids_;
  pid_t owner_;  // the process that started them: a fork of it leaves them alone
  bool keep_temp_dir_ = false;
  std::unique_ptr<StarterThread> starter_;
};

}  // namespace airt
