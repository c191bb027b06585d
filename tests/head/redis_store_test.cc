// RedisMetadataStore against a real redis-server the test starts on a free loopback port (in its
// own temp folder, stopped by pid): writes made while Redis is down wait and complete in order once
// it is back; past the retry timeout they fail with kUnavailable naming the address and how long
// they were tried; and a write that failed although Redis applied it (its reply lost) is undone
// when the store reconnects, so that Redis holds only confirmed writes. Skipped where
// redis-server is not installed.
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <kj/async-io.h>

#include "head/redis_metadata_store.h"
#include "tests/testing/redis_server.h"
#include "tests/testing/test_support.h"

namespace airt::head {
namespace {

using namespace std::chrono_literals;

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_bin_ = testing::RedisServerBinary();
    if (redis_bin_.empty()) GTEST_SKIP() << "skipped: redis-server not installed";
    port_ = testing::FreePort();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << testing::ReadFile(dir_.File("redis.log")) << "\n";
  }

  // Starts redis-server on port_ with an append-only file in one folder (so that it starts again
  // with what it held) and DEBUG allowed. Use under ASSERT_NO_FATAL_FAILURE.
  void StartRedis() {
    std::string dir = dir_.File("redis");
    std::filesystem::create_directories(dir);
    redis_ = std::make_unique<testing::ChildProcess>(
        std::vector<std::string>{redis_bin_, "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                 "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                                 "--enable-debug-command", "yes", "--dir", dir},
        dir_.File("redis.log"));
    ASSERT_TRUE(
        testing::WaitUntil([&] { return testing::Accepts(port_) || !redis_->Running(); }, 10s));
    ASSERT_TRUE(redis_->Running()) << "redis-server exited";
  }
  void StopRedis() {
    redis_->Kill(SIGKILL);
    redis_->Wait(10s);
    ASSERT_TRUE(testing::WaitUntil([&] { return !testing::Accepts(port_); }, 10s));
  }

  RedisOptions Options() {
    RedisOptions options;
    options.port = port_;
    options.key_prefix = "t:";
    options.retry_initial_backoff_ms = 20;
    options.retry_max_backoff_ms = 100;
    return options;
  }

  // The value Redis holds under `key` (read over a connection of the test's own).
  std::optional<std::string> RedisGet(const std::string& key) {
    redisContext* ctx = redisConnect("127.0.0.1", port_);
    EXPECT_TRUE(ctx != nullptr && ctx->err == 0);
    auto* reply = static_cast<redisReply*>(redisCommand(ctx, "GET %b", key.data(), key.size()));
    std::optional<std::string> value;
    if (reply != nullptr && reply->type == REDIS_REPLY_STRING)
      value.emplace(reply->str, reply->len);
    if (reply != nullptr) freeReplyObject(reply);
    redisFree(ctx);
    return value;
  }

  static WriteBatch Put(const std::string& key, const std::string& value) {
    WriteBatch batch;
    batch.Put(key, value);
    return batch;
  }

  // Held by pointer: the context's destructor may throw, which a test's destructor may not.
  std::unique_ptr<kj::AsyncIoContext> io_ =
      std::make_unique<kj::AsyncIoContext>(kj::setupAsyncIo());
  kj::WaitScope& wait() { return io_->waitScope; }
  testing::TempDir dir_;
  std::string redis_bin_;
  uint16_t port_ = 0;
  std::unique_ptr<testing::ChildProcess> redis_;
};

TEST_F(RedisStoreTest, WritesMadeWhileRedisIsDownWaitAndCompleteInOrderWhenItIsBack) {
  ASSERT_NO_FATAL_FAILURE(StartRedis());
  auto store = RedisMetadataStore::Connect(Options());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Write(Put("kept", "1")).wait(wait()).ok());
  ASSERT_NO_FATAL_FAILURE(StopRedis());

  std::vector<kj::Promise<Status>> writes;
  for (int i = 0; i < 4; ++i) writes.push_back((*store)->Write(Put("k", std::to_string(i))));
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(writes.front().poll(wait())) << "confirmed with Redis down";
  EXPECT_EQ(*(*store)->Get("kept"), "1");
  EXPECT_FALSE((*store)->Get("k")->has_value()) << "not confirmed: not in the store's rows";

  ASSERT_NO_FATAL_FAILURE(StartRedis());
  for (kj::Promise<Status>& write : writes) {
    Status s = write.wait(wait());
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(RedisGet("t:k"), "3");
  EXPECT_EQ(RedisGet("t:kept"), "1");
  EXPECT_EQ(*(*store)->Get("k"), "3");
}

TEST_F(RedisStoreTest, PastTheRetryTimeoutWritesFailNamingTheAddressAndHowLong) {
  ASSERT_NO_FATAL_FAILURE(StartRedis());
  RedisOptions options = Options();
  options.retry_timeout_ms = 300;
  auto store = RedisMetadataStore::Connect(options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_NO_FATAL_FAILURE(StopRedis());
  kj::Promise<Status> first = (*store)->Write(Put("a", "1"));
  kj::Promise<Status> second = (*store)->Write(Put("b", "2"));
  for (kj::Promise<Status>* write : {&first, &second}) {
    Status s = write->wait(wait());
    EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("Redis at 127.0.0.1:" + std::to_string(port_)), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("gave up after retrying for"), std::string::npos) << s.message();
  }
  EXPECT_FALSE((*store)->Get("a")->has_value());
  // While Redis stays away, a later write fails after one try.
  EXPECT_EQ((*store)->Write(Put("c", "3")).wait(wait()).code(), Code::kUnavailable);
  ASSERT_NO_FATAL_FAILURE(StartRedis());
  // Back (once it has loaded its append-only file, LOADING before that): writes succeed again.
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return (*store)->Write(Put("d", "4")).wait(wait()).ok(); }, 10s));
  EXPECT_EQ(RedisGet("t:d"), "4");
  EXPECT_FALSE(RedisGet("t:a").has_value());
}

// Redis asleep (DEBUG SLEEP) takes the write but answers too late: the store gives up on it,
// Redis applies it when it wakes, and the store's next connection puts the key back as confirmed.
TEST_F(RedisStoreTest, AWriteRedisAppliedAfterItFailedIsUndoneOnReconnect) {
  ASSERT_NO_FATAL_FAILURE(StartRedis());
  RedisOptions options = Options();
  options.timeout_ms = 200;
  options.retry_timeout_ms = 100;
  options.check_interval_ms = 600000;  // no idle reconnect: the next write makes it
  auto store = RedisMetadataStore::Connect(options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Write(Put("row", "confirmed")).wait(wait()).ok());

  std::thread sleeper([port = port_] {
    redisContext* ctx = redisConnect("127.0.0.1", port);
    if (ctx == nullptr) return;
    if (auto* reply = static_cast<redisReply*>(redisCommand(ctx, "DEBUG SLEEP 2"))) {
      freeReplyObject(reply);
    }
    redisFree(ctx);
  });
  std::this_thread::sleep_for(200ms);  // Redis is asleep
  WriteBatch late;
  late.Put("row", "failed");
  late.Put("new", "failed");
  Status failed = (*store)->Write(std::move(late)).wait(wait());
  EXPECT_EQ(failed.code(), Code::kUnavailable) << failed.ToString();
  sleeper.join();
  ASSERT_TRUE(testing::WaitUntil([&] { return RedisGet("t:row") == "failed"; }, 5s))
      << "Redis applies the write once it wakes, after the store gave up on it";
  EXPECT_EQ(*(*store)->Get("row"), "confirmed");

  // The next write reconnects, which first sets the failed write's keys back.
  ASSERT_TRUE((*store)->Write(Put("other", "x")).wait(wait()).ok());
  EXPECT_EQ(RedisGet("t:row"), "confirmed");
  EXPECT_FALSE(RedisGet("t:new").has_value());
  EXPECT_EQ(RedisGet("t:other"), "x");
}

}  // namespace
}  // namespace airt::head
