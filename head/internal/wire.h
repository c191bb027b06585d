// The head's edge (DESIGN.md "Wires"): every message field is validated here into the plain records
// of records.h, and records are written back into messages. A bad field is kInvalidArgument naming
// the field as the schema spells it ("info.total[2].amount"); nothing here throws or aborts.
// Rows kept in the MetadataStore are Cap'n Proto messages of the same schema, so they decode with
// the same checks (a corrupt row is kInternal).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/proto/cluster.capnp.h"
#include "common/status.h"
#include "head/internal/records.h"

namespace airt::head::internal {

// Bounds on what the head accepts.
inline constexpr size_t kMaxNameBytes = 256;     // resource names, label keys, KV namespaces
inline constexpr size_t kMaxAddressBytes = 256;  // node and driver addresses
inline constexpr size_t kMaxLabelValueBytes = 1024;
inline constexpr size_t kMaxPathBytes = 4096;    // store sockets, temp folders
inline constexpr size_t kMaxCodeSearchPathBytes = 64 << 10;  // a job's libraries
inline constexpr size_t kMaxListEntries = 4096;  // resources, labels, GPU ids per message
inline constexpr size_t kMaxKvKeyBytes = 4096;   // KV keys and key prefixes
inline constexpr size_t kMaxKvValueBytes = 32u << 20;
inline constexpr size_t kMaxClassNameBytes = 1024;  // an actor's factory name
inline constexpr size_t kMaxDeathCauseBytes = 64u << 10;
inline constexpr size_t kMaxCreationTaskBytes = 16u << 20;  // an actor's creation task

Result<NodeId> ParseNodeId(capnp::Data::Reader bytes, std::string_view field);
Result<JobId> ParseJobId(capnp::Data::Reader bytes, std::string_view field);
Result<ActorId> ParseActorId(capnp::Data::Reader bytes, std::string_view field);
// At most `max_bytes`, no NUL byte (Text is read as a C string downstream); empty only when
// `allow_empty`.
Result<std::string> ParseText(capnp::Text::Reader text, std::string_view field, size_t max_bytes,
                              bool allow_empty);
// Names non-empty and listed once, amounts finite and >= 0.
Result<std::vector<Resource>> ParseResources(capnp::List<proto::Resource>::Reader list,
                                             std::string_view field);
// Each id listed once.
Result<std::vector<uint32_t>> ParseGpuIds(capnp::List<uint32_t>::Reader list,
                                          std::string_view field);
// `address` must not be empty; label keys non-empty and listed once.
Result<NodeInfo> ParseNodeInfo(proto::NodeInfo::Reader info, std::string_view field);
// Each entry's resources as ParseResources, its count above 0.
Result<std::vector<ShapeCount>> ParseShapeCounts(capnp::List<proto::ShapeCount>::Reader list,
                                                 std::string_view field);
void FillShapeCounts(const std::vector<ShapeCount>& shapes,
                     capnp::List<proto::ShapeCount>::Builder out);
// A heartbeat's load. Whether the GPU ids are the node's own is the node table's check.
Result<NodeLoad> ParseNodeLoad(proto::Head::HeartbeatParams::Reader params);
// Every field of an actor: actorId 16 bytes ending with jobId (4 bytes), className not empty,
// state and language within their enums, workerId and nodeId empty or 28 bytes, pid >= 0,
// maxRestarts and maxTaskRetries >= -1, resources as ParseResources, a name when detached, texts
// within their bounds.
Result<ActorRecord> ParseActorInfo(proto::ActorInfo::Reader info, std::string_view field);
// An updateActor message: actorId and the fields an update may change (state, the worker's
// addresses, id and pid, restarts, death cause, language, creation task), checked as
// ParseActorInfo does (a creation task within kMaxCreationTaskBytes, whole words). The
// fields that stay (jobId, name, namespace, className, detached, maxTaskRetries, resources,
// acceleratorType) and the head's own (nodeId) are not read.
Result<ActorRecord> ParseActorUpdate(proto::ActorInfo::Reader info, std::string_view field);
// "PENDING", "ALIVE", "RESTARTING", "DEAD".
const char* ActorStateName(ActorState state);

void FillNodeInfo(const NodeInfo& info, proto::NodeInfo::Builder out);
void FillNodeStatus(const NodeView& view, proto::NodeStatus::Builder out);
void FillJobInfo(const JobRecord& job, proto::JobInfo::Builder out);
// `with_creation_task`: also its creation task (only its row keeps it; replies leave it out).
void FillActorInfo(const ActorRecord& actor, proto::ActorInfo::Builder out,
                   bool with_creation_task = false);

// A node's row: its NodeInfo, whether it is alive, and its drain mark (a proto::NodeStatus
// message).
struct NodeRow {
  NodeInfo info;
  bool alive = false;
  std::string death_cause;  // "" while alive
  uint64_t death_time_ms = 0;
  std::optional<std::string> drain_reason;  // set while draining
  uint64_t drain_deadline_ms = 0;
};
std::string EncodeNodeRow(const NodeRow& row);
Result<NodeRow> DecodeNodeRow(std::string_view bytes);
// A job's row (a proto::JobInfo message).
std::string EncodeJobRow(const JobRecord& job);
Result<JobRecord> DecodeJobRow(std::string_view bytes);
// An actor's row (a proto::ActorInfo message).
std::string EncodeActorRow(const ActorRecord& actor);
Result<ActorRecord> DecodeActorRow(std::string_view bytes);

}  // namespace airt::head::internal
