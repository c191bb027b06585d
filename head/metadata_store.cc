#include "head/metadata_store.h"

namespace airt::head {

void WriteBatch::Append(WriteBatch other) {
  if (mutations_.empty()) {
    mutations_ = std::move(other.mutations_);
    return;
  }
  for (Mutation& m : other.mutations_) mutations_.push_back(std::move(m));
}

Result<std::optional<std::string>> MetadataStore::Get(std::string_view key) {
  AIRT_ASSIGN_OR_RETURN(std::vector<Row> rows, Scan(key));
  for (Row& row : rows) {
    if (row.key == key) return std::optional<std::string>(std::move(row.value));
  }
  return std::optional<std::string>();
}

void ApplyBatch(const WriteBatch& batch, std::map<std::string, std::string, std::less<>>& rows) {
  for (const WriteBatch::Mutation& m : batch.mutations()) {
    if (m.value) {
      rows.insert_or_assign(m.key, *m.value);
    } else {
      rows.erase(m.key);
    }
  }
}

std::vector<Row> ScanRows(const std::map<std::string, std::string, std::less<>>& rows,
                          std::string_view prefix) {
  std::vector<Row> out;
  for (auto it = rows.lower_bound(prefix); it != rows.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    out.push_back({it->first, it->second});
  }
  return out;
}

Result<std::vector<Row>> InMemoryMetadataStore::Scan(std::string_view prefix) {
  return ScanRows(rows_, prefix);
}

kj::Promise<Status> InMemoryMetadataStore::Write(WriteBatch batch) {
  ApplyBatch(batch, rows_);
  return Status::Ok();
}

}  // namespace airt::head
