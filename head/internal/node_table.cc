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

std::string NodeTable::AliveRow(const NodeInfo& info,
                                const std::optional<std::string>& drain_reason,
                                uint64_t drain_deadline_ms) {
  NodeRow row{.info = info, .alive = true};
  row.drain_reason = drain_reason;
  row.drain_deadline_ms = drain_reason ? drain_deadline_ms : 0;
  return EncodeNodeRow(row);
}

Status NodeTable::Load() {
  AIRT_ASSIGN_OR_RETURN(std::vector<Row> rows, store_.Scan(kNodePrefix));
  int64_t now = clock_.MonotonicMs();
  for (const Row& stored : rows) {
    const std::string& key = stored.key;
    std::optional<uint64_t> seq = SeqOfKey(key);
    Result<NodeRow> row = seq ? DecodeNodeRow(stored.value) : Result<NodeRow>(Internal("bad key"));
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
    e.death_cause = std::move(row->death_cause);
    e.death_time_ms = row->death_time_ms;
    if (e.alive) {
      e.drain_reason = std::move(row->drain_reason);
      e.drain_deadline_ms = row->drain_deadline_ms;
    }
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

bool NodeTable::TimedOut(const Entry& e, int64_t now) const {
  return now - e.last_heartbeat_ms >= options_.node_timeout_ms ||
         (e.disconnected_ms && now - *e.disconnected_ms >= options_.disconnect_grace_ms);
}

void NodeTable::Disconnected(const NodeId& id) {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return;
  Entry& e = by_seq_.at(found->second);
  if (!e.alive || e.disconnected_ms) return;
  e.disconnected_ms = clock_.MonotonicMs();
  AIRT_LOG(WARNING) << "node " << id.Hex() << " at " << e.info.address << ":" << e.info.node_port
                    << " lost its connection to the head; dead unless it registers again within "
                    << options_.disconnect_grace_ms << " ms";
}

std::string NodeTable::TimeoutCause(const Entry& e, int64_t now) const {
  if (e.disconnected_ms && now - *e.disconnected_ms >= options_.disconnect_grace_ms) {
    return "its connection to the head dropped " + std::to_string(now - *e.disconnected_ms) +
           " ms ago and it did not register again (the head's disconnect grace is " +
           std::to_string(options_.disconnect_grace_ms) + " ms)";
  }
  return "no heartbeat for " + std::to_string(now - e.last_heartbeat_ms) + " ms (the head's " +
         "node timeout is " + std::to_string(options_.node_timeout_ms) + " ms)";
}

Result<Change> NodeTable::Register(NodeInfo info) {
  auto found = seq_of_.find(info.id);
  if (found != seq_of_.end()) {
    const Entry& e = by_seq_.at(found->second);
    int64_t now = clock_.MonotonicMs();
    if (!e.alive || TimedOut(e, now)) {
      std::string cause = e.alive ? TimeoutCause(e, now) : e.death_cause;
      return FailedPrecondition("the head declared node " + info.id.Hex() + " dead (" + cause +
                                "); it cannot rejoin with the same id: restart it clean (a "
                                "new airt-node process gets a new id)");
    }
  }
  uint64_t seq = found != seq_of_.end() ? found->second : next_seq_;
  Change change;
  change.what = "registering node " + info.id.Hex();
  // A node that registers again (with a restarted head) keeps its drain mark.
  const Entry* known = found != seq_of_.end() ? &by_seq_.at(seq) : nullptr;
  change.rows.Put(RowKey(seq, info.id),
                  known != nullptr ? AliveRow(info, known->drain_reason, known->drain_deadline_ms)
                                   : AliveRow(info, std::nullopt, 0));
  change.on_written.push_back([this, seq, info = std::move(info)]() mutable {
    if (seq_of_.count(info.id) == 0) {
      next_seq_ = std::max(next_seq_, seq + 1);
      seq_of_[info.id] = seq;
    }
    Entry& e = by_seq_[seq];
    if (e.seq != 0 && !e.alive) --dead_;
    AIRT_LOG(INFO) << "node " << Short(info.id) << " "
                   << (e.seq != 0 ? "re-registered" : "registered") << " at " << info.address << ":"
                   << info.node_port << " with " << info.total.size() << " resources, "
                   << info.gpu_ids.size() << " GPUs";
    e.seq = seq;
    e.alive = true;
    e.registered_here = true;
    e.disconnected_ms.reset();
    e.death_cause.clear();
    e.death_time_ms = 0;
    e.load = NodeLoad{.available = info.total};
    e.last_heartbeat_ms = clock_.MonotonicMs();
    e.info = std::move(info);
  });
  return change;
}

Result<bool> NodeTable::Heartbeat(const NodeId& id, NodeLoad load) {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return false;
  Entry& e = by_seq_.at(found->second);
  int64_t now = clock_.MonotonicMs();
  if (!e.alive || !e.registered_here || e.disconnected_ms || TimedOut(e, now)) return false;
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

void NodeTable::StageDeath(uint64_t seq, std::string cause, Change& change) {
  const Entry& e = by_seq_.at(seq);
  uint64_t when = static_cast<uint64_t>(std::max<int64_t>(0, clock_.WallMs()));
  change.rows.Put(RowKey(seq, e.info.id),
                  EncodeNodeRow(NodeRow{.info = e.info, .alive = false, .death_cause = cause,
                                          .death_time_ms = when}));
  change.on_written.push_back([this, seq, cause = std::move(cause), when] {
    Entry& dead = by_seq_.at(seq);
    if (!dead.alive) return;
    dead.alive = false;
    dead.death_cause = cause;
    dead.death_time_ms = when;
    ++dead_;
    AIRT_LOG(WARNING) << "node " << dead.info.id.Hex() << " at " << dead.info.address << ":"
                      << dead.info.node_port << " declared dead: " << cause;
  });
}

Result<Change> NodeTable::MarkDead(const NodeId& id, std::string cause) {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return NotFound("node " + id.Hex() + " is not registered");
  const Entry& e = by_seq_.at(found->second);
  Change change;
  if (!e.alive) return change;
  uint64_t seq = e.seq;
  change.what = "recording node " + id.Hex() + " dead";
  StageDeath(seq, std::move(cause), change);
  ForgetOldDead({seq}, change);
  return change;
}

Result<Change> NodeTable::Unregister(const NodeId& id) {
  auto found = seq_of_.find(id);
  if (found != seq_of_.end() && by_seq_.at(found->second).drain_reason) {
    return MarkDead(id, "it was drained (" + *by_seq_.at(found->second).drain_reason +
                            ") and left the cluster");
  }
  return MarkDead(id, "it unregistered (stopped by airt stop or its stop signal)");
}

Result<Staged<uint64_t>> NodeTable::StartDrain(const NodeId& id, std::string reason,
                                               uint64_t deadline_ms) {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return NotFound("node " + id.Hex() + " is not registered");
  const Entry& e = by_seq_.at(found->second);
  int64_t now = clock_.MonotonicMs();
  if (!e.alive || TimedOut(e, now)) {
    return FailedPrecondition("node " + id.Hex() + " is dead (" +
                              (e.alive ? TimeoutCause(e, now) : e.death_cause) +
                              "): there is nothing to drain");
  }
  uint64_t deadline = e.drain_reason && e.drain_deadline_ms <= deadline_ms ? e.drain_deadline_ms
                                                                           : deadline_ms;
  Staged<uint64_t> out;
  out.value = deadline;
  out.change.what = "marking node " + id.Hex() + " draining";
  out.change.rows.Put(RowKey(e.seq, id), AliveRow(e.info, reason, deadline));
  out.change.on_written.push_back([this, seq = e.seq, reason = std::move(reason), deadline] {
    Entry& drained = by_seq_.at(seq);
    if (!drained.drain_reason) {
      AIRT_LOG(INFO) << "node " << drained.info.id.Hex() << " at " << drained.info.address << ":"
                     << drained.info.node_port << " is draining (" << reason << ")";
    }
    drained.drain_reason = reason;
    drained.drain_deadline_ms = deadline;
  });
  return out;
}

Change NodeTable::CancelDrain(const NodeId& id) {
  Change change;
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return change;
  const Entry& e = by_seq_.at(found->second);
  if (!e.alive || !e.drain_reason) return change;
  change.what = "forgetting node " + id.Hex() + "'s drain";
  change.rows.Put(RowKey(e.seq, id), AliveRow(e.info, std::nullopt, 0));
  change.on_written.push_back([this, seq = e.seq] {
    Entry& undrained = by_seq_.at(seq);
    undrained.drain_reason.reset();
    undrained.drain_deadline_ms = 0;
  });
  return change;
}

Staged<std::vector<NodeId>> NodeTable::CheckLiveness() {
  Staged<std::vector<NodeId>> out;
  std::vector<uint64_t> dying;
  int64_t now = clock_.MonotonicMs();
  for (const auto& [seq, e] : by_seq_) {
    if (!e.alive || !TimedOut(e, now)) continue;
    dying.push_back(seq);
    out.value.push_back(e.info.id);
    StageDeath(seq, TimeoutCause(e, now), out.change);
  }
  if (dying.empty()) return out;
  out.change.what = "recording " + std::to_string(dying.size()) + " dead nodes";
  ForgetOldDead(dying, out.change);
  return out;
}

void NodeTable::ForgetOldDead(const std::vector<uint64_t>& dying, Change& change) {
  size_t dead = dead_ + dying.size();
  std::vector<uint64_t> forget;
  for (auto it = by_seq_.begin(); dead > options_.max_dead_nodes && it != by_seq_.end(); ++it) {
    bool is_dying = std::find(dying.begin(), dying.end(), it->first) != dying.end();
    if (it->second.alive && !is_dying) continue;
    change.rows.Delete(RowKey(it->first, it->second.info.id));
    forget.push_back(it->first);
    --dead;
  }
  if (forget.empty()) return;
  change.on_written.push_back([this, forget = std::move(forget)] {
    for (uint64_t seq : forget) {
      auto it = by_seq_.find(seq);
      seq_of_.erase(it->second.info.id);
      by_seq_.erase(it);
      --dead_;
    }
  });
}

NodeView NodeTable::ViewOf(const Entry& e, int64_t now) const {
  NodeView view;
  view.info = e.info;
  view.alive = e.alive && !TimedOut(e, now);
  view.load = e.load;
  if (!e.alive) {
    view.death_cause = e.death_cause;
    view.death_time_ms = e.death_time_ms;
  } else if (!view.alive) {
    view.death_cause = TimeoutCause(e, now);
  }
  view.ms_since_heartbeat = static_cast<uint64_t>(std::max<int64_t>(0, now - e.last_heartbeat_ms));
  if (view.alive && e.drain_reason) {
    view.draining = true;
    view.drain_reason = *e.drain_reason;
    view.drain_deadline_ms = e.drain_deadline_ms;
  }
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
