// The autoscaler's decisions as a pure function (docs/autoscaler.md "Decisions"): what to launch
// for the demand no node can serve, and which idle nodes to stop. No clock, no RPC: the
// Autoscaler (autoscaler.h) gathers the input from the head and acts on the output.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "autoscaler/config.h"

namespace airt::autoscaler {

using Resources = std::map<std::string, double>;

// One resource request of the demand: `count` asks for `resources` on a node whose labels
// match `labels`, a Ray label_selector dict: "v" equal, "!v" not equal (or absent), "in(a,b)",
// "!in(a,b)" (an accelerator type is the label accelerator_type).
struct ShapeDemand {
  Resources resources;
  std::map<std::string, std::string> labels;
  uint32_t count = 1;
  std::string source;  // "tasks", "actors", "request_resources": for the reasons shown
};

enum class GroupStrategy { kPack, kSpread, kStrictPack, kStrictSpread };

struct GroupDemand {
  std::string id;  // hex, for the reasons shown
  GroupStrategy strategy = GroupStrategy::kPack;
  std::vector<Resources> bundles;
};

struct Demand {
  std::vector<ShapeDemand> shapes;  // queued tasks and pending actors: onto free resources
  std::vector<GroupDemand> groups;  // pending placement groups: whole
  // request_resources: the cluster's totals must hold these (Ray's rule), free or not.
  std::vector<ShapeDemand> requested;
};

// A node the cluster has now: alive and registered, or launched and not registered yet
// (`launching`: it counts with its type's full resources, free).
struct NodeNow {
  std::string id;    // node id (hex) or, launching, the provider's id
  std::string type;  // its node type; "" for a node the autoscaler did not start
  Resources total;
  Resources available;
  std::map<std::string, std::string> labels;
  bool launching = false;
  bool head_node = false;  // the node `airt up` started with the head: never stopped
  int64_t idle_ms = 0;     // how long it has had no leases, actors, bundles or queue; 0: busy
  // Primary object copies in its store (its heartbeat): a node stopped with some is evacuated
  // first (Autoscaler), and stopped only once they are moved.
  uint64_t primary_objects = 0;
  std::string node_address;  // its Node service, host:port ("" while launching)
};

struct Launch {
  std::string type;
  uint32_t count = 0;
  std::string reason;  // "for {GPU: 1} x2 (tasks)", "min_workers 1"
};

struct Stop {
  std::string id;
  std::string type;
  std::string reason;  // "idle for 1.3 s (idle_timeout_minutes 0.02)"
};

struct Plan {
  std::vector<Launch> launches;
  std::vector<Stop> stops;
  // Demand no node type can hold: it is infeasible (the reasons name the shape).
  std::vector<std::string> infeasible;
  // Demand a node type can hold but the limits (max_workers) keep from launching now.
  std::vector<std::string> held_by_limits;
};

// Decides, in order: each type's min_workers; then each demand shape, largest first, onto the
// free resources of the nodes now (launching ones included), launching a node of the first type
// (by name) that holds it when none has room; placement groups whole (STRICT_SPREAD: a distinct
// node per bundle, STRICT_PACK: one node for them all; PACK and SPREAD: bundle by bundle), a
// group the limits keep from fitting whole launching nothing; request_resources onto the nodes'
// totals. Never above a type's max_workers or the cluster's max_workers (the head's node not
// counted). Then the nodes the autoscaler started, idle at least idle_timeout, are stopped, down
// to their type's min_workers, unless the demand just placed needs them.
Plan Decide(const ClusterConfig& config, const std::vector<NodeNow>& nodes, const Demand& demand);

// "{CPU: 1, GPU: 1}"
std::string ShapeText(const Resources& resources);

}  // namespace airt::autoscaler
