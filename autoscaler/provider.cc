// NodeCommand, the local provider, the fault-injecting one and the process runner.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>

#include "autoscaler/provider.h"
#include "common/daemon_process.h"
#include "common/logging.h"

namespace airt::autoscaler {
namespace {

std::string Number(double v) {
  char text[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(text, sizeof(text), "%.0f", v);
  } else {
    std::snprintf(text, sizeof(text), "%g", v);
  }
  return text;
}

std::string ExitText(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

class LocalProvider final : public NodeProvider {
 public:
  LocalProvider(LaunchContext context, int64_t grace_ms)
      : context_(std::move(context)), grace_ms_(grace_ms) {}
  ~LocalProvider() override {
    for (auto& [id, node] : nodes_) {
      if (node.pid > 0 && !node.exited) Stop(node);
    }
    for (auto& [pid, deadline] : stopping_) {
      StopChild(pid, std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms_));
    }
  }

  Status Launch(const NodeTypeConfig& type, const std::string& launch_id) override {
    DaemonCommand command;
    command.argv = NodeCommand(context_, type, launch_id);
    command.log_path = context_.temp_dir + "/logs/node-" + launch_id + ".out";
    command.lifetime = DaemonLifetime::kStarterThread;
    AIRT_ASSIGN_OR_RETURN(pid_t pid, StartDaemon(command));
    nodes_[launch_id] = Node{pid, false, "", command.log_path};
    AIRT_LOG(INFO) << "local provider: started node " << launch_id << " (" << type.name
                   << ") as pid " << pid << ", log " << command.log_path;
    return Status::Ok();
  }

  Status Terminate(const std::string& launch_id) override {
    auto it = nodes_.find(launch_id);
    if (it == nodes_.end()) return NotFound("no local node launched as " + launch_id);
    // SIGTERM now; reaped (SIGKILL after the grace) by the next polls, so that stopping many
    // nodes never holds up the autoscaler's loop.
    if (!it->second.exited) {
      ::kill(it->second.pid, SIGTERM);
      stopping_[it->second.pid] =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms_);
    }
    nodes_.erase(it);
    return Status::Ok();
  }

  std::vector<InstanceState> Poll() override {
    for (auto it = stopping_.begin(); it != stopping_.end();) {
      if (::waitpid(it->first, nullptr, WNOHANG) == it->first) {
        it = stopping_.erase(it);
      } else if (std::chrono::steady_clock::now() > it->second) {
        ::kill(it->first, SIGKILL);
        ::waitpid(it->first, nullptr, 0);
        it = stopping_.erase(it);
      } else {
        ++it;
      }
    }
    std::vector<InstanceState> states;
    for (auto& [id, node] : nodes_) {
      if (!node.exited) {
        int status = 0;
        if (::waitpid(node.pid, &status, WNOHANG) == node.pid) {
          node.exited = true;
          node.error = "airt-node (pid " + std::to_string(node.pid) + ") " + ExitText(status) +
                       "; its log: " + node.log;
        }
      }
      InstanceState state{id, InstanceState::Phase::kRunning, ""};
      if (node.exited) state = {id, InstanceState::Phase::kFailed, node.error};
      states.push_back(std::move(state));
    }
    return states;
  }

 private:
  struct Node {
    pid_t pid = -1;
    bool exited = false;
    std::string error;
    std::string log;
  };

  void Stop(Node& node) {
    StopChild(node.pid, std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms_));
    node.exited = true;
  }

  LaunchContext context_;
  int64_t grace_ms_;
  std::map<std::string, Node> nodes_;
  std::map<pid_t, std::chrono::steady_clock::time_point> stopping_;  // SIGTERM sent, not reaped
};

class FaultProvider final : public NodeProvider {
 public:
  FaultProvider(std::unique_ptr<NodeProvider> inner, FaultOptions faults, int64_t (*now_ms)())
      : inner_(std::move(inner)), faults_(faults), now_ms_(now_ms) {}

  Status Launch(const NodeTypeConfig& type, const std::string& launch_id) override {
    if (launches_++ < faults_.fail_launches) {
      return Unavailable("fault provider: launch " + std::to_string(launches_) + " of node type " +
                         type.name + " fails (fail_launches " +
                         std::to_string(faults_.fail_launches) + ")");
    }
    bool dies = faults_.die_after_ms > 0 && dies_++ < faults_.die_launches;
    if (faults_.launch_delay_ms > 0) {
      delayed_[launch_id] = {type, now_ms_() + faults_.launch_delay_ms, dies};
      return Status::Ok();
    }
    return Start(type, launch_id, dies);
  }

  Status Terminate(const std::string& launch_id) override {
    die_at_.erase(launch_id);
    if (failed_.erase(launch_id) > 0) return Status::Ok();
    if (delayed_.erase(launch_id) > 0) return Status::Ok();
    return inner_->Terminate(launch_id);
  }

  std::vector<InstanceState> Poll() override {
    int64_t now = now_ms_();
    std::vector<InstanceState> states;
    for (auto it = delayed_.begin(); it != delayed_.end();) {
      if (it->second.start_at > now) {
        states.push_back({it->first, InstanceState::Phase::kStarting, ""});
        ++it;
        continue;
      }
      Status started = Start(it->second.type, it->first, it->second.dies);
      if (!started.ok()) failed_[it->first] = started.message();
      it = delayed_.erase(it);
    }
    for (auto it = die_at_.begin(); it != die_at_.end();) {
      if (it->second > now) {
        ++it;
        continue;
      }
      (void)inner_->Terminate(it->first);
      failed_[it->first] = "fault provider: the node was killed " +
                           std::to_string(faults_.die_after_ms) + " ms after its start";
      it = die_at_.erase(it);
    }
    for (InstanceState& state : inner_->Poll()) states.push_back(std::move(state));
    for (auto& [id, error] : failed_) states.push_back({id, InstanceState::Phase::kFailed, error});
    return states;
  }

 private:
  struct Delayed {
    NodeTypeConfig type;
    int64_t start_at = 0;
    bool dies = false;
  };

  Status Start(const NodeTypeConfig& type, const std::string& launch_id, bool dies) {
    AIRT_RETURN_IF_ERROR(inner_->Launch(type, launch_id));
    if (dies) die_at_[launch_id] = now_ms_() + faults_.die_after_ms;
    return Status::Ok();
  }

  std::unique_ptr<NodeProvider> inner_;
  FaultOptions faults_;
  int64_t (*now_ms_)();
  uint32_t launches_ = 0;
  uint32_t dies_ = 0;
  std::map<std::string, Delayed> delayed_;
  std::map<std::string, int64_t> die_at_;
  std::map<std::string, std::string> failed_;  // killed or failed to start late: reported failed
};

class ProcessRunner final : public CommandRunner {
 public:
  Result<Output> Run(const std::vector<std::string>& argv) override {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid < 0) {
      int e = errno;
      ::close(fds[0]);
      ::close(fds[1]);
      return ErrnoStatus("fork", e);
    }
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    Output output;
    std::array<char, 4096> buffer;
    for (;;) {
      ssize_t n = ::read(fds[0], buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      output.out.append(buffer.data(), static_cast<size_t>(n));
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    output.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (output.exit_status == 127 && output.out.empty()) {
      return NotFound("cannot run " + argv[0] + " (not installed?)");
    }
    return output;
  }
};

}  // namespace

std::vector<std::string> NodeCommand(const LaunchContext& context, const NodeTypeConfig& type,
                                     const std::string& launch_id) {
  std::vector<std::string> argv = {context.node_binary, "--head-address=" + context.head_address,
                                   "--temp-dir=" + context.temp_dir,
                                   "--node-address=" + context.node_address};
  std::string custom;
  auto get = [&](const char* name) {
    auto it = type.resources.find(name);
    return it == type.resources.end() ? 0.0 : it->second;
  };
  argv.push_back("--num-cpus=" + Number(get("CPU")));
  argv.push_back("--num-gpus=" + Number(get("GPU")));
  if (get("memory") > 0) argv.push_back("--memory=" + Number(get("memory")));
  if (get("object_store_memory") > 0) {
    argv.push_back("--object-store-memory=" + Number(get("object_store_memory")));
  }
  for (const auto& [name, amount] : type.resources) {
    if (name == "CPU" || name == "GPU" || name == "memory" || name == "object_store_memory") {
      continue;
    }
    custom += (custom.empty() ? "" : ", ") + ("\"" + name + "\": " + Number(amount));
  }
  if (!custom.empty()) argv.push_back("--resources={" + custom + "}");
  std::string labels = std::string(kLaunchIdLabel) + "=" + launch_id + "," + kNodeTypeLabel +
                       "=" + type.name;
  for (const auto& [key, value] : type.labels) labels += "," + key + "=" + value;
  argv.push_back("--labels=" + labels);
  for (const std::string& extra : context.extra_node_args) argv.push_back(extra);
  return argv;
}

std::unique_ptr<NodeProvider> MakeLocalProvider(LaunchContext context, int64_t grace_ms) {
  return std::make_unique<LocalProvider>(std::move(context), grace_ms);
}

Result<FaultOptions> ParseFaultOptions(const std::map<std::string, std::string>& options) {
  FaultOptions faults;
  for (const auto& [key, text] : options) {
    AIRT_ASSIGN_OR_RETURN(double value, ParseAmount(text, "provider." + key));
    if (key == "fail_launches") {
      faults.fail_launches = static_cast<uint32_t>(value);
    } else if (key == "launch_delay_ms") {
      faults.launch_delay_ms = static_cast<int64_t>(value);
    } else if (key == "die_after_ms") {
      faults.die_after_ms = static_cast<int64_t>(value);
    } else if (key == "die_launches") {
      faults.die_launches = static_cast<uint32_t>(value);
    } else {
      return InvalidArgument("cluster config: provider." + key +
                             ": unknown key for the fault provider (known: fail_launches, "
                             "launch_delay_ms, die_after_ms, die_launches)");
    }
  }
  if (faults.die_after_ms > 0 && faults.die_launches == 0) faults.die_launches = 1;
  return faults;
}

std::unique_ptr<NodeProvider> MakeFaultProvider(std::unique_ptr<NodeProvider> inner,
                                                FaultOptions faults, int64_t (*now_ms)()) {
  return std::make_unique<FaultProvider>(std::move(inner), faults, now_ms);
}

Status CheckProviderOptions(const ProviderConfig& provider) {
  if (provider.type == "fault") return ParseFaultOptions(provider.options).status();
  if (provider.type == "slurm") return ParseSlurmOptions(provider.options).status();
  if (!provider.options.empty()) {
    return InvalidArgument("cluster config: provider." + provider.options.begin()->first +
                           ": unknown key for the " + provider.type + " provider");
  }
  return Status::Ok();
}

std::unique_ptr<CommandRunner> MakeProcessRunner() { return std::make_unique<ProcessRunner>(); }

}  // namespace airt::autoscaler
