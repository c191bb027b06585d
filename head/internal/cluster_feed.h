// The cluster view's change feed (docs/cluster.md "Cluster changes"), behind Head.waitClusterChange:
// the head publishes its view after every change it applies and every heartbeat; the feed numbers
// each node entry that differs from the one published before (a version per change, counted from 1
// within one head incarnation, its `epoch`) and wakes the waiters a change concerns. A waiter
// that asks with the version of its last answer gets every entry changed since, so no change
// between two answers (or between a full read and the next wait) is missed; several changes to
// one entry meanwhile arrive as its latest state. Confined to the head's loop thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include <kj/async.h>

#include "common/ids.h"
#include "head/internal/records.h"

namespace airt::head::internal {

class ClusterFeed {
 public:
  // `epoch`: this head incarnation's number (not 0); a client that asks with another gets the
  // full view, so versions of an earlier head are never compared with this one's.
  explicit ClusterFeed(uint64_t epoch);
  ~ClusterFeed();
  ClusterFeed(const ClusterFeed&) = delete;
  ClusterFeed& operator=(const ClusterFeed&) = delete;

  // The whole view (every node, registration order) and the node types now. Each entry new or
  // unlike its last published state (msSinceHeartbeat and the wording of a death's cause aside)
  // gets the next version; a membership change (joined, alive changed, drain started or ended,
  // info changed, forgotten,
  // node types changed) also moves the membership version. Wakes the waiters concerned.
  void Publish(const std::vector<NodeView>& view, const std::vector<NodeInfo>& types);
  // Publish for one node's entry (a heartbeat's). false when the feed does not hold the node:
  // the caller publishes the whole view instead.
  bool PublishNode(const NodeView& node);

  struct Delta {
    uint64_t epoch = 0;
    uint64_t version = 0;
    bool full = false;
    std::vector<NodeView> nodes;  // full: every node; else those changed after the asked version
    std::vector<NodeInfo> types;
  };
  // What a client that saw `since` of `epoch` is missing. Full when `epoch` is not this feed's,
  // `since` is 0 or beyond the current version, or a node was forgotten after `since`.
  Delta Since(uint64_t epoch, uint64_t since) const;
  // Whether a waiter asking so would be answered now (Since has news for it, or it must get the
  // full view).
  bool Due(uint64_t epoch, uint64_t since, bool membership_only) const;
  // Resolves once Due holds, or when `deadline_ms` (the head clock's MonotonicMs; 0: none) passed
  // at an Expire. Dropping the promise removes the waiter.
  kj::Promise<void> Wait(uint64_t epoch, uint64_t since, bool membership_only,
                         int64_t deadline_ms);
  // Resolves the waiters whose deadline is at or before `now_ms`.
  void Expire(int64_t now_ms);

  // What the feed holds (tests, the dashboard).
  struct Snapshot {
    uint64_t epoch = 0;
    uint64_t version = 0;
    uint64_t membership_version = 0;
    size_t nodes = 0;
    size_t waiters = 0;
  };
  Snapshot snapshot() const;

 private:
  struct Entry {
    NodeView view;
    uint64_t version = 0;
  };
  struct Waiter {
    uint64_t epoch = 0;
    uint64_t since = 0;
    bool membership_only = false;
    int64_t deadline_ms = 0;
    kj::Own<kj::PromiseFulfiller<void>> fulfiller;
  };
  // Records `view` as `entry`'s new state when it differs; whether it did, and whether that was a
  // membership change.
  void Update(Entry& entry, const NodeView& view, bool& membership);
  void Wake();

  uint64_t epoch_;
  // The empty view before the first Publish is version 1: an answer's version is never 0, which
  // asks for the full view (a client passing it back would be answered at once, again and again).
  uint64_t version_ = 1;
  uint64_t membership_version_ = 1;
  uint64_t forgotten_version_ = 0;  // the last version at which a node left the view
  std::vector<Entry> entries_;      // registration order
  std::unordered_map<NodeId, size_t> index_;
  std::vector<NodeInfo> types_;
  std::map<uint64_t, Waiter> waiters_;  // by arrival
  uint64_t next_waiter_ = 0;
  // False once the feed is gone: a waiter's promise dropped later leaves nothing to remove.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// A random epoch for a new head incarnation (never 0).
uint64_t NewFeedEpoch();

}  // namespace airt::head::internal
