// The Slurm provider end to end against real daemons: the test makes a munge key and starts
// munged, then `slurmctld -D` and `slurmd -D` from a generated slurm.conf (proctrack/linuxproc,
// task/none, GPUs as a GRES with placeholder files), all on free ports in its own temp folder and
// stopped by pid; then a real airt-head, and the provider submits an airt-node job that registers
// with that head carrying its launch id, which the provider sees RUNNING and scancel removes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>

#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>

#include "autoscaler/provider.h"
#include "common/proto/cluster.capnp.h"
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

// Every alive node's labels, by the head at `address`.
std::vector<std::map<std::string, std::string>> NodeLabels(const std::string& address) {
  std::vector<std::map<std::string, std::string>> out;
  auto colon = address.rfind(':');
  try {
    capnp::EzRpcClient client(address.substr(0, colon),
                              static_cast<uint>(std::stoul(address.substr(colon + 1))));
    auto view = client.getMain<proto::Head>().clusterViewRequest().send().wait(
        client.getWaitScope());
    for (auto node : view.getNodes()) {
      if (!node.getAlive()) continue;
      std::map<std::string, std::string> labels;
      for (auto l : node.getInfo().getLabels()) labels[l.getKey().cStr()] = l.getValue().cStr();
      out.push_back(std::move(labels));
    }
  } catch (const kj::Exception&) {
  }
  return out;
}

TEST(SlurmDaemon, AJobRunsAirtNodeThatJoinsTheHeadAndScancelRemovesIt) {
  for (const char* tool : {"/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd",
                           "/usr/bin/sbatch", "/usr/bin/squeue", "/usr/bin/scancel"}) {
    if (!Executable(tool)) GTEST_SKIP() << tool << " is not installed (apt-get install slurm-wlm munge)";
  }
  if (::geteuid() != 0) GTEST_SKIP() << "slurmd runs its jobs as root here: run as root";
  TempDir dir;
  const std::string root = dir.path();
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
  ChildProcess munged({"/usr/sbin/munged", "-F", "-f", "--key-file=" + root + "/munge.key",
                       "--socket=" + root + "/run/munge.sock", "--log-file=" + root + "/munged.log",
                       "--pid-file=" + root + "/run/munged.pid",
                       "--seed-file=" + root + "/munged.seed"},
                      root + "/munged.out");
  ASSERT_TRUE(WaitUntil([&] { return ::access((root + "/run/munge.sock").c_str(), F_OK) == 0; },
                        std::chrono::seconds(20)))
      << ReadFile(root + "/munged.out");

  const std::string host = ShortHostname();
  const int gpus = 2;
  std::string gpu_files;
  for (int i = 0; i < gpus; ++i) {
    std::ofstream(root + "/gpu" + std::to_string(i)).put('\n');
  }
  {
    // Slurm 22.05 drops a GPU GRES without File= ("Removing file-less GPU"), so each declared GPU
    // gets a placeholder file: count only, nothing binds to it (task/none).
    std::ofstream gres(root + "/gres.conf");
    gres << "NodeName=" << host << " Name=gpu File=" << root << "/gpu[0-" << gpus - 1 << "]\n";
    std::ofstream conf(root + "/slurm.conf");
    conf << "ClusterName=airttest\nSlurmctldHost=" << host << "(127.0.0.1)\n"
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
         << "NodeName=" << host << " NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 Gres=gpu:" << gpus
         << " State=UNKNOWN\n"
         << "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
  }
  const std::string conf = root + "/slurm.conf";
  ::setenv("SLURM_CONF", conf.c_str(), 1);  // sbatch, squeue and scancel read it
  ChildProcess slurmctld({"/usr/sbin/slurmctld", "-D", "-f", conf}, root + "/slurmctld.out");
  ChildProcess slurmd({"/usr/sbin/slurmd", "-D", "-f", conf}, root + "/slurmd.out");
  std::unique_ptr<CommandRunner> runner = MakeProcessRunner();
  // Whatever happens, no job of this test's controller outlives it (the daemons are killed by
  // their ChildProcess; slurmstepd and its job would not be).
  struct CancelAll {
    CommandRunner& runner;
    ~CancelAll() {
      (void)runner.Run({"scancel", "--full", "--signal=KILL", "--user=root"});
      ::unsetenv("SLURM_CONF");
    }
  } cancel_all{*runner};
  std::string sinfo;
  bool idle = WaitUntil(
      [&] {
        Result<CommandRunner::Output> out =
            runner->Run({"sinfo", "--noheader", "--format=%t", "--nodes=" + host});
        sinfo = out.ok() ? out->out : out.status().message();
        return out.ok() && sinfo.find("idle") != std::string::npos;
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(idle) << "the Slurm node never became idle: sinfo says " << sinfo
                    << "\nslurmctld: " << ReadFile(root + "/slurmctld.log")
                    << "\nslurmd: " << ReadFile(root + "/slurmd.log")
                    << ReadFile(root + "/slurmd.out");

  ChildProcess head({AIRT_HEAD_BIN, "--port=0", "--temp-dir=" + root}, root + "/head.out");
  std::optional<std::string> address = airt::testing::WaitForLine(
      root + "/head.out", "head ready ", std::chrono::seconds(30), &head);
  ASSERT_TRUE(address) << ReadFile(root + "/head.out");

  LaunchContext context;
  context.head_address = *address;
  context.node_binary = AIRT_NODE_BIN;
  context.temp_dir = root;
  context.extra_node_args = {"--object-store-memory=64M", "--python-executable=none",
                             "--head-reconnect-timeout-s=5"};
  auto provider = MakeSlurmProvider(context, *runner, {});
  NodeTypeConfig type;
  type.name = "gpu_node";
  type.resources = {{"CPU", 1}, {"GPU", 1}, {"memory", 256.0 * 1024 * 1024}};
  type.max_workers = 1;
  auto submitted = std::chrono::steady_clock::now();
  ASSERT_TRUE(provider->Launch(type, "slurm-test-1").ok());
  bool registered = WaitUntil(
      [&] {
        for (auto& labels : NodeLabels(*address)) {
          if (labels[kLaunchIdLabel] == "slurm-test-1") return true;
        }
        return false;
      },
      std::chrono::seconds(60));
  ASSERT_TRUE(registered) << "the job's node never joined; its log: "
                          << ReadFile(root + "/logs/slurm-slurm-test-1.out")
                          << "\nslurmd: " << ReadFile(root + "/slurmd.log");
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
  EXPECT_TRUE(WaitUntil(
      [&] {
        Result<CommandRunner::Output> out = runner->Run({"squeue", "--noheader"});
        return out.ok() && out->out.find_first_not_of(" \n") == std::string::npos;
      },
      std::chrono::seconds(30)))
      << "scancel left the job in the queue";
  EXPECT_TRUE(provider->Poll().empty());
}

}  // namespace
}  // namespace airt::autoscaler
