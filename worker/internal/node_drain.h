// The node's drain (docs/cluster.md "Draining a node"), started by the head's Node.drain (from
// `airt drain` or a provider's preemption notice): from Start on, the lease manager grants
// nothing new (requests spill back to nodes with room, or wait); the leases held run on until
// they are all returned or the deadline passes, when the workers still leased are stopped (their
// owners retry the tasks and restart the actors elsewhere, as for a node death); then WhenDone
// resolves and the node leaves the cluster (node_daemon.cc's LeaveCluster).
//
//   serving --Start--> draining --no lease left--> done
//                          \--deadline: stop the leased workers--> done
//
// Event-loop confined.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <kj/async.h>
#include <kj/timer.h>

#include "common/status.h"
#include "worker/internal/lease_manager.h"

namespace airt::worker {

struct NodeDrainSnapshot {
  enum class Phase { kServing, kDraining, kDone };
  Phase phase = Phase::kServing;
  std::string reason;
  uint64_t deadline_ms = 0;     // wall clock, ms since the epoch
  bool deadline_passed = false;  // the leased workers were stopped at the deadline
  size_t workers_stopped = 0;    // how many that were
};

class NodeDrain {
 public:
  // `leases` and `timer` must outlive this; `wall_ms` reads the wall clock (ms since the epoch).
  // The drain checks the leases left every `poll_interval`.
  NodeDrain(LeaseManager& leases, kj::Timer& timer, std::function<uint64_t()> wall_ms,
            kj::Duration poll_interval = 100 * kj::MILLISECONDS);

  // Starts draining with `reason`, to end at most `timeout` from now. Drained again: the earlier
  // deadline stands and the reason is the new one. kInvalidArgument: a zero timeout;
  // kFailedPrecondition: the drain is done (the node is leaving).
  Status Start(std::string reason, kj::Duration timeout);
  // Resolves once the drain is done: no lease is held any more (after the deadline, once the
  // workers still leased were stopped). Never rejects; at most one caller.
  kj::Promise<void> WhenDone();

  NodeDrainSnapshot Snapshot() const { return snapshot_; }

 private:
  kj::Promise<void> Watch();
  size_t LeasesLeft() const;

  LeaseManager& leases_;
  kj::Timer& timer_;
  std::function<uint64_t()> wall_ms_;
  kj::Duration poll_interval_;
  NodeDrainSnapshot snapshot_;
  kj::TimePoint deadline_ = kj::origin<kj::TimePoint>();
  kj::Own<kj::PromiseFulfiller<void>> done_;
  kj::Maybe<kj::Promise<void>> done_promise_;
  kj::Maybe<kj::Promise<void>> run_;  // last: cancelled first
};

}  // namespace airt::worker
