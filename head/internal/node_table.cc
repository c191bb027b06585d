#include "head/internal/node_table.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "common/logging.h"
#include "head/internal/wire.h"

namespace airt::head::internal {
namespace {

constexpr std::string_view kNodePrefix = "node:";

std::string Short(const NodeId& id) { return id.Hex().substr(0, 8); }

// The seq of a "node:<16 hex>:<id hex>" key; nullopt for anything else.
std::optional<uint64_t> SeqOfKey(std::string_view key) {
  std::string_view rest = key.substr(kNodePrefix.size());
  if (rest.size() < 17 || rest[16] != ':') return std::nullopt;
  uint64_t seq = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + 16, seq, 16);
  if (ec != std::errc() || end != rest.data() + 16) return std::nullopt;
  return seq;
}

bool Contains(const std::vector<uint32_t>& ids, uint32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace

NodeTable::NodeTable(Options options, MetadataStore& store, Clock& clock)
    : options_(options), store_(store), clock_(clock) {}

std::string NodeTable::RowKey(uint64_t seq, const NodeId& id) {
  char seq_hex[17];
  std::snprintf(seq_hex, sizeof(seq_hex), "%016llx", static_cast<unsigned long long>(seq));
  return std::string(kNodePrefix) + seq_hex + ":" + id.Hex();
}

Status NodeTable::Load() {
  AIRT_ASSIGN_OR_RETURN(std::vector<std::string> keys, store_.Keys(kNodePrefix));
  int64_t now = clock_.MonotonicMs();
  for (const std::string& key : keys) {
    std::optional<uint64_t> seq = SeqOfKey(key);
    AIRT_ASSIGN_OR_RETURN(std::optional<std::string> bytes, store_.Get(key));
    if (!bytes) continue;  // deleted since Keys
    Result<NodeRow> row = seq ? DecodeNodeRow(*bytes) : Result<NodeRow>(Internal("bad key"));
    if (!row.ok()) {
      AIRT_LOG(ERROR) << "skipping metadata row '" << key << "': " << row.status().message();
      continue;
    }
    if (seq_of_.count(row->info.id) != 0) {
      AIRT_LOG(ERROR) << "skipping metadata row '" << key << "': node listed twice";
      continue;
    }
    Entry e;
    e.seq = *seq;
    e.alive = row->alive;
    e.load.available = row->info.total;
    e.last_heartbeat_ms = now;
    e.info = std::move(row->info);
    dead_ += e.alive ? 0 : 1;
    seq_of_[e.info.id] = e.seq;
    next_seq_ = std::max(next_seq_, e.seq + 1);
    by_seq_.emplace(e.seq, std::move(e));
  }
  if (!by_seq_.empty()) {
    AIRT_LOG(INFO) << "loaded " << by_seq_.size() << " nodes (" << dead_
                   << " dead) from the metadata store";
  }
  return Status::Ok();
}

Status NodeTable::Register(NodeInfo info) {
  auto found = seq_of_.find(info.id);
  uint64_t seq = found != seq_of_.end() ? found->second : next_seq_;
  AIRT_RETURN_IF_ERROR(store_.Put(RowKey(seq, info.id), EncodeNodeRow(info, /*alive=*/true))
                           .WithContext("registering node " + info.id.Hex()));
  if (found == seq_of_.end()) {
    ++next_seq_;
    seq_of_[info.id] = seq;
  }
  Entry& e = by_seq_[seq];
  bool was_dead = e.seq != 0 && !e.alive;
  if (was_dead) --dead_;
  AIRT_LOG(INFO) << "node " << Short(info.id) << " "
                 << (e.seq != 0 ? "re-registered" : "registered") << " at " << info.address << ":"
                 << info.node_port << " with " << info.total.size() << " resources, "
                 << info.gpu_ids.size() << " GPUs";
  e.seq = seq;
  e.alive = true;
  e.load = NodeLoad{info.total, {}, {}};
  e.last_heartbeat_ms = clock_.MonotonicMs();
  e.info = std::move(info);
  return Status::Ok();
}

Result<bool> NodeTable::Heartbeat(const NodeId& id, NodeLoad load) {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return false;
  Entry& e = by_seq_.at(found->second);
  if (!e.alive) return false;
  int64_t now = clock_.MonotonicMs();
  if (now - e.last_heartbeat_ms >= options_.node_timeout_ms) {
    MarkDead(e, "no heartbeat for " + std::to_string(now - e.last_heartbeat_ms) + " ms");
    ForgetOldDead();
    return false;
  }
  for (const auto* list : {&load.gpu_ids_in_use, &load.quarantined_gpu_ids}) {
    for (uint32_t gpu : *list) {
      if (!Contains(e.info.gpu_ids, gpu)) {
        return InvalidArgument(
            std::string(list == &load.gpu_ids_in_use ? "gpuIdsInUse" : "quarantinedGpuIds") +
            ": GPU " + std::to_string(gpu) + " is not one of node " + id.Hex() + "'s GPUs");
      }
    }
  }
  e.load = std::move(load);
  e.last_heartbeat_ms = now;
  return true;
}

Status NodeTable::Unregister(const NodeId& id) {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return NotFound("node " + id.Hex() + " is not registered");
  Entry& e = by_seq_.at(found->second);
  if (!e.alive) return Status::Ok();
  AIRT_RETURN_IF_ERROR(store_.Put(RowKey(e.seq, id), EncodeNodeRow(e.info, /*alive=*/false))
                           .WithContext("unregistering node " + id.Hex()));
  e.alive = false;
  ++dead_;
  AIRT_LOG(INFO) << "node " << Short(id) << " unregistered";
  ForgetOldDead();
  return Status::Ok();
}

std::vector<NodeId> NodeTable::CheckLiveness() {
  std::vector<NodeId> died;
  int64_t now = clock_.MonotonicMs();
  for (auto& [seq, e] : by_seq_) {
    int64_t silent = now - e.last_heartbeat_ms;
    if (e.alive && silent >= options_.node_timeout_ms) {
      MarkDead(e, "no heartbeat for " + std::to_string(silent) + " ms");
      died.push_back(e.info.id);
    }
  }
  if (!died.empty()) ForgetOldDead();
  return died;
}

void NodeTable::MarkDead(Entry& e, const std::string& why) {
  e.alive = false;
  ++dead_;
  AIRT_LOG(WARNING) << "node " << e.info.id.Hex() << " at " << e.info.address
                    << " declared dead: " << why;
  Status written = store_.Put(RowKey(e.seq, e.info.id), EncodeNodeRow(e.info, /*alive=*/false));
  if (!written.ok()) {
    AIRT_LOG(WARNING) << "could not record node " << Short(e.info.id)
                      << " as dead in the metadata store: " << written.ToString();
  }
}

void NodeTable::ForgetOldDead() {
  for (auto it = by_seq_.begin(); dead_ > options_.max_dead_nodes && it != by_seq_.end();) {
    if (it->second.alive) {
      ++it;
      continue;
    }
    Result<bool> deleted = store_.Delete(RowKey(it->first, it->second.info.id));
    if (!deleted.ok()) {
      AIRT_LOG(WARNING) << "could not delete node " << Short(it->second.info.id)
                        << "'s row from the metadata store: " << deleted.status().ToString();
    }
    seq_of_.erase(it->second.info.id);
    it = by_seq_.erase(it);
    --dead_;
  }
}

NodeView NodeTable::ViewOf(const Entry& e, int64_t now) const {
  NodeView view;
  view.info = e.info;
  view.alive = e.alive;
  view.load = e.load;
  view.ms_since_heartbeat = static_cast<uint64_t>(std::max<int64_t>(0, now - e.last_heartbeat_ms));
  return view;
}

std::vector<NodeView> NodeTable::View() const {
  int64_t now = clock_.MonotonicMs();
  std::vector<NodeView> out;
  out.reserve(by_seq_.size());
  for (const auto& [seq, e] : by_seq_) out.push_back(ViewOf(e, now));
  return out;
}

std::optional<NodeView> NodeTable::Find(const NodeId& id) const {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return std::nullopt;
  return ViewOf(by_seq_.at(found->second), clock_.MonotonicMs());
}

}  // namespace airt::head::internal
