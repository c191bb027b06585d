// airt-head processes over a real redis-server (--redis-address), each redis-server started by the
// test on a free loopback port in its own temp folder, without persistence, and stopped by pid:
// a head killed with SIGKILL and started again reloads its nodes, jobs, actors and KV; a Redis
// restarted empty gets the head's rows written again; a stopped Redis makes writes fail with
// kUnavailable while the head keeps serving; AUTH; two key prefixes on one Redis stay apart; and a
// head whose port is taken names what holds it. Skipped where redis-server is not installed.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

// The path of redis-server on PATH; "" when it is not installed.
std::string RedisServerBinary() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/usr/local/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::filesystem::path candidate =
        std::filesystem::path(dirs.substr(start, end - start)) / "redis-server";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return "";
}

// A loopback port nothing listens on now.
uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool Accepts(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// One head process and a client of it.
struct Head {
  std::unique_ptr<testing::ChildProcess> process;
  std::string log;
  std::unique_ptr<capnp::EzRpcClient> client;
  std::unique_ptr<proto::Head::Client> cap;
  std::vector<proto::JobLease::Client> leases;  // the jobs registered through `client`

  ~Head() { Disconnect(); }
  void Disconnect() {
    leases.clear();
    cap.reset();
    client.reset();
  }
  proto::Head::Client& head() { return *cap; }
  kj::WaitScope& wait() { return client->getWaitScope(); }
};

class HeadRedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_bin_ = RedisServerBinary();
    if (redis_bin_.empty()) GTEST_SKIP() << "skipped: redis-server not installed";
    redis_port_ = FreePort();
  }

  void TearDown() override {
    if (HasFailure()) {
      for (const std::string& log : logs_) {
        std::cerr << "---- " << log << "\n" << testing::ReadFile(log) << "\n";
      }
    }
    heads_.clear();
  }

  // Starts (or starts again, empty) redis-server on redis_port_. Use under ASSERT_NO_FATAL_FAILURE.
  void StartRedis(const std::string& password = "") {
    std::string dir = dir_.File("redis-" + std::to_string(++redis_starts_));
    std::filesystem::create_directories(dir);
    std::vector<std::string> argv = {redis_bin_,
                                     "--port",
                                     std::to_string(redis_port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--daemonize",
                                     "no",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     dir};
    if (!password.empty()) argv.insert(argv.end(), {"--requirepass", password});
    logs_.push_back(dir + "/redis.log");
    redis_ = std::make_unique<testing::ChildProcess>(argv, logs_.back());
    ASSERT_TRUE(redis_->started());
    ASSERT_TRUE(
        testing::WaitUntil([&] { return Accepts(redis_port_) || !redis_->Running(); }, 10s));
    ASSERT_TRUE(redis_->Running()) << "redis-server exited";
  }
  void StopRedis() {
    redis_->Kill(SIGKILL);
    redis_->Wait(10s);
    ASSERT_TRUE(testing::WaitUntil([&] { return !Accepts(redis_port_); }, 10s));
  }

  std::string RedisFlag() { return "--redis-address=127.0.0.1:" + std::to_string(redis_port_); }

  // Starts airt-head on a free port with `flags`; nullptr (and a test failure) when it did not
  // become ready.
  Head* StartHead(std::vector<std::string> flags) {
    auto head = std::make_unique<Head>();
    head->log = dir_.File("head-" + std::to_string(heads_.size() + 1) + ".log");
    logs_.push_back(head->log);
    std::vector<std::string> argv = {AIRT_HEAD_BIN, "--port=0",
                                     "--temp-dir=" + dir_.File("session")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    head->process = std::make_unique<testing::ChildProcess>(argv, head->log);
    std::optional<std::string> ready =
        testing::WaitForLine(head->log, "head ready ", 30s, head->process.get());
    EXPECT_TRUE(ready) << "airt-head did not become ready";
    if (!ready) return nullptr;
    uint port = static_cast<uint>(std::stoul(ready->substr(ready->rfind(':') + 1)));
    head->client = std::make_unique<capnp::EzRpcClient>("127.0.0.1", port);
    head->cap = std::make_unique<proto::Head::Client>(head->client->getMain<proto::Head>());
    heads_.push_back(std::move(head));
    return heads_.back().get();
  }
  // SIGKILL: nothing of the head's shutdown runs.
  // Kills the head first and only then drops the connection: dropping it first would hand the
  // head the job leases' release (it finishes those jobs) before the kill.
  void KillHead(Head* head) {
    head->process->Kill(SIGKILL);
    head->process->Wait(10s);
    head->Disconnect();
  }

  static Status KvPut(Head* h, const std::string& ns, const std::string& key,
                      const std::string& value) {
    return CatchKj([&] {
      auto request = h->head().kvPutRequest();
      request.setNamespace(ns);
      request.setKey(key);
      request.setValue(
          capnp::Data::Reader(reinterpret_cast<const kj::byte*>(value.data()), value.size()));
      request.setOverwrite(true);
      request.send().wait(h->wait());
    });
  }
  static Result<std::optional<std::string>> KvGet(Head* h, const std::string& ns,
                                                  const std::string& key) {
    std::optional<std::string> value;
    Status s = CatchKj([&] {
      auto request = h->head().kvGetRequest();
      request.setNamespace(ns);
      request.setKey(key);
      auto reply = request.send().wait(h->wait());
      if (reply.getFound()) {
        auto v = reply.getValue();
        value.emplace(reinterpret_cast<const char*>(v.begin()), v.size());
      }
    });
    if (!s.ok()) return s;
    return value;
  }
  static Status RegisterNode(Head* h, const NodeId& id) {
    return CatchKj([&] {
      auto request = h->head().registerNodeRequest();
      auto info = request.initInfo();
      info.setNodeId(capnp::Data::Reader(id.data(), NodeId::kSize));
      info.setAddress("127.0.0.1");
      info.setNodePort(7000);
      auto total = info.initTotal(1);
      total[0].setName("CPU");
      total[0].setAmount(4);
      request.send().wait(h->wait());
    });
  }
  static std::vector<std::pair<NodeId, bool>> View(Head* h) {
    std::vector<std::pair<NodeId, bool>> nodes;
    Status s = CatchKj([&] {
      auto reply = h->head().clusterViewRequest().send().wait(h->wait());
      for (auto n : reply.getNodes()) {
        nodes.emplace_back(NodeId::FromRaw(n.getInfo().getNodeId().begin()), n.getAlive());
      }
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return nodes;
  }
  // A new job's id (its lease is kept by the head's client until the head is killed).
  static Result<JobId> RegisterJob(Head* h) {
    JobId id;
    Status s = CatchKj([&] {
      auto request = h->head().registerJobRequest();
      request.setDriverPid(4321);
      request.setDriverAddress("127.0.0.1");
      auto reply = request.send().wait(h->wait());
      id = JobId::FromRaw(reply.getJobId().begin());
      h->leases.push_back(reply.getLease());
    });
    if (!s.ok()) return s;
    return id;
  }
  // Each job's aliveness, in id order.
  static std::vector<std::pair<JobId, bool>> Jobs(Head* h) {
    std::vector<std::pair<JobId, bool>> jobs;
    Status s = CatchKj([&] {
      auto reply = h->head().listJobsRequest().send().wait(h->wait());
      for (auto j : reply.getJobs()) {
        jobs.emplace_back(JobId::FromRaw(j.getJobId().begin()), j.getAlive());
      }
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return jobs;
  }
  static Status RegisterActor(Head* h, const ActorId& id, const std::string& name) {
    return CatchKj([&] {
      auto request = h->head().registerActorRequest();
      auto info = request.initInfo();
      info.setActorId(capnp::Data::Reader(id.data(), ActorId::kSize));
      info.setJobId(capnp::Data::Reader(id.Job().data(), JobId::kSize));
      info.setName(name);
      info.setClassName("Counter::Create");
      request.send().wait(h->wait());
    });
  }
  static std::optional<std::string> ActorNamed(Head* h, const std::string& name) {
    std::optional<std::string> class_name;
    Status s = CatchKj([&] {
      auto request = h->head().getActorRequest();
      request.setName(name);
      auto reply = request.send().wait(h->wait());
      if (reply.getFound()) class_name = reply.getInfo().getClassName().cStr();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return class_name;
  }

  testing::TempDir dir_;
  std::string redis_bin_;
  uint16_t redis_port_ = 0;
  int redis_starts_ = 0;
  std::unique_ptr<testing::ChildProcess> redis_;
  std::vector<std::string> logs_;
  std::vector<std::unique_ptr<Head>> heads_;
};

TEST_F(HeadRedisTest, RestartedHeadReloadsNodesJobsActorsAndKv) {
  ASSERT_NO_FATAL_FAILURE(StartRedis());
  std::vector<std::string> flags = {RedisFlag(), "--redis-key-prefix=cluster-a:"};
  Head* first = StartHead(flags);
  ASSERT_NE(first, nullptr);
  NodeId node = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(first, node).ok());
  Result<JobId> job = RegisterJob(first);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  ASSERT_TRUE(RegisterActor(first, ActorId::Of(*job), "trainer").ok());
  ASSERT_TRUE(KvPut(first, "fn", "f1", std::string("bytes\0here", 10)).ok());
  KillHead(first);

  Head* second = StartHead(flags);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(View(second), (std::vector<std::pair<NodeId, bool>>{{node, true}}));
  EXPECT_EQ(Jobs(second), (std::vector<std::pair<JobId, bool>>{{*job, true}}));
  EXPECT_EQ(ActorNamed(second, "trainer"), "Counter::Create");
  EXPECT_EQ(**KvGet(second, "fn", "f1"), std::string("bytes\0here", 10));
  Result<JobId> next = RegisterJob(second);
  ASSERT_TRUE(next.ok());
  EXPECT_NE(*next, *job) << "job ids continue after the reloaded ones";
}

TEST_F(HeadRedisTest, RedisRestartedEmptyGetsTheHeadsRowsWrittenAgain) {
  ASSERT_NO_FATAL_FAILURE(StartRedis());
  std::vector<std::string> flags = {RedisFlag(), "--redis-key-prefix=cluster-b:"};
  Head* head = StartHead(flags);
  ASSERT_NE(head, nullptr);
  NodeId node = NodeId::FromRandom();
  ASSERT_TRUE(RegisterNode(head, node).ok());
  ASSERT_TRUE(KvPut(head, "ns", "before", "1").ok());
  ASSERT_NO_FATAL_FAILURE(StopRedis());
  ASSERT_NO_FATAL_FAILURE(StartRedis());  // empty: no persistence
  // The head reconnects by itself (idle check) or on the next write; retried until it has.
  ASSERT_TRUE(testing::WaitUntil([&] { return KvPut(head, "ns", "after", "2").ok(); }, 20s));
  KillHead(head);

  Head* restarted = StartHead(flags);
  ASSERT_NE(restarted, nullptr);
  EXPECT_EQ(**KvGet(restarted, "ns", "before"), "1") << "written again into the empty Redis";
  EXPECT_EQ(**KvGet(restarted, "ns", "after"), "2");
  EXPECT_EQ(View(restarted).size(), 1u);
  EXPECT_NE(testing::ReadFile(heads_[0]->log).find("came back without the head's rows"),
            std::string::npos);
}

TEST_F(HeadRedisTest, StoppedRedisFailsWritesWithUnavailableAndTheHeadKeepsServing) {
  ASSERT_NO_FATAL_FAILURE(StartRedis());
  Head* head = StartHead({RedisFlag()});
  ASSERT_NE(head, nullptr);
  ASSERT_TRUE(KvPut(head, "ns", "kept", "v").ok());
  ASSERT_NO_FATAL_FAILURE(StopRedis());
  Status failed = KvPut(head, "ns", "new", "v");
  EXPECT_EQ(failed.code(), Code::kUnavailable) << failed.ToString();
  EXPECT_NE(failed.message().find("Redis at 127.0.0.1:" + std::to_string(redis_port_)),
            std::string::npos)
      << failed.message();
  EXPECT_EQ(**KvGet(head, "ns", "kept"), "v") << "still serving what it holds";
  EXPECT_FALSE(KvGet(head, "ns", "new")->has_value()) << "the failed write changed nothing";
  EXPECT_EQ(RegisterNode(head, NodeId::FromRandom()).code(), Code::kUnavailable);
  EXPECT_TRUE(View(head).empty());
  EXPECT_TRUE(head->process->Running());
}

TEST_F(HeadRedisTest, AuthWithAPassword) {
  ASSERT_NO_FATAL_FAILURE(StartRedis("s3cret"));
  {
    std::string log = dir_.File("no-password.log");
    testing::ChildProcess refused({AIRT_HEAD_BIN, "--port=0", RedisFlag()}, log);
    EXPECT_EQ(refused.Wait(30s), 1) << testing::ReadFile(log);
    EXPECT_NE(testing::ReadFile(log).find("NOAUTH"), std::string::npos) << testing::ReadFile(log);
  }
  std::vector<std::string> flags = {RedisFlag(), "--redis-password=s3cret"};
  Head* head = StartHead(flags);
  ASSERT_NE(head, nullptr);
  ASSERT_TRUE(KvPut(head, "ns", "k", "v").ok());
  KillHead(head);
  Head* restarted = StartHead(flags);
  ASSERT_NE(restarted, nullptr);
  EXPECT_EQ(**KvGet(restarted, "ns", "k"), "v");
}

TEST_F(HeadRedisTest, TwoKeyPrefixesOnOneRedisDoNotSeeEachOthersRows) {
  ASSERT_NO_FATAL_FAILURE(StartRedis());
  Head* a = StartHead({RedisFlag(), "--redis-key-prefix=a:"});
  Head* b = StartHead({RedisFlag(), "--redis-key-prefix=b:"});
  ASSERT_TRUE(a != nullptr && b != nullptr);
  ASSERT_TRUE(KvPut(a, "ns", "k", "from a").ok());
  ASSERT_TRUE(RegisterNode(a, NodeId::FromRandom()).ok());
  ASSERT_TRUE(RegisterJob(a).ok());
  ASSERT_TRUE(KvPut(b, "ns", "k", "from b").ok());
  KillHead(b);
  Head* b2 = StartHead({RedisFlag(), "--redis-key-prefix=b:"});
  ASSERT_NE(b2, nullptr);
  EXPECT_EQ(**KvGet(b2, "ns", "k"), "from b");
  EXPECT_TRUE(View(b2).empty());
  EXPECT_TRUE(Jobs(b2).empty());
  EXPECT_EQ(**KvGet(a, "ns", "k"), "from a");
}

TEST_F(HeadRedisTest, TakenPortNamesWhatHoldsItAndTheFlag) {
  ASSERT_NO_FATAL_FAILURE(StartRedis());
  std::string log = dir_.File("taken.log");
  testing::ChildProcess head({AIRT_HEAD_BIN, "--port=" + std::to_string(redis_port_)}, log);
  EXPECT_EQ(head.Wait(30s), 1);
  std::string out = testing::ReadFile(log);
  EXPECT_NE(out.find("port " + std::to_string(redis_port_) + " is taken by redis-server (pid " +
                     std::to_string(redis_->pid()) + "); choose another with --port"),
            std::string::npos)
      << out;
}

TEST_F(HeadRedisTest, AnUnreachableOrMalformedRedisAddressStopsTheHeadWithAClearError) {
  std::string unreachable = dir_.File("unreachable.log");
  testing::ChildProcess down({AIRT_HEAD_BIN, "--port=0", RedisFlag()}, unreachable);
  EXPECT_EQ(down.Wait(30s), 1);
  EXPECT_NE(testing::ReadFile(unreachable)
                .find("Redis at 127.0.0.1:" + std::to_string(redis_port_) + " cannot be reached"),
            std::string::npos)
      << testing::ReadFile(unreachable);

  std::string malformed = dir_.File("malformed.log");
  testing::ChildProcess bad({AIRT_HEAD_BIN, "--port=0", "--redis-address=nohost"}, malformed);
  EXPECT_EQ(bad.Wait(30s), 2) << "a usage error";
  EXPECT_NE(testing::ReadFile(malformed).find("--redis-address 'nohost' names no host and port"),
            std::string::npos)
      << testing::ReadFile(malformed);
}

}  // namespace
}  // namespace airt::e2e
