#include "head/redis_metadata_store.h"

#include <charconv>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include "common/logging.h"

namespace airt::head {
namespace {

constexpr std::string_view kMarkerKey = "head:marker";
constexpr size_t kMgetChunk = 512;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

timeval ToTimeval(uint32_t ms) {
  return timeval{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
}

// SCAN's MATCH pattern for the keys starting with `prefix`.
std::string GlobPrefix(std::string_view prefix) {
  std::string out;
  for (char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('*');
  return out;
}

using Rows = std::map<std::string, std::string, std::less<>>;

}  // namespace

// Owns the connection and the thread. The queue and the copy of the rows are shared with the
// head's thread under `mu_`; the connection is the worker thread's alone (and Connect's, before
// the thread starts).
class RedisMetadataStore::Worker {
 public:
  explicit Worker(RedisOptions options)
      : options_(std::move(options)),
        where_("Redis at " + options_.host + ":" + std::to_string(options_.port)) {}

  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    for (Job& job : queue_) job.done->fulfill(Unavailable(where_ + ": the head is stopping"));
    Disconnect();
  }

  // Connects and reads every row under the prefix into the copy; then starts the thread.
  Status Start() {
    AIRT_RETURN_IF_ERROR(Reconnect(/*restore=*/false));
    Result<Rows> rows = ReadAll();
    if (!rows.ok()) return rows.status();
    rows->erase(std::string(kMarkerKey));
    {
      std::lock_guard<std::mutex> lock(mu_);
      rows_ = std::move(*rows);
    }
    thread_ = std::thread([this] { Run(); });
    return Status::Ok();
  }

  std::vector<Row> Scan(std::string_view prefix) {
    std::lock_guard<std::mutex> lock(mu_);
    return ScanRows(rows_, prefix);
  }

  kj::Promise<Status> Write(WriteBatch batch) {
    auto paf = kj::newPromiseAndCrossThreadFulfiller<Status>();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back({std::move(batch), kj::mv(paf.fulfiller)});
    }
    cv_.notify_one();
    return kj::mv(paf.promise);
  }

 private:
  struct Job {
    WriteBatch batch;
    kj::Own<kj::CrossThreadPromiseFulfiller<Status>> done;
  };

  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(options_.check_interval_ms),
                   [this] { return stop_ || !queue_.empty(); });
      if (stop_) break;
      std::deque<Job> jobs;
      jobs.swap(queue_);
      lock.unlock();
      if (jobs.empty()) {
        CheckConnection();
      } else {
        WriteAll(jobs);
      }
      lock.lock();
    }
  }

  // Idle: a lost connection is noticed (PING) and made again, which restores the rows of a
  // Redis that came back empty.
  void CheckConnection() {
    if (ctx_ != nullptr) {
      Reply pong(static_cast<redisReply*>(redisCommand(ctx_, "PING")));
      if (pong && pong->type != REDIS_REPLY_ERROR) return;
      AIRT_LOG(WARNING) << where_ << " stopped answering: "
                        << (pong ? std::string(pong->str, pong->len) : std::string(ctx_->errstr))
                        << "; reconnecting";
      Disconnect();
    }
    if (Status s = Reconnect(/*restore=*/true); s.ok()) {
      AIRT_LOG(INFO) << "reconnected to " << where_;
    }
  }

  // Writes every job's batch, pipelined, and fulfills each. A lost connection is made again once
  // and the unfinished batches sent again (each batch sets whole rows: sending it twice is
  // harmless); then they fail with kUnavailable.
  void WriteAll(std::deque<Job>& jobs) {
    for (int attempt = 0; attempt < 2 && !jobs.empty(); ++attempt) {
      if (ctx_ == nullptr) {
        if (Status s = Reconnect(/*restore=*/true); !s.ok()) break;
      }
      for (const Job& job : jobs) AppendBatch(job.batch);
      while (!jobs.empty()) {
        Status s = ReadBatchReply(jobs.front().batch.size());
        if (s.code() == Code::kUnavailable && ctx_ == nullptr) break;  // connection lost
        if (s.ok()) {
          std::lock_guard<std::mutex> lock(mu_);
          ApplyBatch(jobs.front().batch, rows_);
        }
        jobs.front().done->fulfill(std::move(s));
        jobs.pop_front();
      }
    }
    for (Job& job : jobs) {
      job.done->fulfill(
          Unavailable(last_error_.empty() ? where_ + " cannot be reached" : last_error_));
    }
  }

  void AppendCommand(std::initializer_list<std::string_view> args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data());
  }

  void AppendBatch(const WriteBatch& batch) {
    AppendCommand({"MULTI"});
    for (const WriteBatch::Mutation& m : batch.mutations()) {
      std::string key = options_.key_prefix + m.key;
      if (m.value) {
        AppendCommand({"SET", key, *m.value});
      } else {
        AppendCommand({"DEL", key});
      }
    }
    AppendCommand({"EXEC"});
  }

  // One reply; a lost connection is kUnavailable (and drops the context).
  Result<Reply> ReadReply() {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
      last_error_ = where_ + " cannot be reached: " + ctx_->errstr;
      Disconnect();
      return Unavailable(last_error_);
    }
    return Reply(static_cast<redisReply*>(raw));
  }

  // Reads MULTI's, each QUEUED and EXEC's reply. An error reply is kUnavailable naming it (Redis
  // applied nothing: the transaction was discarded).
  Status ReadBatchReply(size_t commands) {
    Status first = Status::Ok();
    for (size_t i = 0; i < commands + 2; ++i) {
      Result<Reply> reply = ReadReply();
      if (!reply.ok()) return reply.status();
      if ((*reply)->type == REDIS_REPLY_ERROR && first.ok()) {
        first = Unavailable(where_ +
                            " refused the write: " + std::string((*reply)->str, (*reply)->len));
      } else if (i == commands + 1 && (*reply)->type != REDIS_REPLY_ARRAY && first.ok()) {
        first = Unavailable(where_ + " discarded the write");
      }
    }
    return first;
  }

  Result<Reply> Command(std::initializer_list<std::string_view> args) {
    AppendCommand(args);
    AIRT_ASSIGN_OR_RETURN(Reply reply, ReadReply());
    if (reply->type == REDIS_REPLY_ERROR) {
      return Unavailable(where_ + " answered " + std::string(*args.begin()) + ": " +
                         std::string(reply->str, reply->len));
    }
    return reply;
  }

  // Connects and authenticates. With `restore`, a Redis without the marker gets the copy back.
  // Not connected after a failure.
  Status Reconnect(bool restore) {
    Status s = ConnectAndCheck(restore);
    if (!s.ok()) {
      last_error_ = s.message();
      Disconnect();
    }
    return s;
  }

  Status ConnectAndCheck(bool restore) {
    Disconnect();
    timeval tv = ToTimeval(options_.timeout_ms);
    ctx_ = redisConnectWithTimeout(options_.host.c_str(), options_.port, tv);
    if (ctx_ == nullptr || ctx_->err) {
      return Unavailable(where_ + " cannot be reached: " +
                         (ctx_ ? std::string(ctx_->errstr) : std::string("out of memory")));
    }
    redisSetTimeout(ctx_, tv);
    if (!options_.password.empty()) {
      Result<Reply> auth = Command({"AUTH", options_.password});
      if (!auth.ok()) return InvalidArgument(auth.status().message() + " (check --redis-password)");
    }
    std::string marker = options_.key_prefix + std::string(kMarkerKey);
    Result<Reply> exists = Command({"EXISTS", marker});
    if (!exists.ok()) return exists.status();
    if ((*exists)->integer == 1) return Status::Ok();
    WriteBatch all;
    if (restore) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [key, value] : rows_) all.Put(key, value);
    }
    all.Put(std::string(kMarkerKey), "airt-head");
    AppendBatch(all);
    Status written = ReadBatchReply(all.size());
    if (!written.ok()) return written;
    if (restore) {
      AIRT_LOG(WARNING) << where_ << " came back without the head's rows (its marker " << marker
                        << " is gone); wrote all " << all.size() - 1 << " rows again";
    }
    return Status::Ok();
  }

  // Every row under the prefix (SCAN, then MGET), keyed without the prefix.
  Result<Rows> ReadAll() {
    std::vector<std::string> keys;
    std::string cursor = "0";
    std::string pattern = GlobPrefix(options_.key_prefix);
    do {
      AIRT_ASSIGN_OR_RETURN(Reply page,
                            Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}));
      if (page->type != REDIS_REPLY_ARRAY || page->elements != 2) {
        return Internal(where_ + " answered SCAN with something other than [cursor, keys]");
      }
      cursor.assign(page->element[0]->str, page->element[0]->len);
      const redisReply* found = page->element[1];
      for (size_t i = 0; i < found->elements; ++i) {
        keys.emplace_back(found->element[i]->str, found->element[i]->len);
      }
    } while (cursor != "0");
    Rows rows;
    for (size_t start = 0; start < keys.size(); start += kMgetChunk) {
      size_t n = std::min(kMgetChunk, keys.size() - start);
      std::vector<const char*> argv = {"MGET"};
      std::vector<size_t> lens = {4};
      for (size_t i = start; i < start + n; ++i) {
        argv.push_back(keys[i].data());
        lens.push_back(keys[i].size());
      }
      redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data());
      AIRT_ASSIGN_OR_RETURN(Reply values, ReadReply());
      if (values->type != REDIS_REPLY_ARRAY || values->elements != n) {
        return Internal(where_ + " answered MGET with " + std::to_string(values->elements) +
                        " values for " + std::to_string(n) + " keys");
      }
      for (size_t i = 0; i < n; ++i) {
        const redisReply* v = values->element[i];
        if (v->type != REDIS_REPLY_STRING) continue;  // deleted since SCAN
        rows.emplace(keys[start + i].substr(options_.key_prefix.size()),
                     std::string(v->str, v->len));
      }
    }
    return rows;
  }

  void Disconnect() {
    if (ctx_ != nullptr) redisFree(ctx_);
    ctx_ = nullptr;
  }

  const RedisOptions options_;
  const std::string where_;
  redisContext* ctx_ = nullptr;  // the worker thread's (Start's before it runs)
  std::string last_error_;       // the worker thread's
  std::thread thread_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;      // guarded by mu_
  std::deque<Job> queue_;  // guarded by mu_
  Rows rows_;              // guarded by mu_: what Redis holds under the prefix, as confirmed
};

Result<std::unique_ptr<RedisMetadataStore>> RedisMetadataStore::Connect(
    const RedisOptions& options) {
  auto worker = std::make_unique<Worker>(options);
  AIRT_RETURN_IF_ERROR(worker->Start());
  return std::unique_ptr<RedisMetadataStore>(new RedisMetadataStore(std::move(worker)));
}

RedisMetadataStore::RedisMetadataStore(std::unique_ptr<Worker> worker)
    : worker_(std::move(worker)) {}

RedisMetadataStore::~RedisMetadataStore() = default;

Result<std::vector<Row>> RedisMetadataStore::Scan(std::string_view prefix) {
  return worker_->Scan(prefix);
}

kj::Promise<Status> RedisMetadataStore::Write(WriteBatch batch) {
  return worker_->Write(std::move(batch));
}

Result<RedisOptions> ParseRedisAddress(std::string_view address, std::string_view flag) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument(std::string(flag) + " '" + std::string(address) + "' " + why +
                           " (expected HOST:PORT)");
  };
  size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad("names no host and port");
  std::string_view port_text = address.substr(colon + 1);
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
      port > 65535) {
    return bad("has no port between 1 and 65535");
  }
  RedisOptions options;
  options.host = std::string(address.substr(0, colon));
  options.port = static_cast<uint16_t>(port);
  return options;
}

}  // namespace airt::head
