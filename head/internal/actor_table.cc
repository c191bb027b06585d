#include "head/internal/actor_table.h"

#include <algorithm>
#include <tuple>

#include "common/logging.h"
#include "head/internal/wire.h"

namespace airt::head::internal {
namespace {

constexpr std::string_view kActorPrefix = "actor:";

std::string Short(const ActorId& id) { return id.Hex().substr(0, 8); }

bool IsDead(const ActorRecord& actor) { return actor.state == ActorState::kDead; }

std::string NameInNamespace(const ActorRecord& actor) {
  return "name '" + actor.name + "' in namespace '" + actor.ns + "'";
}

}  // namespace

ActorTable::ActorTable(Options options, MetadataStore& store, const JobTable& jobs)
    : options_(options), store_(store), jobs_(jobs) {}

std::string ActorTable::RowKey(const ActorId& id) { return std::string(kActorPrefix) + id.Hex(); }

Status ActorTable::Load() {
  AIRT_ASSIGN_OR_RETURN(std::vector<std::string> keys, store_.Keys(kActorPrefix));
  std::vector<ActorRecord> loaded;
  for (const std::string& key : keys) {
    AIRT_ASSIGN_OR_RETURN(std::optional<std::string> bytes, store_.Get(key));
    if (!bytes) continue;  // deleted since Keys
    Result<ActorRecord> actor = DecodeActorRow(*bytes);
    if (actor.ok() && key != RowKey(actor->id)) {
      actor = Internal("the row's actor id " + actor->id.Hex() + " does not match its key");
    }
    if (!actor.ok()) {
      AIRT_LOG(ERROR) << "skipping metadata row '" << key << "': " << actor.status().message();
      continue;
    }
    loaded.push_back(std::move(*actor));
  }
  std::sort(loaded.begin(), loaded.end(), [](const ActorRecord& a, const ActorRecord& b) {
    return std::tuple(JobIdValue(a.job), a.id) < std::tuple(JobIdValue(b.job), b.id);
  });
  for (ActorRecord& actor : loaded) {
    if (!IsDead(actor) && !actor.name.empty() && named_.count({actor.ns, actor.name}) != 0) {
      AIRT_LOG(ERROR) << "skipping metadata row '" << RowKey(actor.id) << "': its "
                      << NameInNamespace(actor) << " is held by another actor";
      continue;
    }
    Insert(next_seq_++, std::move(actor));
  }
  ForgetOldDead();
  if (!by_seq_.empty()) {
    AIRT_LOG(INFO) << "loaded " << by_seq_.size() << " actors (" << dead_
                   << " dead) from the metadata store";
  }
  return Status::Ok();
}

void ActorTable::Insert(uint64_t seq, ActorRecord actor) {
  seq_of_[actor.id] = seq;
  if (IsDead(actor)) {
    ++dead_;
  } else if (!actor.name.empty()) {
    named_[{actor.ns, actor.name}] = actor.id;
  }
  by_seq_.emplace(seq, std::move(actor));
}

void ActorTable::Replace(const ActorRecord& actor) {
  ActorRecord& stored = by_seq_.at(seq_of_.at(actor.id));
  if (!IsDead(stored) && IsDead(actor)) {
    ++dead_;
    if (!stored.name.empty()) named_.erase({stored.ns, stored.name});
  }
  stored = actor;
}

Status ActorTable::Register(ActorRecord actor) {
  std::optional<JobRecord> job = jobs_.Find(actor.job);
  if (!job) {
    return FailedPrecondition("actor " + actor.id.Hex() + " belongs to job " + actor.job.Hex() +
                              ", which is not registered");
  }
  if (!job->alive) {
    return FailedPrecondition("actor " + actor.id.Hex() + " belongs to job " + actor.job.Hex() +
                              ", which has finished");
  }
  if (seq_of_.count(actor.id) != 0) {
    return AlreadyExists("actor " + actor.id.Hex() + " is registered already");
  }
  if (!actor.name.empty()) {
    auto taken = named_.find({actor.ns, actor.name});
    if (taken != named_.end()) {
      return AlreadyExists("the actor " + NameInNamespace(actor) + " exists already (actor " +
                           taken->second.Hex() + ")");
    }
  }
  actor.state = ActorState::kPending;
  AIRT_RETURN_IF_ERROR(store_.Put(RowKey(actor.id), EncodeActorRow(actor))
                           .WithContext("registering actor " + actor.id.Hex()));
  AIRT_LOG(INFO) << "actor " << actor.id.Hex() << " (" << actor.class_name
                 << (actor.name.empty() ? "" : ", " + NameInNamespace(actor)) << ") of job "
                 << actor.job.Hex() << " registered";
  Insert(next_seq_++, std::move(actor));
  return Status::Ok();
}

Status ActorTable::Update(const ActorRecord& news) {
  auto found = seq_of_.find(news.id);
  if (found == seq_of_.end()) return NotFound("actor " + news.id.Hex() + " is not registered");
  const ActorRecord& stored = by_seq_.at(found->second);
  if (IsDead(stored)) {
    return FailedPrecondition("actor " + news.id.Hex() + " is DEAD (" + stored.death_cause +
                              "); stop its worker");
  }
  ActorRecord updated = stored;
  updated.state = news.state;
  updated.worker_address = news.worker_address;
  updated.node_address = news.node_address;
  updated.worker_id = news.worker_id;
  updated.pid = news.pid;
  updated.num_restarts = news.num_restarts;
  updated.max_restarts = news.max_restarts;
  updated.death_cause = news.death_cause;
  updated.language = news.language;
  AIRT_RETURN_IF_ERROR(store_.Put(RowKey(updated.id), EncodeActorRow(updated))
                           .WithContext("updating actor " + updated.id.Hex()));
  if (updated.state != stored.state) {
    AIRT_LOG(INFO) << "actor " << Short(updated.id) << " is " << ActorStateName(updated.state)
                   << (IsDead(updated) ? ": " + updated.death_cause : "");
  }
  Replace(updated);
  if (IsDead(updated)) ForgetOldDead();
  return Status::Ok();
}

Status ActorTable::Place(const ActorId& id, const NodeId& node) {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return NotFound("actor " + id.Hex() + " is not registered");
  const ActorRecord& stored = by_seq_.at(found->second);
  if (IsDead(stored)) {
    return FailedPrecondition("actor " + id.Hex() + " is DEAD (" + stored.death_cause +
                              "); it is not placed again");
  }
  ActorRecord placed = stored;
  placed.node = node;
  AIRT_RETURN_IF_ERROR(store_.Put(RowKey(id), EncodeActorRow(placed))
                           .WithContext("recording where actor " + id.Hex() + " is placed"));
  AIRT_LOG(INFO) << "actor " << Short(id) << " placed on node " << node.Hex().substr(0, 8);
  Replace(placed);
  return Status::Ok();
}

Result<ActorRecord> ActorTable::Kill(const ActorId& id, std::string cause) {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return NotFound("actor " + id.Hex() + " is not registered");
  const ActorRecord& stored = by_seq_.at(found->second);
  if (IsDead(stored)) return stored;
  ActorRecord killed = stored;
  killed.state = ActorState::kDead;
  killed.death_cause = std::move(cause);
  AIRT_RETURN_IF_ERROR(
      store_.Put(RowKey(id), EncodeActorRow(killed)).WithContext("killing actor " + id.Hex()));
  AIRT_LOG(INFO) << "actor " << Short(id) << " killed: " << killed.death_cause;
  Replace(killed);
  ForgetOldDead();  // may forget `killed` itself when max_dead_actors is 0
  return killed;
}

size_t ActorTable::OnJobFinished(const JobId& job) {
  std::string cause = "the driver of job " + job.Hex() + " exited";
  std::vector<ActorRecord> dying;
  for (const auto& [seq, actor] : by_seq_) {
    if (actor.job == job && !actor.detached && !IsDead(actor)) dying.push_back(actor);
  }
  for (ActorRecord& actor : dying) {
    actor.state = ActorState::kDead;
    actor.death_cause = cause;
    Status written = store_.Put(RowKey(actor.id), EncodeActorRow(actor));
    if (!written.ok()) {
      AIRT_LOG(WARNING) << "could not record actor " << Short(actor.id)
                        << " as dead in the metadata store: " << written.ToString();
    }
    Replace(actor);
  }
  if (!dying.empty()) {
    AIRT_LOG(INFO) << dying.size() << " actors of job " << job.Hex() << " are DEAD: " << cause;
    ForgetOldDead();
  }
  return dying.size();
}

void ActorTable::ForgetOldDead() {
  for (auto it = by_seq_.begin(); dead_ > options_.max_dead_actors && it != by_seq_.end();) {
    if (!IsDead(it->second)) {
      ++it;
      continue;
    }
    Result<bool> deleted = store_.Delete(RowKey(it->second.id));
    if (!deleted.ok()) {
      AIRT_LOG(WARNING) << "could not delete actor " << Short(it->second.id)
                        << "'s row from the metadata store: " << deleted.status().ToString();
    }
    seq_of_.erase(it->second.id);
    it = by_seq_.erase(it);
    --dead_;
  }
}

std::optional<ActorRecord> ActorTable::Find(const ActorId& id) const {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return std::nullopt;
  return by_seq_.at(found->second);
}

std::optional<ActorRecord> ActorTable::FindNamed(std::string_view ns, std::string_view name) const {
  auto found = named_.find({std::string(ns), std::string(name)});
  if (found == named_.end()) return std::nullopt;
  return Find(found->second);
}

std::vector<ActorRecord> ActorTable::List() const {
  std::vector<ActorRecord> out;
  out.reserve(by_seq_.size());
  for (const auto& [seq, actor] : by_seq_) out.push_back(actor);
  return out;
}

}  // namespace airt::head::internal
