// The providers' logic: the node command line, the Slurm provider through a double of sbatch,
// squeue and scancel, and the fault-injecting provider over a recording inner provider.
#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autoscaler/provider.h"

namespace airt::autoscaler {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

NodeTypeConfig GpuType() {
  NodeTypeConfig type;
  type.name = "gpu_node";
  type.resources = {{"CPU", 4}, {"GPU", 2}, {"memory", 2.0 * 1024 * 1024 * 1024}, {"TPU", 1}};
  type.labels = {{"accelerator_type", "H100"}};
  type.max_workers = 2;
  return type;
}

LaunchContext Context() {
  LaunchContext context;
  context.head_address = "10.0.0.1:6379";
  context.node_binary = "/opt/airt/bin/airt-node";
  context.temp_dir = "/scratch/airt";
  return context;
}

TEST(NodeCommand, CarriesTheTypesResourcesLabelsAndLaunchId) {
  std::vector<std::string> argv = NodeCommand(Context(), GpuType(), "gpu_node-1-abc");
  EXPECT_EQ(argv[0], "/opt/airt/bin/airt-node");
  EXPECT_THAT(argv, Contains("--head-address=10.0.0.1:6379"));
  EXPECT_THAT(argv, Contains("--num-cpus=4"));
  EXPECT_THAT(argv, Contains("--num-gpus=2"));
  EXPECT_THAT(argv, Contains("--memory=2147483648"));
  EXPECT_THAT(argv, Contains("--resources={\"TPU\": 1}"));
  EXPECT_THAT(argv, Contains("--labels=airt.io/launch-id=gpu_node-1-abc,airt.io/node-type=gpu_node,"
                             "accelerator_type=H100"));
}

// Answers each command from a script, by the command's name, and records every call.
class FakeSlurm final : public CommandRunner {
 public:
  Result<Output> Run(const std::vector<std::string>& argv) override {
    calls.push_back(argv);
    std::deque<Output>& script = answers[argv[0]];
    if (script.empty()) return Output{0, ""};
    Output out = script.front();
    if (script.size() > 1) script.pop_front();
    return out;
  }
  std::map<std::string, std::deque<Output>> answers;
  std::vector<std::vector<std::string>> calls;
};

TEST(SlurmProvider, SubmitsAJobWithTheTypesCpusMemoryAndGpus) {
  FakeSlurm slurm;
  slurm.answers["sbatch"] = {{0, "4242\n"}};
  NodeTypeConfig type = GpuType();
  type.node_config = {{"partition", "gpu"}, {"time", "1:00:00"}};
  Result<SlurmOptions> options = ParseSlurmOptions({{"sbatch_args", "--qos=high  --nice=5"}});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  auto provider = MakeSlurmProvider(Context(), slurm, *options);
  ASSERT_TRUE(provider->Launch(type, "gpu_node-1-abc").ok());
  ASSERT_EQ(slurm.calls.size(), 1u);
  const std::vector<std::string>& sbatch = slurm.calls[0];
  EXPECT_EQ(sbatch[0], "sbatch");
  EXPECT_THAT(sbatch, Contains("--parsable"));
  EXPECT_THAT(sbatch, Contains("--cpus-per-task=4"));
  EXPECT_THAT(sbatch, Contains("--mem=2048M"));
  EXPECT_THAT(sbatch, Contains("--gres=gpu:2"));
  EXPECT_THAT(sbatch, Contains("--partition=gpu"));
  EXPECT_THAT(sbatch, Contains("--time=1:00:00"));
  EXPECT_THAT(sbatch, Contains("--qos=high"));
  EXPECT_THAT(sbatch, Contains("--nice=5"));
  EXPECT_THAT(sbatch, Contains("--signal=B:USR1@60"));  // the default notice
  EXPECT_THAT(sbatch.back(), HasSubstr("--wrap=exec '/opt/airt/bin/airt-node' "
                                       "'--head-address=10.0.0.1:6379'"));
}

TEST(SlurmProvider, TracksTheJobThroughSqueueAndCancelsIt) {
  FakeSlurm slurm;
  slurm.answers["sbatch"] = {{0, "77;cluster\n"}};
  slurm.answers["squeue"] = {{0, "77 PENDING Resources\n"}, {0, "77 RUNNING None\n"}};
  auto provider = MakeSlurmProvider(Context(), slurm, {});
  ASSERT_TRUE(provider->Launch(GpuType(), "l1").ok());
  std::vector<InstanceState> states = provider->Poll();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].phase, InstanceState::Phase::kStarting);
  EXPECT_EQ(states[0].error, "Resources");
  EXPECT_THAT(slurm.calls.back(), Contains("--jobs=77"));
  states = provider->Poll();
  EXPECT_EQ(states[0].phase, InstanceState::Phase::kRunning);
  ASSERT_TRUE(provider->Terminate("l1").ok());
  EXPECT_EQ(slurm.calls.back(), (std::vector<std::string>{"scancel", "77"}));
  EXPECT_TRUE(provider->Poll().empty());
  EXPECT_EQ(provider->Terminate("l1").code(), Code::kNotFound);
}

TEST(SlurmProvider, AJobSlurmEndedIsAFailedLaunchWithSlurmsWords) {
  FakeSlurm slurm;
  slurm.answers["sbatch"] = {{0, "5\n"}, {0, "6\n"}};
  slurm.answers["squeue"] = {{0, "6 FAILED NonZeroExitCode\n"}};
  auto provider = MakeSlurmProvider(Context(), slurm, {});
  ASSERT_TRUE(provider->Launch(GpuType(), "gone").ok());
  ASSERT_TRUE(provider->Launch(GpuType(), "failed").ok());
  std::map<std::string, InstanceState> by_id;
  for (InstanceState& s : provider->Poll()) by_id[s.id] = s;
  EXPECT_EQ(by_id["gone"].phase, InstanceState::Phase::kFailed);
  EXPECT_THAT(by_id["gone"].error, HasSubstr("job 5 left the queue"));
  EXPECT_EQ(by_id["failed"].phase, InstanceState::Phase::kFailed);
  EXPECT_THAT(by_id["failed"].error, HasSubstr("FAILED (NonZeroExitCode)"));
}

TEST(SlurmProvider, ARefusedSubmissionFailsTheLaunchWithSbatchsMessage) {
  FakeSlurm slurm;
  slurm.answers["sbatch"] = {{1, "sbatch: error: Invalid generic resource (gres) specification\n"}};
  auto provider = MakeSlurmProvider(Context(), slurm, {});
  Status launched = provider->Launch(GpuType(), "l1");
  EXPECT_EQ(launched.code(), Code::kUnavailable);
  EXPECT_THAT(launched.message(), HasSubstr("Invalid generic resource"));
  EXPECT_TRUE(provider->Poll().empty());
}

TEST(SlurmProvider, AnUnknownNodeConfigKeyIsNamed) {
  FakeSlurm slurm;
  NodeTypeConfig type = GpuType();
  type.node_config = {{"queue", "x"}};
  auto provider = MakeSlurmProvider(Context(), slurm, {});
  Status launched = provider->Launch(type, "l1");
  EXPECT_EQ(launched.code(), Code::kInvalidArgument);
  EXPECT_THAT(launched.message(), HasSubstr("available_node_types.gpu_node.node_config.queue"));
}

TEST(SlurmProvider, ThePreemptionNoticeIsSbatchsSignalAndTheNodesDrainDeadline) {
  FakeSlurm slurm;
  slurm.answers["sbatch"] = {{0, "7\n"}};
  Result<SlurmOptions> options = ParseSlurmOptions({{"preemption_notice_s", "300"}});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->preemption_notice_s, 300u);
  auto provider = MakeSlurmProvider(Context(), slurm, *options);
  ASSERT_TRUE(provider->Launch(GpuType(), "l1").ok());
  ASSERT_EQ(slurm.calls.size(), 1u);
  const std::vector<std::string>& sbatch = slurm.calls[0];
  EXPECT_THAT(sbatch, Contains("--signal=B:USR1@300"));
  EXPECT_EQ(std::count_if(sbatch.begin(), sbatch.end(),
                          [](const std::string& a) { return a.rfind("--signal", 0) == 0; }),
            1);
  // The batch shell becomes airt-node (exec), which drains on USR1 with Slurm's lead and reason.
  const std::string& wrap = sbatch.back();
  EXPECT_EQ(wrap.rfind("--wrap=exec '/opt/airt/bin/airt-node' ", 0), 0u) << wrap;
  EXPECT_THAT(wrap, HasSubstr(" '--preemption-grace-ms=300000'"));
  EXPECT_THAT(wrap, HasSubstr(" '--preemption-reason=preempted by Slurm'"));
}

TEST(SlurmProvider, ABadProviderKeyIsAConfigErrorNamingIt) {
  for (const char* bad : {"0", "-5", "3601", "65535", "1.5", "60s", "", "99999999999999999999"}) {
    Result<SlurmOptions> options = ParseSlurmOptions({{"preemption_notice_s", bad}});
    ASSERT_FALSE(options.ok()) << "'" << bad << "' was taken";
    EXPECT_EQ(options.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(options.status().message(),
                HasSubstr("provider.preemption_notice_s: must be a whole number of seconds from "
                          "1 to 3600"));
  }
  EXPECT_TRUE(ParseSlurmOptions({{"preemption_notice_s", "3600"}}).ok());
  EXPECT_TRUE(ParseSlurmOptions({{"preemption_notice_s", "1"}}).ok());

  Result<SlurmOptions> signal = ParseSlurmOptions({{"sbatch_args", "--qos=x --signal=B:USR2@9"}});
  ASSERT_FALSE(signal.ok());
  EXPECT_THAT(signal.status().message(), HasSubstr("provider.sbatch_args: '--signal=B:USR2@9'"));
  EXPECT_THAT(signal.status().message(), HasSubstr("preemption_notice_s"));

  Result<SlurmOptions> unknown = ParseSlurmOptions({{"preemption_lead", "60"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("provider.preemption_lead: unknown key for the slurm provider"));

  // The same check for `airt up` and airt-autoscaler, by the provider's type.
  ProviderConfig slurm{"slurm", {{"preemption_notice_s", "0"}}};
  EXPECT_THAT(CheckProviderOptions(slurm).message(), HasSubstr("provider.preemption_notice_s"));
  ProviderConfig local{"local", {{"preemption_notice_s", "60"}}};
  EXPECT_THAT(CheckProviderOptions(local).message(),
              HasSubstr("provider.preemption_notice_s: unknown key for the local provider"));
  EXPECT_TRUE(CheckProviderOptions({"slurm", {{"preemption_notice_s", "120"}}}).ok());
  EXPECT_TRUE(CheckProviderOptions({"fault", {{"fail_launches", "1"}}}).ok());
}

// Records launches and terminations; every node it started is running.
class RecordingProvider final : public NodeProvider {
 public:
  Status Launch(const NodeTypeConfig&, const std::string& id) override {
    running.insert(id);
    launched.push_back(id);
    return Status::Ok();
  }
  Status Terminate(const std::string& id) override {
    running.erase(id);
    terminated.push_back(id);
    return Status::Ok();
  }
  std::vector<InstanceState> Poll() override {
    std::vector<InstanceState> states;
    for (const std::string& id : running) states.push_back({id, InstanceState::Phase::kRunning, ""});
    return states;
  }
  std::set<std::string> running;
  std::vector<std::string> launched, terminated;
};

int64_t fake_now = 0;
int64_t FakeNow() { return fake_now; }

TEST(FaultProvider, FailsTheFirstLaunchesDelaysOthersAndKillsNodesSoonAfter) {
  auto inner = std::make_unique<RecordingProvider>();
  RecordingProvider& recorded = *inner;
  Result<FaultOptions> faults = ParseFaultOptions(
      {{"fail_launches", "1"}, {"launch_delay_ms", "100"}, {"die_after_ms", "50"}});
  ASSERT_TRUE(faults.ok());
  fake_now = 1000;
  auto provider = MakeFaultProvider(std::move(inner), *faults, &FakeNow);
  Status first = provider->Launch(GpuType(), "a");
  EXPECT_EQ(first.code(), Code::kUnavailable);
  EXPECT_THAT(first.message(), HasSubstr("fail_launches 1"));
  ASSERT_TRUE(provider->Launch(GpuType(), "b").ok());
  std::vector<InstanceState> states = provider->Poll();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].phase, InstanceState::Phase::kStarting);  // slow: not started yet
  EXPECT_TRUE(recorded.launched.empty());
  fake_now = 1100;
  states = provider->Poll();
  EXPECT_EQ(recorded.launched, std::vector<std::string>{"b"});
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].phase, InstanceState::Phase::kRunning);
  fake_now = 1150;  // die_after_ms after its start
  states = provider->Poll();
  EXPECT_EQ(recorded.terminated, std::vector<std::string>{"b"});
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].phase, InstanceState::Phase::kFailed);
  EXPECT_THAT(states[0].error, HasSubstr("killed 50 ms after its start"));
}

TEST(FaultProvider, RejectsAnUnknownOption) {
  Result<FaultOptions> faults = ParseFaultOptions({{"explode", "1"}});
  ASSERT_FALSE(faults.ok());
  EXPECT_THAT(faults.status().message(), HasSubstr("provider.explode"));
}

}  // namespace
}  // namespace airt::autoscaler
