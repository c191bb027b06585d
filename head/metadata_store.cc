#include "head/metadata_store.h"

namespace airt::head {

Result<std::optional<std::string>> InMemoryMetadataStore::Get(std::string_view key) {
  auto it = rows_.find(key);
  if (it == rows_.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

Status InMemoryMetadataStore::Put(std::string_view key, std::string_view value) {
  auto it = rows_.find(key);
  if (it == rows_.end()) {
    rows_.emplace(std::string(key), std::string(value));
  } else {
    it->second.assign(value);
  }
  return Status::Ok();
}

Result<bool> InMemoryMetadataStore::Delete(std::string_view key) {
  auto it = rows_.find(key);
  if (it == rows_.end()) return false;
  rows_.erase(it);
  return true;
}

Result<std::vector<std::string>> InMemoryMetadataStore::Keys(std::string_view prefix) {
  std::vector<std::string> keys;
  for (auto it = rows_.lower_bound(prefix); it != rows_.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    keys.push_back(it->first);
  }
  return keys;
}

}  // namespace airt::head
