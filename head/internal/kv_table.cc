#include "head/internal/kv_table.h"

namespace airt::head::internal {
namespace {

std::string Where(std::string_view ns, std::string_view key) {
  return "key '" + std::string(key) + "' in namespace '" + std::string(ns) + "'";
}

}  // namespace

std::string KvTable::RowKey(std::string_view ns, std::string_view key) {
  std::string row = "kv:" + std::to_string(ns.size()) + ":";
  row.append(ns);
  row.append(key);
  return row;
}

Result<bool> KvTable::Put(std::string_view ns, std::string_view key, std::string_view value,
                          bool overwrite) {
  std::string row = RowKey(ns, key);
  Result<std::optional<std::string>> existing = store_.Get(row);
  if (!existing.ok()) return existing.status().WithContext("putting " + Where(ns, key));
  bool added = !existing->has_value();
  if (!added && !overwrite) return false;
  AIRT_RETURN_IF_ERROR(store_.Put(row, value).WithContext("putting " + Where(ns, key)));
  return added;
}

Result<std::optional<std::string>> KvTable::Get(std::string_view ns, std::string_view key) {
  Result<std::optional<std::string>> value = store_.Get(RowKey(ns, key));
  if (!value.ok()) return value.status().WithContext("getting " + Where(ns, key));
  return value;
}

Result<bool> KvTable::Delete(std::string_view ns, std::string_view key) {
  Result<bool> deleted = store_.Delete(RowKey(ns, key));
  if (!deleted.ok()) return deleted.status().WithContext("deleting " + Where(ns, key));
  return deleted;
}

Result<std::vector<std::string>> KvTable::Keys(std::string_view ns, std::string_view prefix) {
  std::string row_prefix = RowKey(ns, "");
  Result<std::vector<std::string>> rows = store_.Keys(row_prefix + std::string(prefix));
  if (!rows.ok()) {
    return rows.status().WithContext("listing keys with prefix '" + std::string(prefix) +
                                     "' in namespace '" + std::string(ns) + "'");
  }
  std::vector<std::string> keys;
  keys.reserve(rows->size());
  for (std::string& row : *rows) keys.push_back(row.substr(row_prefix.size()));
  return keys;
}

}  // namespace airt::head::internal
