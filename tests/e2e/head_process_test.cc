// A real airt-head process on a free port, driven by this test as fake nodes and a KV client over
// Cap'n Proto RPC: registration, heartbeats, a node declared dead by the daemon's liveness timer,
// the KV, a job finished when its driver is killed, bad input, and a clean exit on SIGTERM and
// SIGINT. Every wait has a deadline; the head and the drivers are stopped by their pids.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <arpa/inet.h>
#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "common/rpc_status.h"
#include "tests/testing/test_support.h"

namespace airt::e2e {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kHeartbeatMs = 50;
constexpr uint32_t kTimeoutMs = 400;

class HeadProcessTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "---- airt-head output (" << log_ << ")\n" << testing::ReadFile(log_) << "\n";
    }
    Disconnect();
  }

  // Starts airt-head on --port=0 with `extra` flags, reads its "head ready" line and connects.
  // Use under ASSERT_NO_FATAL_FAILURE.
  void StartHead(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        AIRT_HEAD_BIN, "--port=0", "--heartbeat-interval-ms=" + std::to_string(kHeartbeatMs),
        "--node-timeout-ms=" + std::to_string(kTimeoutMs), "--temp-dir=" + dir_.File("session")};
    argv.insert(argv.end(), extra.begin(), extra.end());
    head_ = std::make_unique<testing::ChildProcess>(argv, log_);
    ASSERT_TRUE(head_->started());
    std::optional<std::string> ready = testing::WaitForLine(log_, "head ready ", 30s, head_.get());
    ASSERT_TRUE(head_->Running()) << "airt-head exited before it was ready";
    ASSERT_TRUE(ready) << "airt-head printed no ready line within 30 s";
    std::string address = *ready;
    size_t colon = address.rfind(':');
    ASSERT_NE(colon, std::string::npos) << address;
    EXPECT_EQ(address.substr(0, colon), "127.0.0.1") << "the head binds loopback by default";
    port_ = static_cast<uint>(std::stoul(address.substr(colon + 1)));
    ASSERT_NE(port_, 0u);
    client_ = std::make_unique<capnp::EzRpcClient>("127.0.0.1", port_);
    cap_ = std::make_unique<proto::Head::Client>(client_->getMain<proto::Head>());
  }

  void Disconnect() {
    cap_.reset();
    client_.reset();
  }

  // Sends `signal` and expects exit status 0 within the deadline.
  void ExpectCleanStopOn(int signal) {
    head_->Kill(signal);
    EXPECT_EQ(head_->Wait(20s), 0) << "airt-head did not exit 0 on signal " << signal;
  }

  proto::Head::Client& head() { return *cap_; }
  kj::WaitScope& wait() { return client_->getWaitScope(); }

  Status RegisterNode(const NodeId& id, const std::string& address = "127.0.0.1") {
    return CatchKj([&] {
      auto request = head().registerNodeRequest();
      auto info = request.initInfo();
      info.setNodeId(capnp::Data::Reader(id.data(), NodeId::kSize));
      info.setAddress(address);
      info.setNodePort(7000);
      auto total = info.initTotal(2);
      total[0].setName("CPU");
      total[0].setAmount(4);
      total[1].setName("GPU");
      total[1].setAmount(1);
      info.initGpuIds(1).set(0, 0);
      auto reply = request.send().wait(wait());
      EXPECT_EQ(reply.getHeartbeatIntervalMs(), kHeartbeatMs);
      EXPECT_EQ(reply.getNodeTimeoutMs(), kTimeoutMs);
    });
  }

  // The reply's `known`; false also when the call failed (the failure is recorded).
  bool Heartbeat(const NodeId& id) {
    bool known = false;
    Status s = CatchKj([&] {
      auto request = head().heartbeatRequest();
      request.setNodeId(capnp::Data::Reader(id.data(), NodeId::kSize));
      auto available = request.initAvailable(1);
      available[0].setName("CPU");
      available[0].setAmount(3);
      request.initGpuIdsInUse(1).set(0, 0);
      known = request.send().wait(wait()).getKnown();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return known;
  }

  // Each node's liveness, in the head's order; nullopt when the call failed.
  std::optional<std::vector<std::pair<NodeId, bool>>> View() {
    std::vector<std::pair<NodeId, bool>> nodes;
    Status s = CatchKj([&] {
      auto reply = head().clusterViewRequest().send().wait(wait());
      for (auto n : reply.getNodes()) {
        auto id = n.getInfo().getNodeId();
        EXPECT_EQ(id.size(), NodeId::kSize);
        nodes.emplace_back(NodeId::FromRaw(id.begin()), n.getAlive());
      }
    });
    if (!s.ok()) return std::nullopt;
    return nodes;
  }

  testing::TempDir dir_;
  std::string log_ = dir_.File("airt-head.log");
  std::unique_ptr<testing::ChildProcess> head_;
  uint port_ = 0;
  std::unique_ptr<capnp::EzRpcClient> client_;
  // Held by pointer: a kj::Own inside makes a member's destructor noexcept(false).
  std::unique_ptr<proto::Head::Client> cap_;
};

TEST_F(HeadProcessTest, DaemonDeclaresANodeDeadWhenItsHeartbeatsStop) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  NodeId steady = NodeId::FromRandom(), silent = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(steady).ok());
  ASSERT_TRUE(RegisterNode(silent).ok());
  EXPECT_TRUE(Heartbeat(silent));

  // Only `steady` keeps heartbeating; the daemon's liveness timer, not a query, must notice.
  const std::string death = " declared dead: no heartbeat for ";
  auto last_beat = Clock::now();
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        if (Clock::now() - last_beat >= std::chrono::milliseconds(kHeartbeatMs)) {
          EXPECT_TRUE(Heartbeat(steady));
          last_beat = Clock::now();
        }
        std::string log = testing::ReadFile(log_);
        size_t at = log.find(death);
        return at != std::string::npos &&
               log.rfind("node " + silent.Hex(), at) != std::string::npos;
      },
      20s))
      << "the head never declared the silent node dead";
  auto view = View();
  ASSERT_TRUE(view.has_value());
  ASSERT_EQ(view->size(), 2u);
  EXPECT_EQ((*view)[0], std::make_pair(steady, true));
  EXPECT_EQ((*view)[1], std::make_pair(silent, false));

  EXPECT_FALSE(Heartbeat(silent)) << "a dead node is unknown";
  Status back = RegisterNode(silent);
  EXPECT_EQ(back.code(), Code::kFailedPrecondition) << "and may not come back with its id";
  EXPECT_EQ((*View())[1], std::make_pair(silent, false));
  ExpectCleanStopOn(SIGTERM);
}

TEST_F(HeadProcessTest, HeartbeatFromAnUnknownNodeAnswersUnknown) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  EXPECT_FALSE(Heartbeat(NodeId::FromRandom()));
  EXPECT_EQ(View()->size(), 0u);
  ExpectCleanStopOn(SIGTERM);
}

TEST_F(HeadProcessTest, KvRoundTripsThroughTheProcess) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  std::string unique_id(128, '\0');
  for (size_t i = 0; i < unique_id.size(); ++i) unique_id[i] = static_cast<char>(i * 7);
  Status s = CatchKj([&] {
    auto put = head().kvPutRequest();
    put.setNamespace("collective");
    put.setKey("nccl/group0/unique_id");
    put.setValue(
        capnp::Data::Reader(reinterpret_cast<const kj::byte*>(unique_id.data()), unique_id.size()));
    put.setOverwrite(false);
    EXPECT_TRUE(put.send().wait(wait()).getAdded());

    auto get = head().kvGetRequest();
    get.setNamespace("collective");
    get.setKey("nccl/group0/unique_id");
    auto got = get.send().wait(wait());
    ASSERT_TRUE(got.getFound());
    EXPECT_EQ(
        std::string(reinterpret_cast<const char*>(got.getValue().begin()), got.getValue().size()),
        unique_id);

    auto keys = head().kvKeysRequest();
    keys.setNamespace("collective");
    keys.setPrefix("nccl/");
    auto listed = keys.send().wait(wait());
    ASSERT_EQ(listed.getKeys().size(), 1u);
    EXPECT_EQ(std::string(listed.getKeys()[0].cStr()), "nccl/group0/unique_id");

    auto del = head().kvDeleteRequest();
    del.setNamespace("collective");
    del.setKey("nccl/group0/unique_id");
    EXPECT_TRUE(del.send().wait(wait()).getDeleted());

    auto again = head().kvGetRequest();
    again.setNamespace("collective");
    again.setKey("nccl/group0/unique_id");
    EXPECT_FALSE(again.send().wait(wait()).getFound());
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  ExpectCleanStopOn(SIGTERM);
}

// A driver killed with SIGKILL says nothing; its connection closes, and with it the job's lease.
TEST_F(HeadProcessTest, AJobFinishesWhenItsDriverIsKilled) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  std::string driver_log = dir_.File("driver.log");
  testing::ChildProcess driver({AIRT_JOB_DRIVER_TOOL_BIN, "127.0.0.1:" + std::to_string(port_)},
                               driver_log);
  std::optional<std::string> hex = testing::WaitForLine(driver_log, "job ", 30s, &driver);
  ASSERT_TRUE(hex.has_value()) << testing::ReadFile(driver_log);
  auto job = JobId::FromHex(*hex);
  ASSERT_TRUE(job.ok()) << *hex;
  // Alive while its driver runs; finished, with an end time, once it is killed.
  auto job_state = [&]() -> std::optional<std::pair<bool, uint64_t>> {
    std::optional<std::pair<bool, uint64_t>> found;
    Status s = CatchKj([&] {
      auto jobs = head().listJobsRequest().send().wait(wait());
      for (auto info : jobs.getJobs()) {
        if (info.getJobId() == capnp::Data::Reader(job->data(), JobId::kSize)) {
          found = std::make_pair(info.getAlive(), info.getEndMs());
          EXPECT_EQ(info.getDriverPid(), driver.pid());
        }
      }
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return found;
  };
  ASSERT_EQ(job_state(), std::make_pair(true, uint64_t{0}));
  driver.Kill(SIGKILL);
  EXPECT_EQ(driver.Wait(20s), 128 + SIGKILL);
  ASSERT_TRUE(
      testing::WaitUntil([&] { return !job_state().value_or(std::pair(true, 0)).first; }, 20s))
      << "the job still runs after its driver was killed";
  EXPECT_NE(job_state()->second, 0u);
  EXPECT_NE(testing::ReadFile(log_).find("the driver of job " + job->Hex()), std::string::npos);
  ExpectCleanStopOn(SIGTERM);
}

TEST_F(HeadProcessTest, BadMessageGetsAnErrorAndTheHeadKeepsServing) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Status s = CatchKj([&] {
    auto request = head().registerNodeRequest();
    request.initInfo().setNodeId(capnp::Data::Reader(reinterpret_cast<const kj::byte*>("x"), 1));
    request.send().wait(wait());
  });
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "info.nodeId must be 28 bytes, got 1");
  EXPECT_TRUE(head_->Running());
  EXPECT_TRUE(View().has_value());
  ExpectCleanStopOn(SIGTERM);
}

TEST_F(HeadProcessTest, GarbageOnTheWireCostsOnlyThatConnection) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  for (int round = 0; round < 3; ++round) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    // A segment table claiming 2^32 segments, then bytes that are no message at all.
    std::string garbage = std::string("\xff\xff\xff\xff\x10\x00\x00\x00", 8) +
                          std::string(4096, static_cast<char>(0xa5 + round));
    EXPECT_EQ(::write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
    ::close(fd);
  }
  ASSERT_TRUE(RegisterNode(NodeId::FromRandom()).ok());
  EXPECT_EQ(View()->size(), 1u);
  EXPECT_TRUE(head_->Running());
  ExpectCleanStopOn(SIGTERM);
}

TEST_F(HeadProcessTest, StopsCleanlyOnSigintWithAClientConnected) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  ASSERT_TRUE(RegisterNode(NodeId::FromRandom()).ok());
  ExpectCleanStopOn(SIGINT);
  EXPECT_NE(testing::ReadFile(log_).find("stopping on SIGINT"), std::string::npos);
  Status gone = CatchKj([&] { head().clusterViewRequest().send().wait(wait()); });
  EXPECT_EQ(gone.code(), Code::kUnavailable) << gone.ToString();
}

TEST_F(HeadProcessTest, RefusesBadFlagsWithExitStatus2) {
  for (std::vector<std::string> flags :
       {std::vector<std::string>{"--port=70000"}, {"--node-timeout-ms=10"}, {"--no-such-flag"}}) {
    std::vector<std::string> argv = {AIRT_HEAD_BIN};
    argv.insert(argv.end(), flags.begin(), flags.end());
    testing::ChildProcess head(argv, log_);
    EXPECT_EQ(head.Wait(20s), 2) << flags[0];
  }
}

TEST_F(HeadProcessTest, ExitsWithStatus1WhenThePortIsTaken) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  testing::ChildProcess second({AIRT_HEAD_BIN, "--port=" + std::to_string(port_)},
                               dir_.File("second.log"));
  EXPECT_EQ(second.Wait(20s), 1);
  std::string out = testing::ReadFile(dir_.File("second.log"));
  EXPECT_NE(out.find("port " + std::to_string(port_) + " is taken by airt-head (pid " +
                     std::to_string(head_->pid()) + "); choose another with --port"),
            std::string::npos)
      << out;
  ExpectCleanStopOn(SIGTERM);
}

}  // namespace
}  // namespace airt::e2e
