// Workers' output on the driver's console: a real airt-head and airt-node, and a driver process
// (log_driver) whose stdout the test reads. The node follows its workers' log files and streams
// their lines, prefixed "(pid=..., node=...)", to the driver that subscribed for the job.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>
#include <fstream>
#include <regex>

#include <gtest/gtest.h>

#include "tests/testing/test_support.h"

namespace airt {
namespace {

using airt::testing::ChildProcess;
using airt::testing::ReadFile;
using airt::testing::TempDir;
using airt::testing::WaitForLine;
using airt::testing::WaitUntil;
using namespace std::chrono_literals;

// A head and a node of 1 CPU in `dir`, the node with `node_flags` added; AIRT_ADDRESS is set to
// the head for the driver processes the tests start. Both are killed by pid when it goes.
struct Cluster {
  Cluster(const TempDir& dir, const std::vector<std::string>& node_flags)
      : head({AIRT_HEAD_BIN, "--port=0"}, dir.File("head.log")) {
    std::string address =
        WaitForLine(dir.File("head.log"), "head ready ", 30s, &head).value_or("");
    if (address.empty()) return;
    std::vector<std::string> argv = {AIRT_NODE_BIN, "--head-address=" + address, "--num-cpus=1",
                                     "--object-store-memory=64M", "--temp-dir=" + dir.path(),
                                     "--worker-binary=" + std::string(AIRT_WORKER_BIN)};
    argv.insert(argv.end(), node_flags.begin(), node_flags.end());
    node = std::make_unique<ChildProcess>(argv, dir.File("node.log"));
    ready = WaitForLine(dir.File("node.log"), "node ready ", 30s, node.get()).has_value();
    ::setenv("AIRT_ADDRESS", address.c_str(), 1);  // the drivers inherit it
  }
  ChildProcess head;
  std::unique_ptr<ChildProcess> node;
  bool ready = false;
};

TEST(LogStream, WorkerOutputReachesTheDriverWithItsPrefix) {
  TempDir dir;
  Cluster cluster(dir, {"--worker-code-search-path=" + std::string(AIRT_TASK_FUNCTIONS)});
  ASSERT_TRUE(cluster.ready) << ReadFile(dir.File("head.log")) << ReadFile(dir.File("node.log"));
  std::string marker = dir.File("driver.done");
  ChildProcess driver({AIRT_LOG_DRIVER_BIN, marker}, dir.File("driver.log"));

  const std::regex line(R"(^\(pid=[0-9]+, node=[0-9a-f]{8}\) hello from the worker 7$)");
  bool streamed = WaitUntil(
      [&] {
        std::string text = ReadFile(dir.File("driver.log"));
        for (size_t start = 0, nl; (nl = text.find('\n', start)) != std::string::npos;
             start = nl + 1) {
          if (std::regex_match(text.substr(start, nl - start), line)) return true;
        }
        return false;
      },
      30s);
  EXPECT_TRUE(streamed) << "driver output:\n"
                        << ReadFile(dir.File("driver.log")) << "\nnode log:\n"
                        << ReadFile(dir.File("node.log"));
  EXPECT_NE(ReadFile(dir.File("driver.log")).find("driver got 7\n"), std::string::npos);
  // The worker's own info lines ("... remote function(s) registered ...") stay in its log file.
  EXPECT_EQ(ReadFile(dir.File("driver.log")).find("remote function(s) registered"),
            std::string::npos)
      << ReadFile(dir.File("driver.log"));

  std::ofstream(marker).put('\n');
  EXPECT_EQ(driver.Wait(30s), 0) << ReadFile(dir.File("driver.log"));
  // The line stays in the worker's output file as well, and the worker's own log lines are in its
  // .airt.log file beside it.
  bool in_worker_log = false, own_lines_apart = false;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(dir.path()))) {
    if (!entry.is_directory() || entry.path().filename().string().rfind("node-", 0) != 0) continue;
    for (const auto& log : std::filesystem::directory_iterator(entry.path() / "logs")) {
      std::string text = ReadFile(log.path().string());
      std::string name = log.path().filename().string();
      bool airt_log = name.size() > 9 && name.substr(name.size() - 9) == ".airt.log";
      if (!airt_log && text.find("hello from the worker 7\n") != std::string::npos) {
        in_worker_log = true;
      }
      if (airt_log && text.find("remote function(s) registered") != std::string::npos) {
        own_lines_apart = true;
      }
    }
  }
  EXPECT_TRUE(in_worker_log);
  EXPECT_TRUE(own_lines_apart);
}

// The job's own code: a node given no code search path runs the tasks of a driver whose library
// sits in the driver's folder (Config::code_search_path left empty), as Ray's C++ driver does;
// the head lists the job with its code.
TEST(JobCode, ANodeWithoutCodeRunsTheDriversOwnLibrary) {
  TempDir dir;
  Cluster cluster(dir, {});  // no code search path for the node
  ASSERT_TRUE(cluster.ready) << ReadFile(dir.File("head.log")) << ReadFile(dir.File("node.log"));
  std::string marker = dir.File("driver.done");
  ChildProcess driver({AIRT_LOG_DRIVER_BIN, marker}, dir.File("driver.log"));
  EXPECT_TRUE(WaitUntil(
      [&] { return ReadFile(dir.File("driver.log")).find("driver got 7\n") != std::string::npos; },
      30s))
      << "driver output:\n"
      << ReadFile(dir.File("driver.log")) << "\nnode log:\n"
      << ReadFile(dir.File("node.log"));
  std::ofstream(marker).put('\n');
  EXPECT_EQ(driver.Wait(30s), 0) << ReadFile(dir.File("driver.log"));
}

}  // namespace
}  // namespace airt
