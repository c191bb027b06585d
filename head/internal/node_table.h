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
#include "head/internal/change.h"
#include "head/internal/records.h"
#include "head/metadata_store.h"

namespace airt::head::internal {

// A node is alive from its registration until no heartbeat arrived for `node_timeout_ms`, it
// unregisters, or the head declares it dead (MarkDead), or its connection dropped and it did not register again
// within the grace (Disconnected); then it is dead
// for good: the same id registering again is refused, and that node must restart with a new id.
// Registrations, drain marks and deaths are rows ("node:<seq>:<id hex>", with the drain's reason
// and deadline, the death's cause and wall time), staged as Changes (change.h); heartbeat loads stay in memory. A node whose timeout
// passed shows dead (View, Find, Heartbeat) at once; its row is rewritten as dead by the next
// CheckLiveness whose change is written.
class NodeTable {
 public:
  struct Options {
    uint32_t node_timeout_ms = 10000;
    // Dead nodes kept for the view; beyond this the earliest registered are forgotten.
    size_t max_dead_nodes = 1000;
    // A node whose connection dropped (Disconnected) and that did not register again within
    // this is dead as if its heartbeat timeout had passed.
    uint32_t disconnect_grace_ms = 1000;
  };

  // `store` and `clock` must outlive the table.
  NodeTable(Options options, MetadataStore& store, Clock& clock);

  // Reads the rows an earlier head left in the store, in registration order. Nodes alive there
  // get a full timeout from now to register again. A corrupt row is logged and skipped.
  // The store's error when it cannot be read.
  Status Load();

  // Adds the node, or replaces the alive entry with its id (keeping its place in the order):
  // alive, available = total, heartbeat now. kFailedPrecondition naming the cause when the table
  // holds the id dead (or overdue): it must not come back.
  Result<Change> Register(NodeInfo info);
  // Records a heartbeat (in memory, at once). false: the node is unknown, dead, its timeout
  // passed, or it was loaded from the store and has not registered with this head yet (it must
  // register). kInvalidArgument: a GPU id in use or quarantined that is not one of the node's own.
  Result<bool> Heartbeat(const NodeId& id, NodeLoad load);
  // Declares the node dead now because of `cause` (an empty change when it is dead already).
  // kNotFound: not in the table.
  Result<Change> MarkDead(const NodeId& id, std::string cause);
  // Notes that the node's session connection dropped (in memory): it must register again within
  // disconnect_grace_ms (its heartbeats answer false meanwhile), or it times out. Unknown or dead
  // nodes are ignored.
  void Disconnected(const NodeId& id);
  // MarkDead for a node leaving cleanly; a drained one's cause names its drain.
  Result<Change> Unregister(const NodeId& id);
  // Marks the alive node draining with `reason` until `deadline_ms` (wall ms since the epoch),
  // in its row, so that a head loaded from the store still treats it as draining (and a node that
  // registers again keeps the mark). A node drained already keeps the earlier deadline and takes
  // the new reason. Answers the deadline in effect once applied. kNotFound: not in the table;
  // kFailedPrecondition: dead.
  Result<Staged<uint64_t>> StartDrain(const NodeId& id, std::string reason, uint64_t deadline_ms);
  // Forgets the node's drain mark (the node could not be told), in its row too. An empty change
  // for an unknown, dead or undrained node.
  Change CancelDrain(const NodeId& id);
  // The alive nodes whose last heartbeat is node_timeout_ms old or older, and the change that
  // records them dead (and forgets the oldest dead beyond max_dead_nodes).
  Staged<std::vector<NodeId>> CheckLiveness();

  // Every node in registration order.
  std::vector<NodeView> View() const;
  std::optional<NodeView> Find(const NodeId& id) const;
  size_t size() const { return by_seq_.size(); }

 private:
  struct Entry {
    uint64_t seq = 0;
    NodeInfo info;
    bool alive = false;  // as its row says
    NodeLoad load;
    int64_t last_heartbeat_ms = 0;  // Clock::MonotonicMs
    bool registered_here = false;   // registered with this head (not only loaded)
    std::optional<int64_t> disconnected_ms;  // when its session connection dropped
    std::string death_cause;        // as its row says
    uint64_t death_time_ms = 0;
    std::optional<std::string> drain_reason;  // set while draining (StartDrain)
    uint64_t drain_deadline_ms = 0;
  };

  static std::string RowKey(uint64_t seq, const NodeId& id);
  // The alive row of `e` with this drain mark.
  static std::string AliveRow(const NodeInfo& info, const std::optional<std::string>& drain_reason,
                              uint64_t drain_deadline_ms);
  bool TimedOut(const Entry& e, int64_t now) const;
  std::string TimeoutCause(const Entry& e, int64_t now) const;
  // The change that rewrites the row of `seq` dead with `cause` and applies it.
  void StageDeath(uint64_t seq, std::string cause, Change& change);
  NodeView ViewOf(const Entry& e, int64_t now) const;
  // Adds to `change` the deletes of the earliest registered dead nodes beyond max_dead_nodes once
  // the nodes of `dying` are dead too.
  void ForgetOldDead(const std::vector<uint64_t>& dying, Change& change);

  Options options_;
  MetadataStore& store_;
  Clock& clock_;
  std::map<uint64_t, Entry> by_seq_;  // registration order
  std::unordered_map<NodeId, uint64_t> seq_of_;
  size_t dead_ = 0;
  uint64_t next_seq_ = 1;
};

}  // namespace airt::head::internal
