// The head's table writes to Redis beside plain hiredis, against one redis-server this benchmark
// starts (on a free loopback port, in memory, stopped by pid), for values of 100 B, 1 KiB and
// 10 KiB. One write is one mutation with its own key, counted once Redis replied:
//   store, queued        N RedisMetadataStore::Write calls made at once (the store pipelines what
//                        is queued, one MULTI/EXEC per write), timed until the last is confirmed;
//   store, one by one    each Write made once the previous one was confirmed, as the head's
//                        commits go (head/head.h: one write at a time, in order);
//   hiredis pipelined    a plain loop of SET commands, 1000 in flight, then their replies;
//   hiredis one by one   SET, wait for its reply, next.
// Prints writes/s and MB/s (1e6 bytes of values) of each, and each store figure over the hiredis
// loop of the same kind (queued over pipelined, one by one over one by one). Never fails on time.
//   build/bench/redis_write_bench [--writes N] [--quick] [--redis-server PATH]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <kj/async-io.h>
#include <kj/vector.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "bench/bench_support.h"
#include "common/flags.h"
#include "common/process.h"
#include "head/redis_metadata_store.h"
#include "tests/testing/redis_server.h"  // redis-server and a free port, as the tests find them

namespace airt::bench {
namespace {

using head::RedisMetadataStore;
using head::RedisOptions;
using head::WriteBatch;

constexpr size_t kWindow = 1000;  // SETs in flight in the hiredis pipelined loop

using testing::BinaryOnPath;
using testing::FreePort;

struct Figure {
  double writes_per_s = 0;
  double mb_per_s = 0;
};

Figure Rate(size_t writes, size_t size, Clock::duration elapsed) {
  double s = Seconds(elapsed);
  return {writes / s, writes * static_cast<double>(size) / s / 1e6};
}

std::string Key(const std::string& run, size_t i) { return run + ":" + std::to_string(i); }

// A plain hiredis connection for the baselines and for FLUSHALL between runs.
class Plain {
 public:
  explicit Plain(uint16_t port) : ctx_(redisConnect("127.0.0.1", port)) {
    if (ctx_ == nullptr || ctx_->err) {
      Die(Unavailable(ctx_ ? ctx_->errstr : "out of memory"), "connect to redis-server");
    }
  }
  ~Plain() { redisFree(ctx_); }

  void Command(const char* text) {
    auto* reply = static_cast<redisReply*>(redisCommand(ctx_, text));
    if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) Die(Internal(text), "redis");
    freeReplyObject(reply);
  }

  // SETs of `run`:0..n-1, `window` in flight at once (1: one by one).
  Figure Sets(const std::string& run, size_t n, const std::string& value, size_t window) {
    Clock::time_point start = Clock::now();
    for (size_t sent = 0; sent < n;) {
      size_t batch = std::min(window, n - sent);
      for (size_t i = 0; i < batch; ++i) {
        std::string key = Key(run, sent + i);
        const char* argv[] = {"SET", key.data(), value.data()};
        size_t lens[] = {3, key.size(), value.size()};
        redisAppendCommandArgv(ctx_, 3, argv, lens);
      }
      for (size_t i = 0; i < batch; ++i) {
        void* reply = nullptr;
        if (redisGetReply(ctx_, &reply) != REDIS_OK || reply == nullptr) {
          Die(Unavailable(ctx_->errstr), "SET");
        }
        freeReplyObject(reply);
      }
      sent += batch;
    }
    return Rate(n, value.size(), Clock::now() - start);
  }

 private:
  redisContext* ctx_;
};

std::unique_ptr<RedisMetadataStore> OpenStore(uint16_t port, const std::string& prefix) {
  RedisOptions options;
  options.port = port;
  options.key_prefix = prefix;
  Result<std::unique_ptr<RedisMetadataStore>> store = RedisMetadataStore::Connect(options);
  if (!store.ok()) Die(store.status(), "RedisMetadataStore::Connect");
  return std::move(*store);
}

WriteBatch OneRow(const std::string& run, size_t i, const std::string& value) {
  WriteBatch batch;
  batch.Put(Key(run, i), value);
  return batch;
}

// N writes made at once; timed until the last is confirmed.
Figure StoreQueued(kj::WaitScope& wait, uint16_t port, size_t n, const std::string& value) {
  std::unique_ptr<RedisMetadataStore> store = OpenStore(port, "bench:queued:");
  Clock::time_point start = Clock::now();
  kj::Vector<kj::Promise<Status>> writes(n);
  for (size_t i = 0; i < n; ++i) writes.add(store->Write(OneRow("q", i, value)));
  kj::Array<Status> done = kj::joinPromises(writes.releaseAsArray()).wait(wait);
  Clock::duration elapsed = Clock::now() - start;
  for (const Status& s : done) {
    if (!s.ok()) Die(s, "a queued write");
  }
  return Rate(n, value.size(), elapsed);
}

// Each write made once the previous one was confirmed.
Figure StoreOneByOne(kj::WaitScope& wait, uint16_t port, size_t n, const std::string& value) {
  std::unique_ptr<RedisMetadataStore> store = OpenStore(port, "bench:serial:");
  Clock::time_point start = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    Status s = store->Write(OneRow("s", i, value)).wait(wait);
    if (!s.ok()) Die(s, "a write");
  }
  return Rate(n, value.size(), Clock::now() - start);
}

void Print(const char* what, size_t size, size_t n, const Figure& f, const Figure& base) {
  std::printf("%-20s %7zu %8zu %12.0f %10.1f %10.2f\n", what, size, n, f.writes_per_s, f.mb_per_s,
              f.writes_per_s / base.writes_per_s);
}

}  // namespace
}  // namespace airt::bench

int main(int argc, char** argv) {
  using namespace airt::bench;
  airt::InitProcess("redis_write_bench");
  uint64_t writes = 20000;
  bool quick = false;
  std::string redis_server = BinaryOnPath("redis-server");
  airt::FlagSet flags("redis_write_bench");
  flags.AddUint64("writes", &writes, "writes per size and way (10 KiB values: a quarter)");
  flags.AddBool("quick", &quick, "500 writes per size and way (for smoke runs)");
  flags.AddString("redis-server", &redis_server, "the redis-server to start (default: on PATH)");
  if (airt::Status s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "%s\n%s", s.message().c_str(), flags.Usage().c_str());
    return s.code() == airt::Code::kCancelled ? 0 : 2;
  }
  if (redis_server.empty()) Die(airt::NotFound("redis-server is not on PATH"), "start Redis");
  if (quick) writes = 500;

  ScratchDir dir;
  uint16_t port = FreePort();
  DaemonProcess redis({redis_server, "--port", std::to_string(port), "--bind", "127.0.0.1",
                       "--save", "", "--appendonly", "no", "--dir", dir.path()},
                      dir.path() + "/redis.log");
  for (int i = 0;; ++i) {
    redisContext* probe = redisConnect("127.0.0.1", port);
    bool up = probe != nullptr && probe->err == 0;
    redisFree(probe);
    if (up) break;
    if (i == 100)
      Die(airt::Unavailable("redis-server did not start: " + ReadFile(dir.path() + "/redis.log")),
          "start Redis");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  auto io = kj::setupAsyncIo();
  Plain plain(port);

  std::printf(
      "redis_write_bench: %s on 127.0.0.1:%u, in memory; one write = one key, counted "
      "once Redis replied\n\n",
      redis_server.c_str(), port);
  std::printf("%-20s %7s %8s %12s %10s %10s\n", "way", "bytes", "writes", "writes/s", "MB/s",
              "/ hiredis");
  for (size_t size : {size_t{100}, size_t{1024}, size_t{10240}}) {
    size_t n = size >= 10240 ? std::max<size_t>(writes / 4, 1) : writes;
    std::string value(size, 'v');
    plain.Command("FLUSHALL");
    Figure pipelined = plain.Sets("p", n, value, kWindow);
    Figure serial = plain.Sets("o", n, value, 1);
    Figure queued = StoreQueued(io.waitScope, port, n, value);
    Figure one_by_one = StoreOneByOne(io.waitScope, port, n, value);
    Print("hiredis pipelined", size, n, pipelined, pipelined);
    Print("store, queued", size, n, queued, pipelined);
    Print("hiredis one by one", size, n, serial, serial);
    Print("store, one by one", size, n, one_by_one, serial);
    std::printf("\n");
  }
  return 0;
}
