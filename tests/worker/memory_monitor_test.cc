// The node's memory monitor: its readers (cgroup v2, /proc/meminfo, the test-only usage file),
// Ray's retriable-LIFO killing policy, and one sample's decision. The kill reaching a task's
// caller as OutOfMemoryError is tested across processes in tests/e2e/errors_test.cc and
// tests/python/test_errors.py.
#include "worker/internal/memory_monitor.h"

#include <fstream>
#include <memory>

#include <gtest/gtest.h>

#include "tests/testing/test_support.h"

namespace airt::worker {
namespace {

using airt::testing::TempDir;

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Usage this test sets, as the file reader gives it to a node.
class SetUsage final : public MemoryReader {
 public:
  Result<MemoryUsage> Read() override {
    if (!usage) return Unavailable("no usage set");
    return *usage;
  }
  std::optional<MemoryUsage> usage;
};

KillCandidate Candidate(uint64_t lease_id, bool retriable) {
  return KillCandidate{WorkerId::FromRandom(), static_cast<int32_t>(1000 + lease_id), lease_id,
                       retriable};
}

TEST(MemoryKillingPolicy, PicksTheNewestRetriableLease) {
  std::vector<KillCandidate> leased = {Candidate(1, true), Candidate(5, false), Candidate(3, true),
                                       Candidate(2, true)};
  EXPECT_EQ(PickWorkerToKill(leased), 2u);
}

TEST(MemoryKillingPolicy, PicksTheNewestLeaseWhenNoneIsRetriable) {
  std::vector<KillCandidate> leased = {Candidate(4, false), Candidate(9, false),
                                       Candidate(7, false)};
  EXPECT_EQ(PickWorkerToKill(leased), 1u);
}

TEST(MemoryKillingPolicy, PicksNothingWithoutLeases) {
  EXPECT_EQ(PickWorkerToKill({}), std::nullopt);
}

TEST(HostMemoryReader, ReadsTheCgroupLimitWhenItHasOne) {
  TempDir dir;
  Write(dir.File("memory.max"), "1073741824\n");
  Write(dir.File("memory.current"), "536870912\n");
  Write(dir.File("meminfo"), "MemTotal: 100 kB\nMemAvailable: 10 kB\n");
  Result<MemoryUsage> usage = HostMemoryReader(dir.path(), dir.File("meminfo")).Read();
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  EXPECT_EQ(usage->used, 536870912u);
  EXPECT_EQ(usage->total, 1073741824u);
}

TEST(HostMemoryReader, ReadsMeminfoWhenTheCgroupHasNoLimit) {
  TempDir dir;
  Write(dir.File("memory.max"), "max\n");
  Write(dir.File("memory.current"), "536870912\n");
  Write(dir.File("meminfo"),
        "MemTotal:       16000 kB\nMemFree:         1000 kB\nMemAvailable:    4000 kB\n");
  Result<MemoryUsage> usage = HostMemoryReader(dir.path(), dir.File("meminfo")).Read();
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  EXPECT_EQ(usage->used, 12000u * 1024);
  EXPECT_EQ(usage->total, 16000u * 1024);
  EXPECT_DOUBLE_EQ(usage->Fraction(), 0.75);
}

TEST(HostMemoryReader, IsUnavailableNamingTheFileWhenNothingCanBeRead) {
  TempDir dir;
  Result<MemoryUsage> usage = HostMemoryReader(dir.path(), dir.File("meminfo")).Read();
  ASSERT_FALSE(usage.ok());
  EXPECT_EQ(usage.status().code(), Code::kUnavailable);
  EXPECT_NE(usage.status().message().find(dir.File("meminfo")), std::string::npos);
}

TEST(HostMemoryReader, ReadsThisHost) {
  Result<MemoryUsage> usage = HostMemoryReader().Read();
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  EXPECT_GT(usage->total, 0u);
  EXPECT_LE(usage->used, usage->total);
}

TEST(FileMemoryReader, ReadsUsedAndTotalAndRejectsAnythingElse) {
  TempDir dir;
  Write(dir.File("usage"), "90 100\n");
  Result<MemoryUsage> usage = FileMemoryReader(dir.File("usage")).Read();
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  EXPECT_DOUBLE_EQ(usage->Fraction(), 0.9);
  Write(dir.File("usage"), "lots\n");
  EXPECT_EQ(FileMemoryReader(dir.File("usage")).Read().status().code(), Code::kUnavailable);
  EXPECT_EQ(FileMemoryReader(dir.File("none")).Read().status().code(), Code::kUnavailable);
}

class MemoryMonitorTest : public ::testing::Test {
 protected:
  MemoryMonitor Monitor() {
    MemoryMonitorOptions options;
    options.threshold = 0.95;
    options.node = "n1 (127.0.0.1:1)";
    return MemoryMonitor(
        options, reader_, *timer_, [this] { return leased_; },
        [this](const WorkerId& worker, const std::string& reason) {
          stopped_.emplace_back(worker, reason);
          return true;
        });
  }

  SetUsage reader_;
  // Held by pointer: kj::TimerImpl's destructor may throw, gtest's fixture's may not.
  std::unique_ptr<kj::TimerImpl> timer_ =
      std::make_unique<kj::TimerImpl>(kj::origin<kj::TimePoint>());
  std::vector<KillCandidate> leased_ = {Candidate(1, true), Candidate(2, true),
                                        Candidate(3, false)};
  std::vector<std::pair<WorkerId, std::string>> stopped_;
};

TEST_F(MemoryMonitorTest, StopsNothingAtOrBelowTheThreshold) {
  MemoryMonitor monitor = Monitor();
  reader_.usage = MemoryUsage{95, 100};
  EXPECT_EQ(monitor.Check(), std::nullopt);
  reader_.usage.reset();  // a failed read stops nothing either
  EXPECT_EQ(monitor.Check(), std::nullopt);
  EXPECT_TRUE(stopped_.empty());
}

TEST_F(MemoryMonitorTest, AboveTheThresholdStopsTheNewestRetriableWorkerNamingTheUsage) {
  MemoryMonitor monitor = Monitor();
  reader_.usage = MemoryUsage{uint64_t{99} << 30, uint64_t{100} << 30};
  EXPECT_EQ(monitor.Check(), leased_[1].worker);
  ASSERT_EQ(stopped_.size(), 1u);
  const std::string& reason = stopped_[0].second;
  EXPECT_NE(reason.find("n1 (127.0.0.1:1)"), std::string::npos) << reason;
  EXPECT_NE(reason.find("99.00 GiB of 100.00 GiB in use (0.990)"), std::string::npos) << reason;
  EXPECT_NE(reason.find("threshold 0.950"), std::string::npos) << reason;
  EXPECT_NE(reason.find("pid 1002"), std::string::npos) << reason;
  EXPECT_EQ(monitor.kills(), 1u);
}

}  // namespace
}  // namespace airt::worker
