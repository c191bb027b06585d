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
  AIRT_ASSIGN_OR_RETURN(std::vector<Row> rows, store_.Scan(kActorPrefix));
  std::vector<ActorRecord> loaded;
  for (const Row& row : rows) {
    const std::string& key = row.key;
    Result<ActorRecord> actor = DecodeActorRow(row.value);
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

Result<Change> ActorTable::Register(ActorRecord actor) {
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
  Change change;
  change.what = "registering actor " + actor.id.Hex();
  change.rows.Put(RowKey(actor.id), EncodeActorRow(actor));
  change.on_written.push_back([this, actor = std::move(actor)]() mutable {
    AIRT_LOG(INFO) << "actor " << actor.id.Hex() << " (" << actor.class_name
                   << (actor.name.empty() ? "" : ", " + NameInNamespace(actor)) << ") of job "
                   << actor.job.Hex() << " registered";
    Insert(next_seq_++, std::move(actor));
  });
  return change;
}

Result<Change> ActorTable::Update(const ActorRecord& news) {
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
  if (!news.creation_task.empty()) updated.creation_task = news.creation_task;
  Change change;
  change.what = "updating actor " + updated.id.Hex();
  if (updated.state != stored.state) {
    change.on_written.push_back([id = updated.id, state = updated.state,
                                 cause = IsDead(updated) ? ": " + updated.death_cause : ""] {
      AIRT_LOG(INFO) << "actor " << Short(id) << " is " << ActorStateName(state) << cause;
    });
  }
  if (IsDead(updated)) {
    StageDeaths({std::move(updated)}, change);
  } else {
    change.rows.Put(RowKey(updated.id), EncodeActorRow(updated));
    change.on_written.push_back([this, updated = std::move(updated)] { Replace(updated); });
  }
  return change;
}

Result<Change> ActorTable::Place(const ActorId& id, const NodeId& node) {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return NotFound("actor " + id.Hex() + " is not registered");
  const ActorRecord& stored = by_seq_.at(found->second);
  if (IsDead(stored)) {
    return FailedPrecondition("actor " + id.Hex() + " is DEAD (" + stored.death_cause +
                              "); it is not placed again");
  }
  ActorRecord placed = stored;
  placed.node = node;
  Change change;
  change.what = "recording where actor " + id.Hex() + " is placed";
  change.rows.Put(RowKey(id), EncodeActorRow(placed));
  change.on_written.push_back([this, placed = std::move(placed)] {
    AIRT_LOG(INFO) << "actor " << Short(placed.id) << " placed on node "
                   << placed.node->Hex().substr(0, 8);
    Replace(placed);
  });
  return change;
}

Result<Staged<ActorRecord>> ActorTable::Kill(const ActorId& id, std::string cause) {
  auto found = seq_of_.find(id);
  if (found == seq_of_.end()) return NotFound("actor " + id.Hex() + " is not registered");
  const ActorRecord& stored = by_seq_.at(found->second);
  Staged<ActorRecord> out{stored, {}};
  if (IsDead(stored)) return out;
  out.value.state = ActorState::kDead;
  out.value.death_cause = std::move(cause);
  out.change.what = "killing actor " + id.Hex();
  out.change.on_written.push_back([id, cause = out.value.death_cause] {
    AIRT_LOG(INFO) << "actor " << Short(id) << " killed: " << cause;
  });
  StageDeaths({out.value}, out.change);
  return out;
}

Staged<size_t> ActorTable::OnJobFinished(const JobId& job) {
  std::string cause = "the driver of job " + job.Hex() + " exited";
  std::vector<ActorRecord> dying;
  for (const auto& [seq, actor] : by_seq_) {
    if (actor.job == job && !actor.detached && !IsDead(actor)) dying.push_back(actor);
  }
  Staged<size_t> out{dying.size(), {}};
  if (dying.empty()) return out;
  for (ActorRecord& actor : dying) {
    actor.state = ActorState::kDead;
    actor.death_cause = cause;
  }
  out.change.what = "marking the actors of job " + job.Hex() + " DEAD";
  out.change.on_written.push_back([n = dying.size(), job, cause] {
    AIRT_LOG(INFO) << n << " actors of job " << job.Hex() << " are DEAD: " << cause;
  });
  StageDeaths(std::move(dying), out.change);
  return out;
}

void ActorTable::StageDeaths(std::vector<ActorRecord> dying, Change& change) {
  std::vector<ActorId> forget;
  size_t dead = dead_ + dying.size();
  auto is_dying = [&dying](const ActorId& id) {
    return std::any_of(dying.begin(), dying.end(),
                       [&id](const ActorRecord& a) { return a.id == id; });
  };
  for (auto it = by_seq_.begin(); dead > options_.max_dead_actors && it != by_seq_.end(); ++it) {
    if (!IsDead(it->second) && !is_dying(it->second.id)) continue;
    forget.push_back(it->second.id);
    --dead;
  }
  for (const ActorRecord& actor : dying) {
    if (std::find(forget.begin(), forget.end(), actor.id) == forget.end())
      change.rows.Put(RowKey(actor.id), EncodeActorRow(actor));
  }
  for (const ActorId& id : forget) change.rows.Delete(RowKey(id));
  change.on_written.push_back([this, dying = std::move(dying), forget = std::move(forget)] {
    for (const ActorRecord& actor : dying) Replace(actor);
    for (const ActorId& id : forget) {
      auto seq = seq_of_.find(id);
      by_seq_.erase(seq->second);
      seq_of_.erase(seq);
      --dead_;
    }
  });
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
