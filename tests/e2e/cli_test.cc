// The airt command as a user runs it: start a head and nodes, read the status, stop them.
#include <signal.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "tests/testing/test_support.h"

namespace airt {
namespace {

using airt::testing::ChildProcess;
using airt::testing::ReadFile;
using airt::testing::TempDir;
using namespace std::chrono_literals;

class AirtCommand : public ::testing::Test {
 protected:
  ~AirtCommand() override {
    // Whatever happened, no daemon outlives the test: stop by the recorded pids.
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator(dir_.path() + "/session/pids", ec)) {
      std::ifstream in(entry.path());
      pid_t pid;
      if (in >> pid && pid > 0) ::kill(pid, SIGKILL);
    }
  }

  // Runs `airt <args>`; returns its exit code, its output in *out.
  int Airt(std::vector<std::string> args, std::string* out = nullptr) {
    std::string log = dir_.File("airt-" + std::to_string(++runs_) + ".out");
    args.insert(args.begin(), AIRT_CLI_BIN);
    args.push_back("--temp-dir=" + dir_.path());
    ChildProcess airt(args, log);
    int code = airt.Wait(60s);
    if (out) *out = ReadFile(log);
    return code;
  }

  std::vector<pid_t> RecordedPids() {
    std::vector<pid_t> pids;
    std::error_code ec;
    for (const auto& entry :
         std::filesystem::directory_iterator(dir_.path() + "/session/pids", ec)) {
      std::ifstream in(entry.path());
      pid_t pid;
      if (in >> pid) pids.push_back(pid);
    }
    return pids;
  }

  TempDir dir_;
  int runs_ = 0;
};


TEST_F(AirtCommand, StartStatusStopRunsATwoNodeClusterWithGpusAndLabels) {
  std::string out;
  ASSERT_EQ(Airt({"start", "--head", "--port=0", "--num-cpus=2", "--num-gpus=4",
                  "--object-store-memory=32M"},
                 &out),
            0)
      << out;
  EXPECT_NE(out.find("Started the head at 127.0.0.1:"), std::string::npos) << out;
  std::string address = ReadFile(dir_.File("session/head_address"));
  address = address.substr(0, address.find('\n'));
  ASSERT_EQ(Airt({"start", "--address=" + address, "--num-cpus=1", "--resources={\"TPU\": 2}",
                  "--labels=accelerator_type=A10", "--object-store-memory=32M"},
                 &out),
            0)
      << out;

  ASSERT_EQ(Airt({"status"}, &out), 0) << out;
  EXPECT_NE(out.find("Nodes: 2 alive, 0 dead"), std::string::npos) << out;
  EXPECT_NE(out.find("GPU 4/4"), std::string::npos) << out;
  EXPECT_NE(out.find("TPU 2/2"), std::string::npos) << out;
  EXPECT_NE(out.find("ray.io/accelerator-type=A10"), std::string::npos) << out;

  std::vector<pid_t> pids = RecordedPids();
  ASSERT_EQ(pids.size(), 3u);  // the head and two nodes
  ASSERT_EQ(Airt({"stop"}, &out), 0) << out;
  EXPECT_NE(out.find("Stopped 3 airt processes"), std::string::npos) << out;
  for (pid_t pid : pids) {
    EXPECT_TRUE(airt::testing::WaitUntil([&] { return !airt::testing::ProcessRunning(pid); }, 10s)) << "pid " << pid;
  }
  EXPECT_NE(Airt({"status"}, &out), 0);  // nothing started here any more
  EXPECT_NE(out.find("no cluster started here"), std::string::npos) << out;
}

TEST_F(AirtCommand, StartRefusesASecondHeadAndBadFlagsNamingThem) {
  std::string out;
  ASSERT_EQ(Airt({"start", "--head", "--port=0", "--object-store-memory=32M"}, &out), 0) << out;
  EXPECT_EQ(Airt({"start", "--head", "--port=0"}, &out), 1);
  EXPECT_NE(out.find("a head was started here already"), std::string::npos) << out;
  EXPECT_EQ(Airt({"start", "--address=127.0.0.1:1", "--num-gpus=1.5"}, &out), 1);
  EXPECT_NE(out.find("num-gpus"), std::string::npos) << out;
  EXPECT_EQ(Airt({"start"}, &out), 1);
  EXPECT_NE(out.find("either --head or --address"), std::string::npos) << out;
  EXPECT_EQ(Airt({"stop"}, &out), 0);
}

TEST_F(AirtCommand, StartPassesTheObjectStoreFallbackLimitToTheNode) {
  std::string out;
  ASSERT_EQ(Airt({"start", "--help"}, &out), 0) << out;
  EXPECT_NE(out.find("--object-store-fallback-limit"), std::string::npos) << out;

  ASSERT_EQ(Airt({"start", "--head", "--port=0", "--object-store-memory=32M",
                  "--object-store-fallback-limit=1M"},
                 &out),
            0)
      << out;
  int nodes_with_the_flag = 0;
  for (pid_t pid : RecordedPids()) {
    std::string cmdline = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmdline.find("airt-node") == std::string::npos) continue;
    EXPECT_NE(cmdline.find(std::string("--object-store-fallback-limit=1M") + '\0'),
              std::string::npos);
    ++nodes_with_the_flag;
  }
  EXPECT_EQ(nodes_with_the_flag, 1);
  // The node parses it: a bad value stops that node, naming the flag.
  std::string address = ReadFile(dir_.File("session/head_address"));
  address = address.substr(0, address.find('\n'));
  EXPECT_EQ(Airt({"start", "--address=" + address, "--object-store-fallback-limit=lots"}, &out), 1);
  EXPECT_NE(out.find("object-store-fallback-limit"), std::string::npos) << out;
  EXPECT_EQ(Airt({"stop"}, &out), 0) << out;
}

TEST_F(AirtCommand, TwoDriversRunTheirTasksAtOnceOnOneCluster) {
  std::string out;
  std::string code = std::filesystem::path(AIRT_EXAMPLE_TASKS).parent_path().string();
  ASSERT_EQ(Airt({"start", "--head", "--port=0", "--num-cpus=2", "--object-store-memory=64M",
                  "--code-search-path=" + code},
                 &out),
            0)
      << out;
  std::string address = ReadFile(dir_.File("session/head_address"));
  ::setenv("AIRT_ADDRESS", address.substr(0, address.find('\n')).c_str(), 1);
  ChildProcess first({AIRT_EXAMPLE_TASKS}, dir_.File("driver-1.out"));
  ChildProcess second({AIRT_EXAMPLE_TASKS}, dir_.File("driver-2.out"));
  EXPECT_EQ(first.Wait(60s), 0) << ReadFile(dir_.File("driver-1.out"));
  EXPECT_EQ(second.Wait(60s), 0) << ReadFile(dir_.File("driver-2.out"));
  ::unsetenv("AIRT_ADDRESS");
  for (const char* log : {"driver-1.out", "driver-2.out"}) {
    std::string text = ReadFile(dir_.File(log));
    EXPECT_NE(text.find("sum of 0..99999 computed remotely: 4999950000"), std::string::npos)
        << text;
    EXPECT_NE(text.find("40 put, plus 2 remotely: 42"), std::string::npos) << text;
  }
  EXPECT_EQ(Airt({"stop"}, &out), 0) << out;
}

TEST_F(AirtCommand, StatusNamesTheAddressWhenNoHeadAnswers) {
  std::string out;
  EXPECT_EQ(Airt({"status", "--address=127.0.0.1:1"}, &out), 1);
  EXPECT_NE(out.find("asking the head at 127.0.0.1:1"), std::string::npos) << out;
}

}  // namespace
}  // namespace airt
