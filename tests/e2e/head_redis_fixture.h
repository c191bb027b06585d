// The fixture of the airt-head tests over a real redis-server (head_redis_test.cc,
// head_redis_outage_test.cc): each test starts redis-server on a free loopback port in its own temp
// folder and stops it by pid, and drives airt-head processes it starts over RPC.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>

#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "common/rpc_status.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/test_support.h"

namespace airt::e2e {

using namespace std::chrono_literals;

using testing::Accepts;
using testing::FreePort;
using testing::RedisServerBinary;

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

  // Starts (or starts again, empty) redis-server on redis_port_; with `persist`, with an
  // append-only file (fsync'ed at every write) in one folder, so that it starts again with what it
  // held. Use under ASSERT_NO_FATAL_FAILURE.
  void StartRedis(const std::string& password = "", bool persist = false) {
    std::string dir = dir_.File(persist ? "redis-aof" : "redis-" + std::to_string(++redis_starts_));
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
                                     persist ? "yes" : "no",
                                     "--appendfsync",
                                     "always",
                                     "--dir",
                                     dir};
    if (!password.empty()) argv.insert(argv.end(), {"--requirepass", password});
    logs_.push_back(dir + "/redis-" + std::to_string(logs_.size()) + ".log");
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

}  // namespace airt::e2e
