// The internal KV (named actors, the function table, collective rendezvous): namespaced keys over
// the MetadataStore, read and written through (no cache). Confined to the head's loop thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "head/metadata_store.h"

namespace airt::head::internal {

// Every call returns the store's error, with context, when the store fails; then nothing changed.
// Keys of one namespace never collide with another's: a row is "kv:<namespace length>:<namespace>
// <key>".
class KvTable {
 public:
  // `store` must outlive the table.
  explicit KvTable(MetadataStore& store) : store_(store) {}

  // Stores `value` under `key`. When the key exists, replaces its value only if `overwrite`.
  // true: the key is new.
  Result<bool> Put(std::string_view ns, std::string_view key, std::string_view value,
                   bool overwrite);
  Result<std::optional<std::string>> Get(std::string_view ns, std::string_view key);
  // true: the key was there.
  Result<bool> Delete(std::string_view ns, std::string_view key);
  // The keys of `ns` starting with `prefix`, in ascending byte order.
  Result<std::vector<std::string>> Keys(std::string_view ns, std::string_view prefix);

 private:
  static std::string RowKey(std::string_view ns, std::string_view key);

  MetadataStore& store_;
};

}  // namespace airt::head::internal
