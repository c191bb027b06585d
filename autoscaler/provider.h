// Node providers (docs/autoscaler.md "Providers"): how the autoscaler gets and gives back nodes.
// A provider starts a node that runs airt-node joined to the head, labelled with its launch id
// (airt.io/launch-id) and node type (airt.io/node-type), so that the autoscaler knows the node
// when it registers; it tells what became of each launch; it stops a node. Implementations:
// LocalProvider (processes on this machine), SlurmProvider (a Slurm job per node) and
// FaultProvider (wraps another, injecting failures, for tests). Called on the autoscaler's
// thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autoscaler/config.h"
#include "common/status.h"

namespace airt::autoscaler {

inline constexpr const char* kLaunchIdLabel = "airt.io/launch-id";
inline constexpr const char* kNodeTypeLabel = "airt.io/node-type";

// What every launch needs besides its node type.
struct LaunchContext {
  std::string head_address;     // "host:port"
  std::string node_binary;      // airt-node's path
  std::string temp_dir;         // the cluster's folder; a node's logs go under <temp_dir>/logs
  std::string node_address = "127.0.0.1";
  std::vector<std::string> extra_node_args;  // e.g. --python-executable=...
};

// What a provider knows of one launch.
struct InstanceState {
  enum class Phase { kStarting, kRunning, kFailed, kGone };
  std::string id;  // the launch id
  Phase phase = Phase::kStarting;
  std::string error;  // kFailed: the provider's words (a process's exit, Slurm's reason)
};

class NodeProvider {
 public:
  virtual ~NodeProvider() = default;
  // Starts one node of `type` (asynchronously: it registers with the head later) under
  // `launch_id`. An error when it could not even be started (the launch failed).
  virtual Status Launch(const NodeTypeConfig& type, const std::string& launch_id) = 0;
  // Stops that node; ok when it is gone already. kNotFound for an unknown id.
  virtual Status Terminate(const std::string& launch_id) = 0;
  // The state of every launch not yet terminated.
  virtual std::vector<InstanceState> Poll() = 0;
};

// The airt-node command line for a node of `type` under `launch_id`: --head-address, its
// resources (--num-cpus, --num-gpus, --memory, --resources for custom ones), its labels plus the
// launch id and type, --temp-dir and the context's extra arguments.
std::vector<std::string> NodeCommand(const LaunchContext& context, const NodeTypeConfig& type,
                                     const std::string& launch_id);

// Processes on this machine, each in its own session; stopped by pid (SIGTERM at Terminate, reaped
// by later polls, SIGKILL after `grace_ms`; the destructor waits for them). A process that exits
// by itself is kFailed with its exit status.
std::unique_ptr<NodeProvider> MakeLocalProvider(LaunchContext context, int64_t grace_ms = 5000);

// Faults injected into `inner`'s launches, by provider options (docs/autoscaler.md):
// fail_launches N (the first N launches fail), launch_delay_ms D (a launch is started D ms after
// it was asked: slow), die_after_ms T (each of the first die_launches N nodes is killed T ms after
// its start). Time comes from `now_ms` (a clock, in ms).
struct FaultOptions {
  uint32_t fail_launches = 0;
  int64_t launch_delay_ms = 0;
  int64_t die_after_ms = 0;
  uint32_t die_launches = 0;
};
Result<FaultOptions> ParseFaultOptions(const std::map<std::string, std::string>& options);
std::unique_ptr<NodeProvider> MakeFaultProvider(std::unique_ptr<NodeProvider> inner,
                                                FaultOptions faults, int64_t (*now_ms)());

// Runs a command and returns its exit status and stdout: the Slurm provider's seam (the real one
// runs the binary; tests give a double of sbatch, squeue and scancel).
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  struct Output {
    int exit_status = 0;
    std::string out;  // stdout and stderr together
  };
  virtual Result<Output> Run(const std::vector<std::string>& argv) = 0;
};
std::unique_ptr<CommandRunner> MakeProcessRunner();

// The Slurm provider's options (provider's keys in the cluster config, docs/autoscaler.md
// "Providers"): sbatch_args (extra sbatch arguments, space-separated; not --signal) and
// preemption_notice_s (whole seconds, 1 to 3600, default 60: sbatch's --signal=B:USR1@S, Slurm's
// notice that long before the job's end, which drains the node with that deadline).
struct SlurmOptions {
  std::vector<std::string> sbatch_args;
  uint32_t preemption_notice_s = 60;
};
// kInvalidArgument naming the key ("cluster config: provider.<key>: ...") for an unknown key, a
// lead that is not a whole number of seconds from 1 to 3600, or a --signal in sbatch_args.
Result<SlurmOptions> ParseSlurmOptions(const std::map<std::string, std::string>& options);

// A Slurm job per node: sbatch --parsable with the type's CPUs (--cpus-per-task), memory
// (--mem, MiB) and GPUs (--gres=gpu:N), node_config's partition and time limit, and
// --signal=B:USR1@<preemption_notice_s>, whose batch script execs airt-node joined to the head
// (so that the notice reaches airt-node itself, which drains with the reason "preempted by
// Slurm" and a deadline preemption_notice_s ahead); squeue tracks it (PENDING/CONFIGURING:
// starting, RUNNING: running, gone or failed states: failed with Slurm's reason); scancel
// removes it.
inline constexpr const char* kSlurmPreemptionReason = "preempted by Slurm";
std::unique_ptr<NodeProvider> MakeSlurmProvider(LaunchContext context, CommandRunner& runner,
                                                SlurmOptions options);

// The provider section's keys checked for its type (local: none; fault: ParseFaultOptions;
// slurm: ParseSlurmOptions), so that `airt up` fails on a bad one before it starts anything.
Status CheckProviderOptions(const ProviderConfig& provider);

}  // namespace airt::autoscaler
