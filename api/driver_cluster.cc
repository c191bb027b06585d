// The driver API's calls on the cluster's tables and on actors and tasks by id (the node list, the
// head's KV, named actors, kill, cancel: airt/driver.h's internal half), over the process's core
// worker (api/internal/driver_state.h).
#include "airt/driver.h"
#include "airt/internal/collective_support.h"
#include "api/core_worker/core_worker.h"
#include "api/internal/driver_state.h"
#include "api/internal/error_kinds.h"
#include "api/local_mode.h"

namespace airt::internal {
namespace {

local::LocalRuntime* Local() { return CurrentLocal(); }
std::shared_ptr<core_worker::CoreWorker> Core() { return CurrentCore(); }
ObjectId IdOf(const std::string& binary) { return ObjectIdOf(binary); }
ActorId ActorIdOf(const std::string& binary) { return ActorIdOfBinary(binary); }
[[noreturn]] void Throw(const Status& status) { ThrowStatus(status); }
[[noreturn]] void LocalModeLacks(const std::string& what) { ThrowLocalModeLacks(what); }

}  // namespace

std::vector<NodeInfo> ClusterNodes() {
  if (Local()) LocalModeLacks("the cluster's node list");
  std::shared_ptr<core_worker::CoreWorker> holder = Core();
  core_worker::CoreWorker& core = *holder;
  Result<std::vector<core_worker::CoreWorker::NodeView>> view = core.ClusterView();
  if (!view.ok()) Throw(view.status());
  std::vector<NodeInfo> out;
  for (const auto& n : *view) {
    out.push_back(NodeInfo{n.id.Hex(), n.address, n.alive,
                           n.alive && n.address == core.node_address(), n.total, n.available});
  }
  return out;
}

bool KvPut(const std::string& ns, const std::string& key, const std::string& value,
           bool overwrite) {
  if (Local()) LocalModeLacks("the head's KV");
  Result<bool> added = Core()->KvPut(ns, key, value, overwrite);
  if (!added.ok()) Throw(added.status());
  return *added;
}

std::optional<std::string> KvGet(const std::string& ns, const std::string& key) {
  if (Local()) LocalModeLacks("the head's KV");
  Result<std::optional<std::string>> value = Core()->KvGet(ns, key);
  if (!value.ok()) Throw(value.status());
  return *value;
}

bool KvDelete(const std::string& ns, const std::string& key) {
  if (Local()) LocalModeLacks("the head's KV");
  Result<bool> deleted = Core()->KvDelete(ns, key);
  if (!deleted.ok()) Throw(deleted.status());
  return *deleted;
}

uint32_t KvDeletePrefix(const std::string& ns, const std::string& prefix) {
  if (Local()) LocalModeLacks("the head's KV");
  Result<uint32_t> deleted = Core()->KvDeletePrefix(ns, prefix);
  if (!deleted.ok()) Throw(deleted.status());
  return *deleted;
}

void RecordCollectiveProgress(const std::string& group, std::optional<uint64_t> entered) {
  if (Local()) LocalModeLacks("collective groups");
  Core()->RecordCollectiveProgress(group, entered);
}

std::string CollectiveProgressAddress() {
  if (Local()) LocalModeLacks("collective groups");
  Result<std::string> address = Core()->CollectiveProgressAddress();
  if (!address.ok()) Throw(address.status());
  return *address;
}

std::optional<std::pair<uint64_t, bool>> QueryCollectiveProgress(const std::string& address,
                                                                 const std::string& group,
                                                                 int64_t timeout_ms) {
  if (Local()) LocalModeLacks("collective groups");
  Result<std::optional<core_worker::CollectiveProgress>> got =
      Core()->QueryCollectiveProgress(address, group, timeout_ms);
  if (!got.ok()) Throw(got.status());
  if (!got->has_value()) return std::nullopt;
  return std::make_pair((*got)->entered, (*got)->left);
}

std::string NodeAddress() {
  if (Local()) LocalModeLacks("the cluster's nodes");
  return Core()->node_address();
}

std::string LookupActor(const std::string& name, const std::string& ns) {
  local::LocalRuntime* local = Local();
  Result<ActorId> id = local ? local->Lookup(name, ns) : Core()->GetActor(name, ns);
  if (id.ok()) return id->Binary();
  if (id.status().code() == Code::kNotFound) return "";
  Throw(id.status());
}

void KillActor(const std::string& actor_id, bool no_restart) {
  local::LocalRuntime* local = Local();
  Status killed = local ? local->Kill(ActorIdOf(actor_id), no_restart)
                        : Core()->KillActor(ActorIdOf(actor_id), no_restart);
  if (killed.ok()) return;
  // An actor the head does not know is dead (Ray: ActorDiedError at kill of a dead actor).
  if (killed.code() == Code::kNotFound) ThrowError(ErrorKind::kActorDied, killed.message());
  Throw(killed);
}

void CancelTask(const std::string& object_id, bool force, bool recursive) {
  if (Local()) LocalModeLacks("Cancel");
  Status cancelled = Core()->CancelTask(IdOf(object_id), force, recursive);
  if (cancelled.ok()) return;
  Throw(cancelled);
}

}  // namespace airt::internal
