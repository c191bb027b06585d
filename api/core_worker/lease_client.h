// Asking nodes for worker leases on a submitter's behalf: follows spillbacks to the node with room
// and reports a shape no node can ever hold. Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <capnp/capability.h>
#include <kj/async.h>

#include "common/ids.h"
#include "common/scheduling_strategy.h"

namespace airt::core_worker {

using ConnectFn = std::function<capnp::Capability::Client(const std::string& address)>;

struct LeaseRequest {
  std::map<std::string, double> resources;
  std::string accelerator_type;
  std::string code_search_path;  // the job's own code, which a new worker loads
  bool python = false;           // a Python worker, not a C++ one
  bool placed = false;           // the head chose this node (an actor's): it does not spill it back
  bool detached = false;         // a detached actor's: the node keeps its worker after the job ends
  sched::SchedulingStrategy strategy{};  // the node's lease policy decides it
  bool retriable = false;        // its tasks are retried, or its actor restarts, when it dies
};

struct LeaseOutcome {
  std::string node;  // host:port of the node that granted it
  uint64_t lease_id = 0;
  std::string worker;     // host:port of the worker's service
  std::string worker_id;  // 28 bytes
  int32_t pid = 0;
  std::string infeasible;  // non-empty: no node can ever hold the shape (says why)
  // Non-empty: the first node spilled the lease back to a node that cannot be reached (it died
  // and the first node's view does not show it yet); says which and why. Ask again later.
  std::string spillback_unreachable;
  // The node's LeaseHolder for a grant: keep it while the lease is held and hand it to
  // ReturnLease. Dropping it without returning the lease makes the node reclaim it (and stop its
  // worker), as when this process dies. Loop thread only.
  capnp::Capability::Client holder = nullptr;
};

// Asks `node` for a C++ worker of `job` holding `request`; a spillback is followed (at most 8
// hops). Rejects (a kj::Exception) when `node` cannot be reached; a node it spilled back to that
// cannot be reached is LeaseOutcome::spillback_unreachable.
kj::Promise<LeaseOutcome> RequestLease(const ConnectFn& connect, const std::string& node,
                                       const LeaseRequest& request, const JobId& job);

// Gives lease `lease_id` back to `node`; `disconnect` stops its worker instead of reusing it.
// `holder` (LeaseOutcome::holder) is dropped once the node has answered, so the node never sees
// it dropped while the lease is still held.
kj::Promise<void> ReturnLease(const ConnectFn& connect, const std::string& node, uint64_t lease_id,
                              bool disconnect, capnp::Capability::Client holder);

}  // namespace airt::core_worker
