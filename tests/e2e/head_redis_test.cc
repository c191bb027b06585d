// airt-head processes over a real redis-server (--redis-address), each redis-server started by the
// test on a free loopback port in its own temp folder, without persistence, and stopped by pid:
// a head killed with SIGKILL and started again reloads its nodes, jobs, actors and KV; a Redis
// restarted empty gets the head's rows written again; AUTH; two key prefixes on one Redis stay
// apart; and a head whose port is taken names what holds it (Redis lost while the head runs:
// head_redis_outage_test.cc). Skipped where redis-server is not installed.
#include "tests/e2e/head_redis_fixture.h"

namespace airt::e2e {
namespace {

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

// request_resources (the autoscaler's standing floor) is a row of its own: a head killed with
// kill -9 and started again on the same Redis still asks for it, until it is cleared.
TEST_F(HeadRedisTest, AStandingResourceRequestOutlivesAKilledHead) {
  ASSERT_NO_FATAL_FAILURE(StartRedis());
  std::vector<std::string> flags = {RedisFlag()};
  Head* first = StartHead(flags);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(CatchKj([&] {
                auto request = first->head().requestResourcesRequest();
                auto resources = request.initBundles(1)[0].initResources(1);
                resources[0].setName("GPU");
                resources[0].setAmount(8);
                request.send().wait(first->wait());
              }).ok());
  KillHead(first);

  Head* second = StartHead(flags);
  ASSERT_NE(second, nullptr);
  auto requested = [](Head* h) {
    std::vector<std::pair<std::string, double>> out;
    Status s = CatchKj([&] {
      auto request = h->head().waitDemandRequest();
      request.setSinceVersion(0);  // answered at once with the current demand
      auto reply = request.send().wait(h->wait());
      for (auto bundle : reply.getDemand().getRequested()) {
        for (auto r : bundle.getResources()) out.emplace_back(r.getName().cStr(), r.getAmount());
      }
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  };
  EXPECT_EQ(requested(second), (std::vector<std::pair<std::string, double>>{{"GPU", 8}}));

  ASSERT_TRUE(CatchKj([&] {
                second->head().requestResourcesRequest().send().wait(second->wait());
              }).ok());
  KillHead(second);
  Head* third = StartHead(flags);
  ASSERT_NE(third, nullptr);
  EXPECT_TRUE(requested(third).empty()) << "clearing it is kept too";
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
