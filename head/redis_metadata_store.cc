#include "head/redis_metadata_store.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
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
using SteadyClock = std::chrono::steady_clock;

// Error replies of a Redis that will take the write shortly: loading its data set, busy with a
// script, or a replica without its primary.
bool Transient(std::string_view error) {
  for (std::string_view word : {"LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN"}) {
    if (error.substr(0, word.size()) == word) return true;
  }
  return false;
}

std::string Seconds(SteadyClock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f",
                std::chrono::duration_cast<std::chrono::duration<double>>(d).count());
  return text;
}

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
    for (std::deque<Job>* jobs : {&pending_, &queue_}) {
      for (Job& job : *jobs) job.done->fulfill(Unavailable(where_ + ": the head is stopping"));
    }
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

  // Waits for writes (or, idle, check_interval_ms, then checks the connection); while writes
  // wait for a Redis that went away, tries again at each backoff's end (writes queued meanwhile
  // go behind them).
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (!pending_.empty()) {
        cv_.wait_until(lock, next_attempt_, [this] { return stop_; });
      } else if (queue_.empty()) {
        cv_.wait_for(lock, std::chrono::milliseconds(options_.check_interval_ms),
                     [this] { return stop_ || !queue_.empty(); });
      }
      if (stop_) break;
      for (Job& job : queue_) pending_.push_back(std::move(job));
      queue_.clear();
      lock.unlock();
      if (pending_.empty()) {
        CheckConnection();
      } else {
        WriteAll();
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
      last_error_ = where_ + " stopped answering: " +
                    (pong ? std::string(pong->str, pong->len) : std::string(ctx_->errstr));
      Disconnect();
    }
    if (Status s = Reconnect(/*restore=*/true); s.ok()) {
      Recovered();
    } else {
      Outage();
    }
  }

  // Writes every pending job's batch, pipelined, and fulfills each as Redis confirms it. A lost
  // connection (or a Redis still loading) leaves the unconfirmed jobs pending, tried again, in
  // order, after a backoff (each batch sets or deletes whole rows: sending it twice is harmless).
  void WriteAll() {
    if (ctx_ == nullptr && !Reconnect(/*restore=*/true).ok()) return Retry();
    for (const Job& job : pending_) AppendBatch(job.batch);
    while (!pending_.empty()) {
      Status s = ReadBatchReply(pending_.front().batch);
      if (ctx_ == nullptr) return Retry();  // lost, or a transient refusal: its replies dropped
      if (s.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        ApplyBatch(pending_.front().batch, rows_);
      }
      pending_.front().done->fulfill(std::move(s));
      pending_.pop_front();
    }
    Recovered();
  }

  // Records the start of an outage (the first failure since Redis last answered).
  void Outage() {
    if (outage_) return;
    outage_ = true;
    outage_since_ = SteadyClock::now();
    attempts_ = 0;
    backoff_ms_ = std::max<uint32_t>(options_.retry_initial_backoff_ms, 1);
    AIRT_LOG(WARNING) << last_error_ << "; writes wait for it, retried for up to "
                      << options_.retry_timeout_ms / 1000.0 << " s";
  }

  // The pending jobs failed to reach Redis: tried again after the next backoff, or, once the
  // outage is retry_timeout_ms old, failed with kUnavailable. A failed job may still have been
  // applied (its reply was lost), so its keys are set back to their confirmed rows on reconnect.
  void Retry() {
    Outage();
    ++attempts_;
    SteadyClock::time_point now = SteadyClock::now();
    if (now - outage_since_ < std::chrono::milliseconds(options_.retry_timeout_ms)) {
      next_attempt_ = now + std::chrono::milliseconds(backoff_ms_);
      backoff_ms_ = std::min(backoff_ms_ * 2, std::max<uint32_t>(options_.retry_max_backoff_ms, 1));
      return;
    }
    std::string why = (last_error_.empty() ? where_ + " cannot be reached" : last_error_) +
                      "; gave up after retrying for " + Seconds(now - outage_since_) + " s (" +
                      std::to_string(attempts_) + " attempts, --redis-retry-timeout-s)";
    for (Job& job : pending_) {
      for (const WriteBatch::Mutation& m : job.batch.mutations()) dirty_.insert(m.key);
      job.done->fulfill(Unavailable(why));
    }
    pending_.clear();
  }

  // Redis answered again after an outage.
  void Recovered() {
    if (!outage_) return;
    outage_ = false;
    AIRT_LOG(INFO) << "reconnected to " << where_ << " after "
                   << Seconds(SteadyClock::now() - outage_since_) << " s";
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

  // A batch of one mutation is its one command (atomic by itself); a larger one is a MULTI/EXEC
  // transaction.
  void AppendBatch(const WriteBatch& batch) {
    bool transaction = batch.size() != 1;
    if (transaction) AppendCommand({"MULTI"});
    for (const WriteBatch::Mutation& m : batch.mutations()) {
      std::string key = options_.key_prefix + m.key;
      if (m.value) {
        AppendCommand({"SET", key, *m.value});
      } else {
        AppendCommand({"DEL", key});
      }
    }
    if (transaction) AppendCommand({"EXEC"});
  }

  // One reply; a lost connection is kUnavailable (and drops the context).
  Result<Reply> ReadReply() {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
      std::string why = ctx_->errstr;
      if (why == std::strerror(EAGAIN)) {
        why = "no reply within " + std::to_string(options_.timeout_ms) + " ms";
      }
      last_error_ = where_ + " cannot be reached: " + why;
      Disconnect();
      return Unavailable(last_error_);
    }
    return Reply(static_cast<redisReply*>(raw));
  }

  // Reads the replies AppendBatch's commands get: MULTI's, each QUEUED and EXEC's (or the one
  // command's). An error reply is kUnavailable naming it (Redis applied nothing: the transaction
  // was discarded); a transient one also drops the connection.
  Status ReadBatchReply(const WriteBatch& batch) {
    size_t replies = batch.size() == 1 ? 1 : batch.size() + 2;
    Status first = Status::Ok();
    for (size_t i = 0; i < replies; ++i) {
      Result<Reply> reply = ReadReply();
      if (!reply.ok()) return reply.status();
      if ((*reply)->type == REDIS_REPLY_ERROR && first.ok()) {
        std::string error((*reply)->str, (*reply)->len);
        first = Unavailable(where_ + " refused the write: " + error);
        if (Transient(error)) {  // tried again: drop the connection and the replies still due
          last_error_ = first.message();
          Disconnect();
          return first;
        }
      } else if (replies > 1 && i == replies - 1 && (*reply)->type != REDIS_REPLY_ARRAY &&
                 first.ok()) {
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
    if ((*exists)->integer != 1) {
      WriteBatch all;
      if (restore) {
        std::lock_guard<std::mutex> lock(mu_);
        for (const auto& [key, value] : rows_) all.Put(key, value);
      }
      all.Put(std::string(kMarkerKey), "airt-head");
      AppendBatch(all);
      AIRT_RETURN_IF_ERROR(ReadBatchReply(all));
      if (restore) {
        AIRT_LOG(WARNING) << where_ << " came back without the head's rows (its marker " << marker
                          << " is gone); wrote all " << all.size() - 1 << " rows again";
      }
    }
    return Repair();
  }

  // Sets the keys of writes that failed after being sent back to their confirmed rows (or
  // deletes them), so that Redis holds what the head holds.
  Status Repair() {
    if (dirty_.empty()) return Status::Ok();
    WriteBatch repair;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const std::string& key : dirty_) {
        auto row = rows_.find(key);
        if (row != rows_.end()) {
          repair.Put(key, row->second);
        } else {
          repair.Delete(key);
        }
      }
    }
    AppendBatch(repair);
    AIRT_RETURN_IF_ERROR(ReadBatchReply(repair));
    AIRT_LOG(INFO) << "set " << dirty_.size() << " rows of failed writes in " << where_
                   << " back to what the head holds";
    dirty_.clear();
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
  // The worker thread's: the jobs being written (or waiting for Redis to come back), in order.
  std::deque<Job> pending_;
  bool outage_ = false;  // Redis has not answered since outage_since_
  SteadyClock::time_point outage_since_;
  SteadyClock::time_point next_attempt_;
  uint32_t attempts_ = 0;
  uint32_t backoff_ms_ = 0;
  std::set<std::string> dirty_;  // keys of failed writes Redis may hold anyway
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
