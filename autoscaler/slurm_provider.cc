// The Slurm provider: a job per node (provider.h MakeSlurmProvider).
#include <cmath>
#include <sstream>

#include "autoscaler/provider.h"
#include "common/logging.h"

namespace airt::autoscaler {
namespace {

// One word for sh -c: single-quoted.
std::string Quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// sbatch's --signal takes up to 65535 s; airt-node's --preemption-grace-ms up to an hour.
constexpr uint64_t kMaxPreemptionNoticeS = 3600;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  size_t start = s.find_first_not_of(" \n");
  return start == std::string::npos ? "" : s.substr(start);
}

class SlurmProvider final : public NodeProvider {
 public:
  SlurmProvider(LaunchContext context, CommandRunner& runner,
                SlurmOptions options)
      : context_(std::move(context)), runner_(runner), options_(std::move(options)) {}

  Status Launch(const NodeTypeConfig& type, const std::string& launch_id) override {
    std::vector<std::string> argv = {"sbatch", "--parsable", "--job-name=airt-" + launch_id,
                                     "--output=" + context_.temp_dir + "/logs/slurm-" +
                                         launch_id + ".out"};
    auto amount = [&](const char* name) {
      auto it = type.resources.find(name);
      return it == type.resources.end() ? 0.0 : it->second;
    };
    if (double cpus = amount("CPU"); cpus > 0) {
      argv.push_back("--cpus-per-task=" + std::to_string(static_cast<int64_t>(std::ceil(cpus))));
    }
    if (double memory = amount("memory"); memory > 0) {
      argv.push_back("--mem=" +
                     std::to_string(static_cast<int64_t>(std::ceil(memory / (1 << 20)))) + "M");
    }
    if (double gpus = amount("GPU"); gpus > 0) {
      argv.push_back("--gres=gpu:" + std::to_string(static_cast<int64_t>(std::ceil(gpus))));
    }
    for (const auto& [key, value] : type.node_config) {
      if (key == "partition") {
        argv.push_back("--partition=" + value);
      } else if (key == "time") {
        argv.push_back("--time=" + value);
      } else {
        return InvalidArgument("cluster config: available_node_types." + type.name +
                               ".node_config." + key +
                               ": unknown key for the slurm provider (known: partition, time)");
      }
    }
    // Slurm signals the batch shell only (B:); the script execs airt-node, so that shell is
    // airt-node itself and no trap is needed to pass the notice on.
    argv.push_back("--signal=B:USR1@" + std::to_string(options_.preemption_notice_s));
    argv.insert(argv.end(), options_.sbatch_args.begin(), options_.sbatch_args.end());
    std::vector<std::string> node = NodeCommand(context_, type, launch_id);
    node.push_back("--preemption-grace-ms=" +
                   std::to_string(uint64_t{options_.preemption_notice_s} * 1000));
    node.push_back(std::string("--preemption-reason=") + kSlurmPreemptionReason);
    std::string script = "exec";
    for (const std::string& word : node) script += " " + Quote(word);
    argv.push_back("--wrap=" + script);
    AIRT_ASSIGN_OR_RETURN(CommandRunner::Output output, runner_.Run(argv));
    std::string out = Trim(output.out);
    if (output.exit_status != 0) {
      return Unavailable("sbatch exited with status " + std::to_string(output.exit_status) +
                         ": " + out);
    }
    // --parsable: "<job id>" or "<job id>;<cluster>".
    std::string job = out.substr(0, out.find(';'));
    if (job.empty() || job.find_first_not_of("0123456789") != std::string::npos) {
      return Unavailable("sbatch answered '" + out + "', not a job id");
    }
    jobs_[launch_id] = Job{job, InstanceState::Phase::kStarting, ""};
    AIRT_LOG(INFO) << "slurm provider: node " << launch_id << " (" << type.name
                   << ") submitted as job " << job;
    return Status::Ok();
  }

  Status Terminate(const std::string& launch_id) override {
    auto it = jobs_.find(launch_id);
    if (it == jobs_.end()) return NotFound("no Slurm job launched as " + launch_id);
    AIRT_ASSIGN_OR_RETURN(CommandRunner::Output output, runner_.Run({"scancel", it->second.id}));
    if (output.exit_status != 0) {
      return Unavailable("scancel " + it->second.id + " exited with status " +
                         std::to_string(output.exit_status) + ": " + Trim(output.out));
    }
    jobs_.erase(it);
    return Status::Ok();
  }

  std::vector<InstanceState> Poll() override {
    std::vector<InstanceState> states;
    if (jobs_.empty()) return states;
    std::string ids;
    for (const auto& [launch, job] : jobs_) ids += (ids.empty() ? "" : ",") + job.id;
    Result<CommandRunner::Output> output =
        runner_.Run({"squeue", "--noheader", "--jobs=" + ids, "--format=%i %T %r"});
    std::map<std::string, std::pair<std::string, std::string>> seen;  // id -> state, reason
    bool answered = output.ok() && output->exit_status == 0;
    if (answered) {
      std::istringstream lines(output->out);
      for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::string id, state, reason;
        words >> id >> state;
        std::getline(words, reason);
        if (!id.empty()) seen[id] = {state, Trim(reason)};
      }
    } else {
      AIRT_LOG(WARNING) << "slurm provider: squeue failed: "
                        << (output.ok() ? Trim(output->out) : output.status().message());
    }
    for (auto& [launch, job] : jobs_) {
      if (answered && job.phase != InstanceState::Phase::kFailed) {
        auto it = seen.find(job.id);
        if (it == seen.end()) {
          job.phase = InstanceState::Phase::kFailed;
          job.error = "Slurm job " + job.id + " left the queue (it ended or Slurm killed it)";
        } else if (it->second.first == "RUNNING" || it->second.first == "COMPLETING") {
          job.phase = InstanceState::Phase::kRunning;
        } else if (it->second.first == "PENDING" || it->second.first == "CONFIGURING") {
          job.phase = InstanceState::Phase::kStarting;
          job.error = it->second.second;
        } else {
          job.phase = InstanceState::Phase::kFailed;
          job.error = "Slurm job " + job.id + " is " + it->second.first + " (" +
                      it->second.second + ")";
        }
      }
      states.push_back({launch, job.phase, job.error});
    }
    return states;
  }

 private:
  struct Job {
    std::string id;
    InstanceState::Phase phase = InstanceState::Phase::kStarting;
    std::string error;
  };

  LaunchContext context_;
  CommandRunner& runner_;
  SlurmOptions options_;
  std::map<std::string, Job> jobs_;  // by launch id
};

}  // namespace

Result<SlurmOptions> ParseSlurmOptions(const std::map<std::string, std::string>& options) {
  SlurmOptions out;
  for (const auto& [key, text] : options) {
    if (key == "sbatch_args") {
      std::istringstream words(text);
      for (std::string word; words >> word;) {
        if (word.rfind("--signal", 0) == 0) {
          return InvalidArgument("cluster config: provider.sbatch_args: '" + word +
                                 "': the provider gives --signal=B:USR1@<preemption_notice_s> "
                                 "itself; set provider.preemption_notice_s instead");
        }
        out.sbatch_args.push_back(word);
      }
    } else if (key == "preemption_notice_s") {
      bool digits = !text.empty() && text.size() <= 4 &&
                    text.find_first_not_of("0123456789") == std::string::npos;
      uint64_t seconds = digits ? std::stoull(text) : 0;
      if (!digits || seconds < 1 || seconds > kMaxPreemptionNoticeS) {
        return InvalidArgument("cluster config: provider.preemption_notice_s: must be a whole "
                               "number of seconds from 1 to 3600 (airt-node's "
                               "--preemption-grace-ms takes up to an hour), got '" + text + "'");
      }
      out.preemption_notice_s = static_cast<uint32_t>(seconds);
    } else {
      return InvalidArgument("cluster config: provider." + key +
                             ": unknown key for the slurm provider (known: sbatch_args, "
                             "preemption_notice_s)");
    }
  }
  return out;
}

std::unique_ptr<NodeProvider> MakeSlurmProvider(LaunchContext context, CommandRunner& runner,
                                                SlurmOptions options) {
  return std::make_unique<SlurmProvider>(std::move(context), runner, std::move(options));
}

}  // namespace airt::autoscaler
