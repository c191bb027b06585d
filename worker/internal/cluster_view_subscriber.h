// Keeps the node's copy of the head's cluster view (Head.clusterView) fresh for spillback: asks
// the head every interval on a connection of its own and hands each answer to a callback. A
// failed or late call is logged and the next tick reconnects; the last good view stays in use.
#pragma once

#include <cstdint>
#include <functional>

#include <kj/async.h>
#include <kj/timer.h>

#include "common/proto/cluster.capnp.h"
#include "worker/internal/head_session.h"
#include "worker/internal/lease_manager.h"

namespace airt::worker {

// The head's NodeStatus list as the lease manager wants it. Nodes with a bad id are left out;
// amounts that are not finite and non-negative, or whose names scheduling refuses, are dropped
// (the head validated them already: this only guards the node's own invariants).
RemoteNodes ToRemoteNodes(capnp::List<proto::NodeStatus>::Reader nodes);

struct ClusterViewPollerOptions {
  kj::Duration interval = kj::SECONDS;
  kj::Duration call_timeout = 5 * kj::SECONDS;
};

// Event-loop confined; `connector` and `timer` must outlive it. Dropping it cancels the call in
// flight.
class ClusterViewPoller {
 public:
  ClusterViewPoller(HeadConnector& connector, kj::Timer& timer, ClusterViewPollerOptions options,
                    std::function<void(RemoteNodes)> on_view);
  ~ClusterViewPoller();
  ClusterViewPoller(const ClusterViewPoller&) = delete;
  ClusterViewPoller& operator=(const ClusterViewPoller&) = delete;

  // Polls now, then every interval.
  void Start();
  uint64_t views() const { return views_; }        // answers handed on
  uint64_t failures() const { return failures_; }  // calls that failed or timed out

 private:
  kj::Promise<void> Poll();

  HeadConnector& connector_;
  kj::Timer& timer_;
  ClusterViewPollerOptions options_;
  std::function<void(RemoteNodes)> on_view_;
  kj::Maybe<proto::Head::Client> head_;
  uint64_t views_ = 0;
  uint64_t failures_ = 0;
  kj::Promise<void> run_ = nullptr;  // last: cancelled first
};

}  // namespace airt::worker
