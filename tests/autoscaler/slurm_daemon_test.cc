// The Slurm provider end to end against real daemons: the test makes a munge key and starts
// munged, then `slurmctld -D` and `slurmd -D` from a generated slurm.conf (proctrack/linuxproc,
// task/none, GPUs as a GRES with placeholder files), all on free ports in its own temp folder and
// stopped by pid; then a real airt-head, and the provider submits an airt-node job that registers
// with that head carrying its launch id, which the provider sees RUNNING and scancel removes; and
// Slurm's preemption notice (SIGUSR1 to the batch step, as --signal=B:USR1@S sends it) drains
// that node: the head shows it draining "preempted by Slurm" with the notice's lead as deadline,
// and once its lease is returned it leaves and its job ends.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>

#include <capnp/ez-rpc.h>
#include <kj/async-io.h>
#include <kj/timer.h>
#include <gtest/gtest.h>

#include "autoscaler/provider.h"
#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"
#include "tests/testing/redis_server.h"  // FreePort
#include "tests/testing/test_support.h"

namespace airt::autoscaler {
namespace {

using airt::testing::ChildProcess;
using airt::testing::ReadFile;
using airt::testing::TempDir;
using airt::testing::WaitUntil;

using airt::testing::FreePort;

bool Executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string ShortHostname() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  std::string host(name);
  return host.substr(0, host.find('.'));
}

// A node as the head at `address` shows it (clusterView), found by its launch id.
struct ViewedNode {
  bool found = false, alive = false, draining = false;
  std::string address, drain_reason, death_cause;
  uint64_t drain_deadline_ms = 0;
};
// Runs `each` on every node of the head at `address`'s clusterView; none when it cannot be reached.
template <typename Each>
void ForEachViewedNode(const std::string& address, Each&& each) {
  auto colon = address.rfind(':');
  try {
    capnp::EzRpcClient client(address.substr(0, colon),
                              static_cast<uint>(std::stoul(address.substr(colon + 1))));
    auto view = client.getMain<proto::Head>().clusterViewRequest().send().wait(
        client.getWaitScope());
    for (auto node : view.getNodes()) each(node);
  } catch (const kj::Exception&) {
  }
}

ViewedNode NodeOfLaunch(const std::string& address, const std::string& launch) {
  ViewedNode out;
  ForEachViewedNode(address, [&](auto node) {
    bool ours = false;
    for (auto l : node.getInfo().getLabels()) {
      ours = ours || (std::string(l.getKey().cStr()) == kLaunchIdLabel &&
                      std::string(l.getValue().cStr()) == launch);
    }
    if (!ours) return;
    out.found = true;
    out.alive = node.getAlive();
    out.draining = node.getDraining();
    out.drain_reason = node.getDrainReason().cStr();
    out.drain_deadline_ms = node.getDrainDeadlineMs();
    out.death_cause = node.getDeathCause().cStr();
    out.address = std::string(node.getInfo().getAddress().cStr()) + ":" +
                  std::to_string(node.getInfo().getNodePort());
  });
  return out;
}

uint64_t WallMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// Every alive node's labels, by the head at `address`.
std::vector<std::map<std::string, std::string>> NodeLabels(const std::string& address) {
  std::vector<std::map<std::string, std::string>> out;
  ForEachViewedNode(address, [&](auto node) {
    if (!node.getAlive()) return;
    std::map<std::string, std::string> labels;
    for (auto l : node.getInfo().getLabels()) labels[l.getKey().cStr()] = l.getValue().cStr();
    out.push_back(std::move(labels));
  });
  return out;
}

// munged, slurmctld and slurmd from a generated slurm.conf and an airt-head, all in the test's
// folder on free ports and stopped by pid (every job of this controller cancelled first).
class SlurmDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tool : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd",
                             "/usr/bin/sbatch", "/usr/bin/squeue", "/usr/bin/scancel"}) {
      if (!Executable(tool)) {
        GTEST_SKIP() << tool << " is not installed (apt-get install slurm-wlm munge)";
      }
    }
    if (::geteuid() != 0) GTEST_SKIP() << "slurmd runs its jobs as root here: run as root";
    const std::string& root = root_;
    // munge: a key of our own and a socket in our folder.
    {
      std::ofstream key(root + "/munge.key", std::ios::binary);
      std::mt19937_64 random(std::random_device{}());
      for (int i = 0; i < 128; ++i) {
        uint64_t word = random();
        key.write(reinterpret_cast<const char*>(&word), sizeof(word));
      }
    }
    ::chmod((root + "/munge.key").c_str(), 0600);
    ::mkdir((root + "/run").c_str(), 0755);
    ::mkdir((root + "/state").c_str(), 0700);
    ::mkdir((root + "/spool").c_str(), 0700);
    ::mkdir((root + "/logs").c_str(), 0755);
    munged_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/sbin/munged", "-F", "-f",
                                 "--key-file=" + root + "/munge.key",
                                 "--socket=" + root + "/run/munge.sock",
                                 "--log-file=" + root + "/munged.log",
                                 "--pid-file=" + root + "/run/munged.pid",
                                 "--seed-file=" + root + "/munged.seed"},
        root + "/munged.out");
    ASSERT_TRUE(WaitUntil([&] { return ::access((root + "/run/munge.sock").c_str(), F_OK) == 0; },
                          std::chrono::seconds(20)))
        << ReadFile(root + "/munged.out");

    host_ = ShortHostname();
    const int gpus = 2;
    for (int i = 0; i < gpus; ++i) {
      std::ofstream(root + "/gpu" + std::to_string(i)).put('\n');
    }
    {
      // Slurm 22.05 drops a GPU GRES without File= ("Removing file-less GPU"), so each declared
      // GPU gets a placeholder file: count only, nothing binds to it (task/none).
      std::ofstream gres(root + "/gres.conf");
      gres << "NodeName=" << host_ << " Name=gpu File=" << root << "/gpu[0-" << gpus - 1 << "]\n";
      std::ofstream conf(root + "/slurm.conf");
      conf << "ClusterName=airttest\nSlurmctldHost=" << host_ << "(127.0.0.1)\n"
           << "SlurmctldPort=" << FreePort() << "\nSlurmdPort=" << FreePort() << "\n"
           << "SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\n"
           << "AuthInfo=socket=" << root << "/run/munge.sock\n"
           << "StateSaveLocation=" << root << "/state\nSlurmdSpoolDir=" << root << "/spool\n"
           << "SlurmctldPidFile=" << root << "/run/slurmctld.pid\n"
           << "SlurmdPidFile=" << root << "/run/slurmd.pid\n"
           << "SlurmctldLogFile=" << root << "/slurmctld.log\n"
           << "SlurmdLogFile=" << root << "/slurmd.log\n"
           << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
           << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nGresTypes=gpu\n"
           << "ReturnToService=2\nMpiDefault=none\nJobCompType=jobcomp/none\n"
           << "AccountingStorageType=accounting_storage/none\nSchedulerType=sched/builtin\n"
           << "NodeName=" << host_ << " NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 Gres=gpu:"
           << gpus << " State=UNKNOWN\n"
           << "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
    }
    const std::string conf = root + "/slurm.conf";
    ::setenv("SLURM_CONF", conf.c_str(), 1);  // sbatch, squeue and scancel read it
    slurmctld_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/sbin/slurmctld", "-D", "-f", conf}, root + "/slurmctld.out");
    slurmd_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{"/usr/sbin/slurmd", "-D", "-f", conf}, root + "/slurmd.out");
    runner_ = MakeProcessRunner();
    std::string sinfo;
    bool idle = WaitUntil(
        [&] {
          Result<CommandRunner::Output> out =
              runner_->Run({"sinfo", "--noheader", "--format=%t", "--nodes=" + host_});
          sinfo = out.ok() ? out->out : out.status().message();
          return out.ok() && sinfo.find("idle") != std::string::npos;
        },
        std::chrono::seconds(60));
    ASSERT_TRUE(idle) << "the Slurm node never became idle: sinfo says " << sinfo
                      << "\nslurmctld: " << ReadFile(root + "/slurmctld.log")
                      << "\nslurmd: " << ReadFile(root + "/slurmd.log")
                      << ReadFile(root + "/slurmd.out");

    head_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{AIRT_HEAD_BIN, "--port=0", "--temp-dir=" + root},
        root + "/head.out");
    std::optional<std::string> address = airt::testing::WaitForLine(
        root + "/head.out", "head ready ", std::chrono::seconds(30), head_.get());
    ASSERT_TRUE(address) << ReadFile(root + "/head.out");
    address_ = *address;
  }

  // Whatever happens, no job of this test's controller outlives it (the daemons are killed by
  // their ChildProcess; slurmstepd and its job would not be), before the daemons go.
  void TearDown() override {
    if (runner_ != nullptr) {
      (void)runner_->Run({"scancel", "--full", "--signal=KILL", "--user=root"});
    }
    ::unsetenv("SLURM_CONF");
    head_.reset();
    slurmd_.reset();
    slurmctld_.reset();
    munged_.reset();
  }

  LaunchContext Context(std::vector<std::string> extra = {}) const {
    LaunchContext context;
    context.head_address = address_;
    context.node_binary = AIRT_NODE_BIN;
    context.temp_dir = root_;
    context.extra_node_args = {"--object-store-memory=64M", "--python-executable=none",
                               "--head-reconnect-timeout-s=5"};
    context.extra_node_args.insert(context.extra_node_args.end(), extra.begin(), extra.end());
    return context;
  }

  // Waits for the node of `launch` to register with the head.
  ::testing::AssertionResult Registered(const std::string& launch) {
    if (WaitUntil([&] { return NodeOfLaunch(address_, launch).alive; },
                  std::chrono::seconds(60))) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "the job's node never joined; its log: "
           << ReadFile(root_ + "/logs/slurm-" + launch + ".out")
           << "\nslurmd: " << ReadFile(root_ + "/slurmd.log");
  }

  bool QueueEmpty() {
    return WaitUntil(
        [&] {
          Result<CommandRunner::Output> out = runner_->Run({"squeue", "--noheader"});
          return out.ok() && out->out.find_first_not_of(" \n") == std::string::npos;
        },
        std::chrono::seconds(30));
  }

  TempDir dir_;
  const std::string root_ = dir_.path();
  std::string host_, address_;
  std::unique_ptr<ChildProcess> munged_, slurmctld_, slurmd_, head_;
  std::unique_ptr<CommandRunner> runner_;
};

TEST_F(SlurmDaemon, AJobRunsAirtNodeThatJoinsTheHeadAndScancelRemovesIt) {
  auto provider = MakeSlurmProvider(Context(), *runner_, {});
  NodeTypeConfig type;
  type.name = "gpu_node";
  type.resources = {{"CPU", 1}, {"GPU", 1}, {"memory", 256.0 * 1024 * 1024}};
  type.max_workers = 1;
  auto submitted = std::chrono::steady_clock::now();
  ASSERT_TRUE(provider->Launch(type, "slurm-test-1").ok());
  ASSERT_TRUE(Registered("slurm-test-1"));
  // A figure for docs/autoscaler.md, never asserted.
  std::cout << "slurm: submission to registered "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - submitted)
                   .count()
            << " ms (the head asked in a loop)\n";
  std::vector<InstanceState> states = provider->Poll();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].phase, InstanceState::Phase::kRunning) << states[0].error;

  ASSERT_TRUE(provider->Terminate("slurm-test-1").ok());
  EXPECT_TRUE(QueueEmpty()) << "scancel left the job in the queue";
  EXPECT_TRUE(provider->Poll().empty());
}

// Slurm's notice (USR1 to the batch step, which is airt-node: the script execs it) drains the
// node through the head; a lease held on it keeps it draining until the test returns it.
TEST_F(SlurmDaemon, SlurmsPreemptionNoticeDrainsTheNodeThroughTheHead) {
  const uint32_t lead_s = 600;  // long: the lease, not the deadline, ends this drain
  Result<SlurmOptions> options =
      ParseSlurmOptions({{"preemption_notice_s", std::to_string(lead_s)}});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  auto provider = MakeSlurmProvider(
      Context({"--worker-binary=" + std::string(AIRT_FAKE_WORKER_BIN)}), *runner_, *options);
  NodeTypeConfig type;
  type.name = "cpu_node";
  type.resources = {{"CPU", 1}, {"memory", 256.0 * 1024 * 1024}};
  type.max_workers = 1;
  ASSERT_TRUE(provider->Launch(type, "slurm-preempt-1").ok());
  ASSERT_TRUE(Registered("slurm-preempt-1"));
  ViewedNode node = NodeOfLaunch(address_, "slurm-preempt-1");
  ASSERT_FALSE(node.draining);

  // A lease on the node, held by this test as a submitter holds one.
  const std::string node_log = root_ + "/logs/slurm-slurm-preempt-1.out";
  capnp::EzRpcClient client(node.address);
  kj::Timer& timer = client.getIoProvider().getTimer();
  auto lease = client.getMain<proto::Node>().requestWorkerLeaseRequest();
  auto shape = lease.initShape().initResources(1);
  shape[0].setName("CPU");
  shape[0].setAmount(1);
  JobId job = JobId::FromRandom();
  lease.setJobId(capnp::Data::Reader(job.data(), JobId::kSize));
  uint64_t lease_id = 0;
  kj::Maybe<proto::LeaseHolder::Client> holder;
  Status leased = CatchKj([&] {
    auto response = timer.timeoutAfter(30 * kj::SECONDS, lease.send()).wait(client.getWaitScope());
    ASSERT_TRUE(response.getReply().isGranted());
    lease_id = response.getReply().getGranted().getLeaseId();
    holder = response.getHolder();
  });
  ASSERT_TRUE(leased.ok()) << leased.ToString() << "\n" << ReadFile(node_log);
  ASSERT_NE(lease_id, 0u) << ReadFile(node_log);

  Result<CommandRunner::Output> queue =
      runner_->Run({"squeue", "--noheader", "--format=%i", "--name=airt-slurm-preempt-1"});
  ASSERT_TRUE(queue.ok() && queue->exit_status == 0);
  std::string job_id = queue->out.substr(0, queue->out.find_first_of(" \n"));
  ASSERT_FALSE(job_id.empty()) << "squeue does not list the job";

  uint64_t before = WallMs();
  Result<CommandRunner::Output> signalled =
      runner_->Run({"scancel", "--signal=USR1", "--batch", job_id});
  ASSERT_TRUE(signalled.ok() && signalled->exit_status == 0)
      << (signalled.ok() ? signalled->out : signalled.status().ToString());
  ASSERT_TRUE(WaitUntil([&] { return (node = NodeOfLaunch(address_, "slurm-preempt-1")).draining; },
                        std::chrono::seconds(30)))
      << "the head never showed the node draining; its log: " << ReadFile(node_log);
  uint64_t after = WallMs();
  EXPECT_TRUE(node.alive);
  EXPECT_EQ(node.drain_reason, "preempted by Slurm");
  EXPECT_GE(node.drain_deadline_ms, before + lead_s * 1000);
  EXPECT_LE(node.drain_deadline_ms, after + lead_s * 1000);
  std::vector<InstanceState> states = provider->Poll();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].phase, InstanceState::Phase::kRunning) << "the job runs on while draining";

  // The lease back: the drain is done, the node leaves, airt-node exits and the job ends.
  auto give_back = client.getMain<proto::Node>().returnWorkerLeaseRequest();
  give_back.setLeaseId(lease_id);
  Status returned = CatchKj([&] {
    timer.timeoutAfter(10 * kj::SECONDS, give_back.send()).wait(client.getWaitScope());
  });
  ASSERT_TRUE(returned.ok()) << returned.ToString();
  holder = nullptr;
  ASSERT_TRUE(WaitUntil([&] { return !(node = NodeOfLaunch(address_, "slurm-preempt-1")).alive; },
                        std::chrono::seconds(60)))
      << ReadFile(node_log);
  EXPECT_EQ(node.death_cause, "it was drained (preempted by Slurm) and left the cluster");
  EXPECT_TRUE(QueueEmpty()) << "the drained node's job is still in the queue: "
                            << ReadFile(node_log);
  // The autoscaler then terminates the launch (the node died): ok, the job is gone already.
  states = provider->Poll();
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].phase, InstanceState::Phase::kFailed);
  Status terminated = provider->Terminate("slurm-preempt-1");
  EXPECT_TRUE(terminated.ok()) << terminated.ToString();
  EXPECT_TRUE(provider->Poll().empty());
}

}  // namespace
}  // namespace airt::autoscaler
