#include "head/internal/kv_table.h"

#include "common/logging.h"

namespace airt::head::internal {
namespace {

constexpr std::string_view kKvPrefix = "kv:";

std::string Where(std::string_view ns, std::string_view key) {
  return "key '" + std::string(key) + "' in namespace '" + std::string(ns) + "'";
}

}  // namespace

std::string KvTable::RowKey(std::string_view ns, std::string_view key) {
  std::string row = std::string(kKvPrefix) + std::to_string(ns.size()) + ":";
  row.append(ns);
  row.append(key);
  return row;
}

Status KvTable::Load() {
  AIRT_ASSIGN_OR_RETURN(std::vector<Row> rows, store_.Scan(kKvPrefix));
  for (Row& row : rows) rows_.insert_or_assign(std::move(row.key), std::move(row.value));
  if (!rows_.empty()) AIRT_LOG(INFO) << "loaded " << rows_.size() << " KV keys";
  return Status::Ok();
}

Staged<bool> KvTable::Put(std::string_view ns, std::string_view key, std::string_view value,
                          bool overwrite) {
  std::string row = RowKey(ns, key);
  Staged<bool> out{rows_.count(row) == 0, {}};
  if (!out.value && !overwrite) return out;
  out.change.what = "putting " + Where(ns, key);
  out.change.rows.Put(row, std::string(value));
  out.change.on_written.push_back(
      [this, row, value = std::string(value)]() mutable { rows_[row] = std::move(value); });
  return out;
}

std::optional<std::string> KvTable::Get(std::string_view ns, std::string_view key) const {
  auto it = rows_.find(RowKey(ns, key));
  if (it == rows_.end()) return std::nullopt;
  return it->second;
}

Staged<bool> KvTable::Delete(std::string_view ns, std::string_view key) {
  std::string row = RowKey(ns, key);
  Staged<bool> out{rows_.count(row) != 0, {}};
  if (!out.value) return out;
  out.change.what = "deleting " + Where(ns, key);
  out.change.rows.Delete(row);
  out.change.on_written.push_back([this, row] { rows_.erase(row); });
  return out;
}

Staged<uint32_t> KvTable::DeletePrefix(std::string_view ns, std::string_view prefix) {
  Staged<uint32_t> out{0, {}};
  std::string start = RowKey(ns, prefix);
  std::vector<std::string> rows;
  for (auto it = rows_.lower_bound(start); it != rows_.end(); ++it) {
    if (it->first.compare(0, start.size(), start) != 0) break;
    rows.push_back(it->first);
  }
  if (rows.empty()) return out;
  out.value = static_cast<uint32_t>(rows.size());
  out.change.what = "deleting " + std::to_string(rows.size()) + " keys with prefix '" +
                    std::string(prefix) + "' in namespace '" + std::string(ns) + "'";
  for (const std::string& row : rows) out.change.rows.Delete(row);
  out.change.on_written.push_back([this, rows = std::move(rows)] {
    for (const std::string& row : rows) rows_.erase(row);
  });
  return out;
}

std::vector<std::string> KvTable::Keys(std::string_view ns, std::string_view prefix) const {
  std::string row_prefix = RowKey(ns, "");
  std::string start = row_prefix + std::string(prefix);
  std::vector<std::string> keys;
  for (auto it = rows_.lower_bound(start); it != rows_.end(); ++it) {
    if (it->first.compare(0, start.size(), start) != 0) break;
    keys.push_back(it->first.substr(row_prefix.size()));
  }
  return keys;
}

}  // namespace airt::head::internal
