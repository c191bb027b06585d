// Where the head puts an actor (DESIGN.md "Scheduling" 3: actors are placed by the head), decided
// from the head's cluster view and its actor directory. Pure and deterministic: no RPC, no clock
// (whether the grace period for joining nodes is over comes in as an argument), so tests drive it
// with several nodes' views directly.
//
// The policy, in this order:
//  0. A NodeAffinity strategy: its node when alive, not in `avoid`, and its totals hold the actor
//     (hard: even when nothing is free there now, the lease then waits in its queue; with
//     fail_on_unavailable, infeasible instead). Hard and the node dead or too small: infeasible
//     at once naming it; unknown: wait through the grace period, then infeasible. Soft: otherwise
//     (or, with spill_on_unavailable, when nothing is free there) placed as below.
//  1. Candidates: alive nodes, not in `avoid`, whose accelerator_type label matches the actor's
//     (when it names one), whose labels match its label_selector and a NodeLabel strategy's
//     hard expressions, and whose totals hold every resource it asks for.
//  2. No candidate: wait while the grace period for joining nodes runs, then infeasible, with a
//     message naming the shape and every alive node's totals (as a task's infeasible error does).
//  3. Among the candidates, those with the resources free now come first. Free is the smaller of
//     the node's last heartbeat and its totals less what the directory's live actors placed there
//     hold: an actor placed a moment ago counts before the node's next heartbeat shows it.
//  4. The least loaded of those wins: the lowest utilization after placing (the largest share of
//     any requested resource in use), then the fewest live actors placed there, then the earliest
//     registered node. Actors thus spread over nodes with room instead of piling up on one (the
//     owner's node has no preference); an actor asking for nothing goes where fewest actors are.
//     When none has the resources free now, the least loaded candidate is still chosen and the
//     actor's lease waits in that node's queue. SPREAD puts the fewest live actors first (then
//     utilization); a NodeLabel strategy's soft expressions put their nodes first of all.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "common/ids.h"
#include "common/scheduling_strategy.h"
#include "head/internal/records.h"

namespace airt::head::internal {

// One node as the placement policy sees it.
struct PlacementNode {
  NodeId id;
  bool alive = false;
  std::vector<Resource> total;
  std::vector<Resource> available;  // the node's last heartbeat
  std::vector<Label> labels;
  std::vector<Resource> held;  // summed over the live actors the head placed here
  size_t actors = 0;           // live actors the head placed here
};

// What an actor needs from its node.
struct ActorDemand {
  std::vector<Resource> resources;
  std::string accelerator_type;  // "": any node
  sched::SchedulingStrategy strategy{};   // see DecidePlacement's steps
};

struct PlaceOn {
  NodeId node;
};
// No node fits yet; the grace period for joining nodes has not ended.
struct WaitForNodes {
  std::string reason;  // names the shape
};
// No node can hold it: `message` names the shape and each alive node's totals.
struct CannotPlace {
  std::string message;
};
using PlacementDecision = std::variant<PlaceOn, WaitForNodes, CannotPlace>;

// `nodes` in registration order (the order breaks the last tie); `avoid`: nodes that refused it.
PlacementDecision DecidePlacement(const ActorDemand& demand,
                                  const std::vector<PlacementNode>& nodes,
                                  const std::set<NodeId>& avoid, bool grace_over);

// The view's nodes with what the directory's actors that are not DEAD hold on them, leaving out
// `placing` itself (a restarting actor's old node must not count it).
std::vector<PlacementNode> PlacementNodes(const std::vector<NodeView>& view,
                                          const std::vector<ActorRecord>& actors,
                                          const ActorId& placing);

// "{CPU: 1, GPU: 0.5, special: 2, accelerator_type: A10}": CPU, GPU, memory, then the other names
// in order, zero amounts left out; the same form the node's scheduler names shapes in.
std::string DescribeDemand(const ActorDemand& demand);

}  // namespace airt::head::internal
