// The internal KV (named actors, the function table, collective rendezvous): namespaced keys, held
// in memory and written through the MetadataStore as staged Changes (change.h). Confined to the
// head's loop thread.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "head/internal/change.h"
#include "head/metadata_store.h"

namespace airt::head::internal {

// Keys of one namespace never collide with another's: a row is "kv:<namespace length>:<namespace>
// <key>". Reads answer from memory, which holds what the store confirmed.
class KvTable {
 public:
  // `store` must outlive the table.
  explicit KvTable(MetadataStore& store) : store_(store) {}

  // Reads the rows an earlier head left. The store's error when it cannot be read.
  Status Load();

  // Stores `value` under `key`. When the key exists, replaces its value only if `overwrite`
  // (otherwise the change is empty). true: the key is new.
  Staged<bool> Put(std::string_view ns, std::string_view key, std::string_view value,
                   bool overwrite);
  std::optional<std::string> Get(std::string_view ns, std::string_view key) const;
  // true: the key was there (otherwise the change is empty).
  Staged<bool> Delete(std::string_view ns, std::string_view key);
  // Deletes the keys of `ns` starting with `prefix` in one change; the value counts them (0: the
  // change is empty).
  Staged<uint32_t> DeletePrefix(std::string_view ns, std::string_view prefix);
  // The keys of `ns` starting with `prefix`, in ascending byte order.
  std::vector<std::string> Keys(std::string_view ns, std::string_view prefix) const;

 private:
  static std::string RowKey(std::string_view ns, std::string_view key);

  MetadataStore& store_;
  std::map<std::string, std::string, std::less<>> rows_;  // by row key
};

}  // namespace airt::head::internal
