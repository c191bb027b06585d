// The head's tables in plain C++: what the RPC edge (wire.h) validates messages into and what the
// tables keep. Values only; no behaviour.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/scheduling_strategy.h"
#include "common/ids.h"

namespace airt::head::internal {

// "CPU", "GPU", "memory" (bytes) or a custom name, with a finite amount >= 0.
struct Resource {
  std::string name;
  double amount = 0;
  friend bool operator==(const Resource&, const Resource&) = default;
};

struct Label {
  std::string key;
  std::string value;
  friend bool operator==(const Label&, const Label&) = default;
};

// What a node says about itself when it registers (proto::NodeInfo).
struct NodeInfo {
  NodeId id;
  std::string address;
  uint16_t node_port = 0;
  uint16_t transfer_port = 0;
  std::string store_socket;
  std::vector<Resource> total;
  std::vector<Label> labels;
  std::vector<uint32_t> gpu_ids;
  std::string temp_dir;
  int32_t pid = 0;
  friend bool operator==(const NodeInfo&, const NodeInfo&) = default;
};

// A resource shape and how many requests ask for it (proto::ShapeCount).
struct ShapeCount {
  std::vector<Resource> resources;
  std::string accelerator_type;  // "": any
  uint32_t count = 0;
  friend bool operator==(const ShapeCount&, const ShapeCount&) = default;
};

// What a node reports with each heartbeat.
struct NodeLoad {
  std::vector<Resource> available;
  std::vector<uint32_t> gpu_ids_in_use;
  std::vector<uint32_t> quarantined_gpu_ids;
  std::vector<ShapeCount> queued;  // its queued lease requests by shape
  uint32_t num_leases = 0;
  uint64_t num_primary_objects = 0;  // primary copies in its store
  uint64_t store_free_bytes = 0;     // free in its store's arena
  friend bool operator==(const NodeLoad&, const NodeLoad&) = default;
};

// The head's view of one node (proto::NodeStatus).
struct NodeView {
  NodeInfo info;
  bool alive = false;
  NodeLoad load;
  uint64_t ms_since_heartbeat = 0;
  // Why and when (wall ms since the epoch) the head declared it dead; "" and 0 while alive. A
  // node whose timeout passed but whose death is not recorded yet shows the timeout as cause.
  std::string death_cause;
  uint64_t death_time_ms = 0;
  // Draining (NodeTable::StartDrain): no actor or bundle is placed there; it leaves by the
  // deadline (wall ms since the epoch).
  bool draining = false;
  std::string drain_reason;
  uint64_t drain_deadline_ms = 0;
  friend bool operator==(const NodeView&, const NodeView&) = default;
};

// One driver's job (proto::JobInfo). Times are wall-clock ms since the epoch; end_ms is 0 while
// the job runs.
struct JobRecord {
  JobId id;
  int32_t driver_pid = 0;
  std::string driver_address;
  std::string code_search_path;  // the job's own libraries, ':'-separated
  std::string ns;                // its driver's namespace ("": the anonymous one)
  uint64_t start_ms = 0;
  uint64_t end_ms = 0;
  bool alive = false;
  friend bool operator==(const JobRecord&, const JobRecord&) = default;
};

// An actor's life (proto::ActorState), in the schema's order.
enum class ActorState : uint8_t { kPending, kAlive, kRestarting, kDead };

// One actor of the directory (proto::ActorInfo). `id`'s last 4 bytes are `job`.
struct ActorRecord {
  ActorId id;
  JobId job;
  std::string name;  // "" for an unnamed actor
  std::string ns;
  std::string class_name;
  ActorState state = ActorState::kPending;
  std::string worker_address;
  std::string node_address;
  std::optional<WorkerId> worker_id;
  int32_t pid = 0;
  uint32_t num_restarts = 0;
  int32_t max_restarts = 0;  // -1: without limit
  std::string death_cause;
  bool detached = false;         // only a named actor may be detached
  uint8_t language = 0;          // 0 C++, 1 Python
  int32_t max_task_retries = 0;  // -1: without limit
  // What it needs from its node; fixed at registration.
  std::vector<Resource> resources;
  std::string accelerator_type;  // "": any node
  std::optional<NodeId> node;    // where the head placed it last (placeActor)
  sched::SchedulingStrategy strategy{};   // how placeActor chooses its node; fixed at registration
  // The actor's creation task (a flat proto::TaskSpec message) from its owner's ALIVE update, so
  // that the head can restart it; "" until then.
  std::string creation_task;
  friend bool operator==(const ActorRecord&, const ActorRecord&) = default;
};

}  // namespace airt::head::internal
