// A MetadataStore in Redis (`airt-head --redis-address`), so that the head's tables outlive the
// head: a head restarted against the same Redis and key prefix reloads them.
//
// Every row is the Redis string "<key prefix><row key>"; the prefix (per cluster) lets several
// clusters share one Redis. Beside the rows the store keeps the marker "<key prefix>head:marker".
// A batch is one MULTI/EXEC transaction (one of a single mutation: its SET or DEL alone); batches
// queued together are pipelined.
//
// The store keeps a copy of every row it holds (read at Connect, then each confirmed write), so
// that a Redis that comes back without the marker (restarted without persistence, or flushed) gets
// every row back before the next write.
//
// A Redis that went away is tried again with exponential backoff (retry_initial_backoff_ms,
// doubling up to retry_max_backoff_ms) for up to retry_timeout_ms from its first failure: the
// writes made meanwhile wait, in order, behind the first, and each promise resolves ok only once
// Redis confirmed that write. Past the timeout the waiting writes fail with kUnavailable naming the
// address, the last error and how long it was tried, and so does each later write while Redis
// stays away (after one try); an idle store checks the connection about once a second and
// reconnects. A write that failed after it was sent may have been applied anyway: its keys are
// set back to the confirmed rows when the connection is made again, so that Redis holds exactly
// the confirmed writes (what the head, which applies a change only once its write is confirmed,
// holds in memory).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "head/metadata_store.h"

namespace airt::head {

struct RedisOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  std::string password;  // sent with AUTH when not empty
  std::string key_prefix;
  // How long connecting, and each command, may take before Redis counts as unreachable.
  uint32_t timeout_ms = 2000;
  // How often an idle store checks the connection (and reconnects).
  uint32_t check_interval_ms = 1000;
  // How long writes wait for a Redis that went away (`--redis-retry-timeout-s`), and the backoff
  // between tries.
  uint32_t retry_timeout_ms = 60000;
  uint32_t retry_initial_backoff_ms = 100;
  uint32_t retry_max_backoff_ms = 2000;  // `--redis-retry-max-backoff-ms`
};

// Redis is talked to from the store's own thread; the calling (head's loop) thread never waits on
// it after Connect: Write posts the batch there and its promise is fulfilled through a KJ
// cross-thread fulfiller. Scan answers from the copy. Destroying the store stops the thread; the
// writes it had not finished fail.
class RedisMetadataStore final : public MetadataStore {
 public:
  // Connects (blocking), authenticates, reads every row under the prefix and starts the thread.
  // kUnavailable naming the address when Redis cannot be reached, kInvalidArgument when AUTH is
  // refused.
  static Result<std::unique_ptr<RedisMetadataStore>> Connect(const RedisOptions& options);
  ~RedisMetadataStore() override;

  Result<std::vector<Row>> Scan(std::string_view prefix) override;
  kj::Promise<Status> Write(WriteBatch batch) override;

  class Worker;

 private:
  explicit RedisMetadataStore(std::unique_ptr<Worker> worker);
  std::unique_ptr<Worker> worker_;
};

// "HOST:PORT" into host and port; kInvalidArgument naming `flag` otherwise.
Result<RedisOptions> ParseRedisAddress(std::string_view address, std::string_view flag);

}  // namespace airt::head
