// The nodes the head knows, alive and dead, in registration order, and their liveness.
// Confined to the head's loop thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "head/clock.h"
#include "head/internal/records.h"
#include "head/metadata_store.h"

namespace airt::head::internal {

// A node is alive from its registration until no heartbeat arrived for `node_timeout_ms`, or it
// unregisters; then it is dead until it registers again. Registrations and deaths are written to
// the MetadataStore as rows ("node:<seq>:<id hex>"); heartbeat loads stay in memory.
class NodeTable {
 public:
  struct Options {
    uint32_t node_timeout_ms = 10000;
    // Dead nodes kept for the view; beyond this the earliest registered are forgotten.
    size_t max_dead_nodes = 1000;
  };

  // `store` and `clock` must outlive the table.
  NodeTable(Options options, MetadataStore& store, Clock& clock);

  // Reads the rows an earlier head left in the store, in registration order. Nodes alive there
  // get a full timeout from now to heartbeat again. A corrupt row is logged and skipped.
  // The store's error when it cannot be read.
  Status Load();

  // Adds the node, or replaces the entry with its id (keeping its place in the order): alive,
  // available = total, heartbeat now. The store's error when the row cannot be written; then
  // nothing changes.
  Status Register(NodeInfo info);
  // Records a heartbeat. false: the node is unknown or dead (it must register again); an alive
  // node whose timeout passed is declared dead here. kInvalidArgument: a GPU id in use or
  // quarantined that is not one of the node's own.
  Result<bool> Heartbeat(const NodeId& id, NodeLoad load);
  // Declares the node dead now; ok when it is dead already. kNotFound: not in the table. The
  // store's error when the row cannot be written; then nothing changes.
  Status Unregister(const NodeId& id);
  // Declares dead every alive node whose last heartbeat is node_timeout_ms old or older; returns
  // them. Their rows are rewritten as dead; a failed write is logged (the death stands).
  std::vector<NodeId> CheckLiveness();

  // Every node in registration order. Call CheckLiveness first for up-to-date liveness.
  std::vector<NodeView> View() const;
  std::optional<NodeView> Find(const NodeId& id) const;
  size_t size() const { return by_seq_.size(); }

 private:
  struct Entry {
    uint64_t seq = 0;
    NodeInfo info;
    bool alive = false;
    NodeLoad load;
    int64_t last_heartbeat_ms = 0;  // Clock::MonotonicMs
  };

  static std::string RowKey(uint64_t seq, const NodeId& id);
  NodeView ViewOf(const Entry& e, int64_t now) const;
  // Marks `e` dead, rewrites its row (logging a failure), logs `why`.
  void MarkDead(Entry& e, const std::string& why);
  // Forgets the earliest registered dead nodes beyond max_dead_nodes.
  void ForgetOldDead();

  Options options_;
  MetadataStore& store_;
  Clock& clock_;
  std::map<uint64_t, Entry> by_seq_;  // registration order
  std::unordered_map<NodeId, uint64_t> seq_of_;
  size_t dead_ = 0;
  uint64_t next_seq_ = 1;
};

}  // namespace airt::head::internal
