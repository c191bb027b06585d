// airt-head over a redis-server that goes away while the head runs (head_redis_fixture.h): the
// head keeps answering reads from memory, writes made meanwhile wait (retried with backoff) and
// complete, in order, once Redis is back, whether it comes back with its append-only file or empty
// (then the head writes its whole state again); past --redis-retry-timeout-s they fail with
// kUnavailable and change nothing, in the head or in Redis. The head never exits. Skipped where
// redis-server is not installed.
#include "tests/e2e/head_redis_fixture.h"

namespace airt::e2e {
namespace {

// Sends kvPut; the promise gives its outcome.
kj::Promise<Status> SendKvPut(Head* h, const std::string& ns, const std::string& key,
                              const std::string& value) {
  auto request = h->head().kvPutRequest();
  request.setNamespace(ns);
  request.setKey(key);
  request.setValue(
      capnp::Data::Reader(reinterpret_cast<const kj::byte*>(value.data()), value.size()));
  request.setOverwrite(true);
  return request.send().then([](auto) { return Status::Ok(); },
                             [](kj::Exception&& e) { return FromKjException(e); });
}

class HeadRedisOutageTest : public HeadRedisTest {
 protected:
  // Stops Redis under a head holding rows, writes while it is down (checking that reads are
  // answered and the writes wait), starts it again (`persist`: from its append-only file; else
  // empty), and checks that every write completed and that a head started again finds them all.
  void WritesWhileRedisIsDownCompleteOnceItIsBack(bool persist) {
    ASSERT_NO_FATAL_FAILURE(StartRedis("", persist));
    std::vector<std::string> flags = {RedisFlag(),
                                      "--redis-key-prefix=outage:", "--redis-retry-timeout-s=120",
                                      "--redis-retry-max-backoff-ms=200"};
    Head* head = StartHead(flags);
    ASSERT_NE(head, nullptr);
    NodeId node = NodeId::FromRandom();
    ASSERT_TRUE(RegisterNode(head, node).ok());
    ASSERT_TRUE(KvPut(head, "ns", "before", "1").ok());
    ASSERT_NO_FATAL_FAILURE(StopRedis());

    std::vector<kj::Promise<Status>> writes;
    for (int i = 0; i < 5; ++i) {
      writes.push_back(SendKvPut(head, "ns", "same", std::to_string(i)));
      writes.push_back(SendKvPut(head, "ns", "key-" + std::to_string(i), "v" + std::to_string(i)));
    }
    // The writes wait; meanwhile the head answers reads from memory, without them.
    for (int i = 0; i < 20; ++i) {
      EXPECT_FALSE(writes.front().poll(head->wait())) << "acknowledged with Redis down";
      EXPECT_EQ(**KvGet(head, "ns", "before"), "1");
      EXPECT_FALSE(KvGet(head, "ns", "key-0")->has_value());
      EXPECT_EQ(View(head).size(), 1u);
      std::this_thread::sleep_for(50ms);
    }
    ASSERT_NO_FATAL_FAILURE(StartRedis("", persist));
    for (kj::Promise<Status>& write : writes) {
      Status s = write.wait(head->wait());
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    EXPECT_EQ(**KvGet(head, "ns", "same"), "4") << "applied in the order they were made";
    ASSERT_TRUE(KvPut(head, "ns", "after", "2").ok());
    EXPECT_TRUE(head->process->Running());
    std::string log = testing::ReadFile(head->log);
    EXPECT_NE(log.find("writes wait for it"), std::string::npos) << log;
    EXPECT_NE(log.find("reconnected to Redis at"), std::string::npos) << log;
    EXPECT_EQ(log.find("came back without the head's rows") == std::string::npos, persist) << log;
    KillHead(head);

    Head* restarted = StartHead(flags);
    ASSERT_NE(restarted, nullptr);
    EXPECT_EQ(**KvGet(restarted, "ns", "before"), "1");
    EXPECT_EQ(**KvGet(restarted, "ns", "same"), "4");
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(**KvGet(restarted, "ns", "key-" + std::to_string(i)), "v" + std::to_string(i));
    }
    EXPECT_EQ(**KvGet(restarted, "ns", "after"), "2");
    EXPECT_EQ(View(restarted), (std::vector<std::pair<NodeId, bool>>{{node, true}}));
  }
};

TEST_F(HeadRedisOutageTest, WritesWhileRedisIsDownCompleteWhenItRestartsWithItsAppendOnlyFile) {
  WritesWhileRedisIsDownCompleteOnceItIsBack(/*persist=*/true);
}

TEST_F(HeadRedisOutageTest, WritesWhileRedisIsDownCompleteWhenItRestartsEmpty) {
  WritesWhileRedisIsDownCompleteOnceItIsBack(/*persist=*/false);
}

TEST_F(HeadRedisOutageTest, PastTheRetryTimeoutWritesFailWithUnavailableAndChangeNothing) {
  ASSERT_NO_FATAL_FAILURE(StartRedis("", /*persist=*/true));
  std::vector<std::string> flags = {RedisFlag(), "--redis-retry-timeout-s=1",
                                    "--redis-retry-max-backoff-ms=100"};
  Head* head = StartHead(flags);
  ASSERT_NE(head, nullptr);
  ASSERT_TRUE(KvPut(head, "ns", "kept", "v").ok());
  ASSERT_NO_FATAL_FAILURE(StopRedis());
  Status failed = KvPut(head, "ns", "new", "v");
  EXPECT_EQ(failed.code(), Code::kUnavailable) << failed.ToString();
  EXPECT_NE(failed.message().find("Redis at 127.0.0.1:" + std::to_string(redis_port_)),
            std::string::npos)
      << failed.message();
  EXPECT_NE(failed.message().find("gave up after retrying for"), std::string::npos)
      << failed.message();
  EXPECT_EQ(**KvGet(head, "ns", "kept"), "v") << "still serving what it holds";
  EXPECT_FALSE(KvGet(head, "ns", "new")->has_value()) << "the failed write changed nothing";
  // Redis stays away: later writes fail too (after one try), and the head keeps running.
  EXPECT_EQ(RegisterNode(head, NodeId::FromRandom()).code(), Code::kUnavailable);
  EXPECT_TRUE(View(head).empty());
  EXPECT_TRUE(head->process->Running());

  ASSERT_NO_FATAL_FAILURE(StartRedis("", /*persist=*/true));
  ASSERT_TRUE(testing::WaitUntil([&] { return KvPut(head, "ns", "back", "1").ok(); }, 20s));
  EXPECT_FALSE(KvGet(head, "ns", "new")->has_value());
  KillHead(head);
  Head* restarted = StartHead(flags);
  ASSERT_NE(restarted, nullptr);
  EXPECT_EQ(**KvGet(restarted, "ns", "kept"), "v");
  EXPECT_EQ(**KvGet(restarted, "ns", "back"), "1");
  EXPECT_FALSE(KvGet(restarted, "ns", "new")->has_value()) << "nor in Redis";
  EXPECT_TRUE(View(restarted).empty());
}

}  // namespace
}  // namespace airt::e2e
