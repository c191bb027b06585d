// The head's durable tables sit on a MetadataStore (STYLE.md rule 8): a flat map from byte-string
// keys to byte-string values. The head keeps everything it must not forget there (node rows, job
// rows, actor rows, the internal KV) and nothing else, and holds the same rows in memory: the
// store is read once, when the head starts, and written through after that.
// InMemoryMetadataStore is the default; RedisMetadataStore (head/redis_metadata_store.h,
// `--redis-address`) outlives the head; tests/head/ has a fault-injecting one.
//
// Key layout used by the head (see head/internal/): "node:<seq>:<node id hex>", "job:<job hex>",
// "actor:<actor id hex>", "kv:<namespace length>:<namespace><key>", "pg:...", and
// "demand:requested" (the standing request_resources call).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <kj/async.h>

#include "common/status.h"

namespace airt::head {

struct Row {
  std::string key;
  std::string value;
  friend bool operator==(const Row&, const Row&) = default;
};

// Puts and deletes to apply together, in order (a later mutation of a key wins).
class WriteBatch {
 public:
  struct Mutation {
    std::string key;
    std::optional<std::string> value;  // nullopt: delete the key
  };

  void Put(std::string key, std::string value) {
    mutations_.push_back({std::move(key), std::move(value)});
  }
  void Delete(std::string key) { mutations_.push_back({std::move(key), std::nullopt}); }
  // Appends every mutation of `other` after this batch's own.
  void Append(WriteBatch other);

  const std::vector<Mutation>& mutations() const { return mutations_; }
  bool empty() const { return mutations_.empty(); }
  size_t size() const { return mutations_.size(); }

 private:
  std::vector<Mutation> mutations_;
};

// Called from one thread, the head's loop thread; implementations need not be thread-safe.
// Errors: kUnavailable when a backing service cannot be reached (the caller may retry);
// kInternal for anything else.
class MetadataStore {
 public:
  virtual ~MetadataStore() = default;

  // Every row whose key starts with `prefix`, in ascending byte order of the keys. May block the
  // calling thread: the head reads only while it loads, before it serves.
  virtual Result<std::vector<Row>> Scan(std::string_view prefix) = 0;

  // Applies every mutation of `batch` at once: a reader of the store sees all of them or none.
  // Never blocks; the promise resolves on the calling thread's KJ event loop once the store
  // confirmed the write (ok), or with the store's error, when none of it was applied. Dropping
  // the promise does not stop the write. Writes are applied in the order they were made.
  virtual kj::Promise<Status> Write(WriteBatch batch) = 0;

  // The value under `key`, or nullopt (through Scan: for loading and tests).
  Result<std::optional<std::string>> Get(std::string_view key);
};

// Keeps everything in this process: what is stored lives as long as the object. Never fails;
// Write's promise is ready at once.
class InMemoryMetadataStore final : public MetadataStore {
 public:
  Result<std::vector<Row>> Scan(std::string_view prefix) override;
  kj::Promise<Status> Write(WriteBatch batch) override;

  size_t size() const { return rows_.size(); }

 private:
  std::map<std::string, std::string, std::less<>> rows_;
};

// Applies `batch` to `rows` in order (shared by the stores that keep rows in a map).
void ApplyBatch(const WriteBatch& batch, std::map<std::string, std::string, std::less<>>& rows);
// The rows of `rows` whose key starts with `prefix`, in key order.
std::vector<Row> ScanRows(const std::map<std::string, std::string, std::less<>>& rows,
                          std::string_view prefix);

}  // namespace airt::head
