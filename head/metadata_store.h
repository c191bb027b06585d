// The head's durable tables sit on a MetadataStore (STYLE.md rule 8): a flat map from byte-string
// keys to byte-string values. The head keeps everything it must not forget there (node rows, job
// rows, actor rows, the internal KV) and nothing else. InMemoryMetadataStore is the default; a
// Redis one (`--redis-address`) comes later; tests/head/ has a fault-injecting one.
//
// Key layout used by the head (see head/internal/): "node:<seq>:<node id hex>", "job:<job hex>",
// "actor:<actor id hex>", "kv:<namespace length>:<namespace><key>".
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace airt::head {

// Called from the head's loop thread only; implementations need not be thread-safe.
// Errors: kUnavailable when a backing service cannot be reached (the caller may retry);
// kInternal for anything else. A failed call changes nothing.
class MetadataStore {
 public:
  virtual ~MetadataStore() = default;
  // The value under `key`, or nullopt when there is none.
  virtual Result<std::optional<std::string>> Get(std::string_view key) = 0;
  // Sets `key` to `value`, replacing an earlier value.
  virtual Status Put(std::string_view key, std::string_view value) = 0;
  // Removes `key`; true when it was there.
  virtual Result<bool> Delete(std::string_view key) = 0;
  // Every key that starts with `prefix`, in ascending byte order.
  virtual Result<std::vector<std::string>> Keys(std::string_view prefix) = 0;
};

// Keeps everything in this process: what is stored lives as long as the object. Never fails.
class InMemoryMetadataStore final : public MetadataStore {
 public:
  Result<std::optional<std::string>> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string_view value) override;
  Result<bool> Delete(std::string_view key) override;
  Result<std::vector<std::string>> Keys(std::string_view prefix) override;

  size_t size() const { return rows_.size(); }

 private:
  std::map<std::string, std::string, std::less<>> rows_;
};

}  // namespace airt::head
