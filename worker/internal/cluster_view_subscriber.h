// Keeps the node's copy of the head's cluster view fresh for spillback by subscribing to the
// head's cluster change feed (Head.waitClusterChange, docs/cluster.md "Cluster changes"): one
// call kept pending on a connection of its own, answered when a node joins, dies or leaves, or a
// heartbeat changes what a node has free; each answer is merged into the copy, which goes to a
// callback. The first answer, and the first after the head restarted (another epoch), is the
// full view. Calls are at least min_interval apart, so a burst of changes comes as one answer. A
// failed call, or one unanswered past the head's promised wait, drops the connection and
// subscribes again after a backoff; the last good view stays in use meanwhile.
// A head without waitClusterChange (kUnimplemented) is polled with clusterView instead.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

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

struct ClusterViewSubscriberOptions {
  // The longest backoff between failed subscriptions (it starts at 50 ms and doubles), and the
  // polling interval against a head without waitClusterChange.
  kj::Duration retry = kj::SECONDS;
  kj::Duration call_timeout = 5 * kj::SECONDS;
  // Asked of the head (maxWaitMs): a quiet head answers within this; a call unanswered past it,
  // call_timeout and a second is taken for a lost connection.
  uint32_t max_wait_ms = 10'000;
  // After an answer, the next call waits this long, so that the changes of a burst (placement
  // groups created and removed by the hundred, each changing its node's bundle resources) reach
  // the node as one answer rather than one each. 0: asks again at once.
  kj::Duration min_interval = 5 * kj::MILLISECONDS;
};

// Event-loop confined; `connector` and `timer` must outlive it. Dropping it cancels the call in
// flight.
class ClusterViewSubscriber {
 public:
  ClusterViewSubscriber(HeadConnector& connector, kj::Timer& timer,
                        ClusterViewSubscriberOptions options,
                        std::function<void(RemoteNodes)> on_view);
  ~ClusterViewSubscriber();
  ClusterViewSubscriber(const ClusterViewSubscriber&) = delete;
  ClusterViewSubscriber& operator=(const ClusterViewSubscriber&) = delete;

  // Subscribes now.
  void Start();
  uint64_t views() const { return views_; }        // answers handed on (changed or not)
  uint64_t failures() const { return failures_; }  // calls that failed or timed out
  bool polling() const { return polling_; }        // the head has no waitClusterChange

 private:
  struct Known {
    NodeId id;
    worker::scheduling::NodeView view;
    std::string address;
  };
  kj::Promise<void> Next();
  kj::Promise<void> Poll();
  kj::Promise<void> Failed(kj::Exception&& e);
  // Merges an answer into the copy; whether it changed anything.
  bool Apply(proto::ClusterChange::Reader change);
  void HandOn();

  HeadConnector& connector_;
  kj::Timer& timer_;
  ClusterViewSubscriberOptions options_;
  std::function<void(RemoteNodes)> on_view_;
  kj::Maybe<proto::Head::Client> head_;
  uint64_t epoch_ = 0;  // 0: no view yet (the next answer is full)
  uint64_t version_ = 0;
  std::vector<Known> nodes_;  // registration order
  std::vector<worker::scheduling::NodeView> node_types_;
  kj::Duration backoff_;
  bool polling_ = false;
  uint64_t views_ = 0;
  uint64_t failures_ = 0;
  kj::Promise<void> run_ = nullptr;  // last: cancelled first
};

}  // namespace airt::worker
