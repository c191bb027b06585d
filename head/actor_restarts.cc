// HeadServer's actor placement policy as a step (placeActor's and its own), and the restarts of
// every actor whose worker or node died, which the head makes itself (head.h;
// docs/fault_tolerance.md "Actors").
#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <variant>

#include <capnp/serialize.h>

#include "common/logging.h"
#include "common/rpc_status.h"
#include "common/strategy_wire.h"
#include "head/head.h"
#include "head/internal/actor_placement.h"
#include "head/internal/actor_table.h"
#include "head/internal/demand.h"
#include "head/internal/job_table.h"
#include "head/internal/node_connector.h"
#include "head/internal/node_table.h"
#include "head/internal/placement_group_manager.h"

namespace airt::head {
namespace {

using internal::ActorRecord;
using internal::ActorState;

// Actors waiting for a node to join, beyond which those no longer alive are forgotten.
constexpr size_t kMaxPlacementsWaiting = 1024;
// Nodes refusing one restart's lease (unreachable, or infeasible there after all) after which the
// actor is recorded DEAD with the last refusal.
constexpr size_t kMaxRefusals = 3;

std::string Short(const ActorId& id) { return id.Hex().substr(0, 8); }

std::string Why(const kj::Exception& e) { return FromKjException(e).ToString(); }

capnp::Data::Reader Bytes(const void* data, size_t n) {
  return capnp::Data::Reader(static_cast<const kj::byte*>(data), n);
}

}  // namespace

HeadServer::ActorNodeChoice HeadServer::ChooseActorNode(const ActorRecord& actor,
                                                        const std::set<NodeId>& avoid) {
  if (placing_since_.size() > kMaxPlacementsWaiting) {
    // Actors whose owners stopped asking (they died, or were killed) are forgotten here.
    std::erase_if(placing_since_, [this](const auto& entry) {
      std::optional<ActorRecord> waiting = actors_->Find(entry.first);
      return !waiting || waiting->state == ActorState::kDead;
    });
  }
  std::vector<internal::NodeView> view = groups_->WithBundleResources(nodes_->View());
  int64_t now = clock_.MonotonicMs();
  int64_t since = placing_since_.try_emplace(actor.id, now).first->second;
  bool grace_over = now - since >= static_cast<int64_t>(options_.infeasible_grace_ms);
  internal::PlacementDecision decision = internal::DecidePlacement(
      {actor.resources, actor.accelerator_type, actor.strategy},
      internal::PlacementNodes(view, actors_->List(), actor.id), avoid, grace_over);
  ActorNodeChoice out;
  if (const auto* waiting = std::get_if<internal::WaitForNodes>(&decision)) {
    out.message = waiting->reason;
    DemandMayHaveChanged();
    return out;
  }
  if (std::holds_alternative<internal::CannotPlace>(decision)) {
    // A node type of the autoscaler can hold it: pending demand, not infeasible.
    std::string type =
        internal::NodeTypeHolding(NodeTypes(), actor.resources, actor.accelerator_type);
    if (!type.empty()) {
      out.message = "no alive node can hold it; the autoscaler's node type " + type +
                    " can: waiting for one to launch";
      DemandMayHaveChanged();
      return out;
    }
  }
  placing_since_.erase(actor.id);
  DemandMayHaveChanged();
  if (const auto* cannot = std::get_if<internal::CannotPlace>(&decision)) {
    AIRT_LOG(WARNING) << "actor " << actor.id.Hex() << " cannot be placed: " << cannot->message;
    out.kind = ActorNodeChoice::Kind::kCannot;
    out.message = cannot->message;
    return out;
  }
  out.kind = ActorNodeChoice::Kind::kPlace;
  out.node = std::get<internal::PlaceOn>(decision).node;
  for (const internal::NodeView& v : view) {
    if (v.info.id == out.node) out.address = v.info.address + ":" + std::to_string(v.info.node_port);
  }
  return out;
}


void HeadServer::WatchActors() {
  if (node_connector_ == nullptr) return;  // the head cannot reach workers (tests without nodes)
  restarts_waiting_ = false;
  for (auto it = kept_.begin(); it != kept_.end();) {
    std::optional<ActorRecord> actor = actors_->Find(it->first);
    if (it->second.restarting || (actor && actor->state != ActorState::kDead)) {
      ++it;
      continue;
    }
    ReleaseLease(it->second);
    it = kept_.erase(it);
  }
  for (const ActorRecord& actor : actors_->List()) LookAfter(actor);
}

void HeadServer::LookAfter(const ActorRecord& actor) {
  if (node_connector_ == nullptr || actor.state == ActorState::kDead) return;
  std::optional<internal::JobRecord> job = jobs_->Find(actor.job);
  bool job_alive = job && job->alive;
  switch (actor.state) {
    case ActorState::kAlive: {
      KeptActor& kept = kept_[actor.id];
      if (kept.restarting) return;
      std::optional<internal::NodeView> node =
          actor.node ? nodes_->Find(*actor.node) : std::nullopt;
      if (actor.node && (!node || !node->alive)) {
        WorkerDied(actor.id, actor.worker_id, "its node " + actor.node->Hex() + " died");
      } else if (!kept.watched || kept.watched != actor.worker_id) {
        WatchWorker(actor);
      }
      return;
    }
    case ActorState::kRestarting:
      // Before its first start its owner places it again (the head holds no creation task yet).
      if (job_alive && actor.creation_task.empty()) return;
      if (kept_[actor.id].restarting) return;
      RestartActor(actor.id);
      return;
    case ActorState::kPending:
      // Its owner creates it; a detached one whose creator exited first will never be created.
      if (!job_alive) {
        RecordDead(actor.id, "the job that created it (" + actor.job.Hex() +
                                 ") finished before its constructor ran");
      }
      return;
    case ActorState::kDead:
      return;
  }
}

void HeadServer::WatchWorker(const ActorRecord& actor) {
  KeptActor& kept = kept_[actor.id];
  kept.watched = actor.worker_id;
  AIRT_LOG(DEBUG) << "actor " << Short(actor.id) << ": the head watches its worker at "
                  << actor.worker_address;
  kept.watch = node_connector_->WhenGone(actor.worker_address)
                   .then([this, id = actor.id, worker = actor.worker_id] {
                     WorkerDied(id, worker, "its worker process exited");
                   })
                   .eagerlyEvaluate(nullptr);
}

void HeadServer::WorkerDied(const ActorId& id, const std::optional<WorkerId>& worker,
                            const std::string& why) {
  std::optional<ActorRecord> actor = actors_->Find(id);
  if (!actor || actor->worker_id != worker) return;  // a death already handled
  KeptActor& kept = kept_[id];
  if (actor->state != ActorState::kAlive || kept.restarting) return;
  kept.watched.reset();
  ReleaseLease(kept);
  CountDeath(*actor, why);
}

void HeadServer::CountDeath(const ActorRecord& actor, const std::string& why) {
  const ActorId id = actor.id;
  int32_t max = actor.max_restarts;
  if (max >= 0 && actor.num_restarts >= static_cast<uint32_t>(max)) {
    RecordDead(id, "its process died (" + why + ") and it may not restart (max_restarts=" +
                       std::to_string(max) + ", restarted " + std::to_string(actor.num_restarts) +
                       " times)");
    return;
  }
  if (actor.creation_task.empty()) {
    RecordDead(id, "its process died (" + why +
                       ") and the head holds no creation task to restart it with (its owner "
                       "never sent one)");
    return;
  }
  ActorRecord news = actor;
  news.state = ActorState::kRestarting;
  ++news.num_restarts;
  news.worker_address.clear();
  news.node_address.clear();
  news.worker_id.reset();
  news.pid = 0;
  news.death_cause = why;
  news.creation_task.clear();  // the stored one stays
  AIRT_LOG(INFO) << "actor " << Short(id) << " died (" << why << "): the head restarts it"
                 << " (restart " << news.num_restarts << ")";
  kept_[id].restarting = true;
  tasks_.add(Commit([this, news] { return actors_->Update(news); }).then([this, id](Status s) {
    kept_[id].restarting = false;
    if (!s.ok()) {
      // Killed meanwhile, or the store failed: the next liveness check looks again.
      restarts_waiting_ = true;
      AIRT_LOG(WARNING) << "recording actor " << Short(id) << " RESTARTING: " << s.ToString();
      return;
    }
    RestartActor(id);
  }));
}

void HeadServer::RestartActor(const ActorId& id) {
  std::optional<ActorRecord> actor = actors_->Find(id);
  if (!actor || actor->state != ActorState::kRestarting) return;
  KeptActor& kept = kept_[id];
  if (kept.restarting) return;
  if (actor->creation_task.empty()) {
    RecordDead(id, "it was restarting and the head holds no creation task to restart it with "
                   "(its owner, job " + actor->job.Hex() + ", never sent one)");
    return;
  }
  ActorNodeChoice choice = ChooseActorNode(*actor, kept.refused);
  switch (choice.kind) {
    case ActorNodeChoice::Kind::kWait:
      restarts_waiting_ = true;  // the next liveness check asks again
      return;
    case ActorNodeChoice::Kind::kCannot:
      RecordDead(id, "it cannot be placed again: " + choice.message);
      return;
    case ActorNodeChoice::Kind::kPlace:
      break;
  }
  kept.restarting = true;
  tasks_.add(Commit([this, id, node = choice.node] { return actors_->Place(id, node); })
                 .then([this, id, node = choice.node, address = choice.address](Status s) {
                   if (!s.ok()) {
                     kept_[id].restarting = false;
                     restarts_waiting_ = true;
                     AIRT_LOG(WARNING) << "placing actor " << Short(id) << ": " << s.ToString();
                     return;
                   }
                   LeaseForRestart(id, node, address);
                 }));
}

void HeadServer::LeaseForRestart(const ActorId& id, const NodeId& node,
                                 const std::string& address) {
  std::optional<ActorRecord> actor = actors_->Find(id);
  if (!actor || actor->state != ActorState::kRestarting) {
    kept_[id].restarting = false;
    return;
  }
  std::optional<internal::JobRecord> job = jobs_->Find(actor->job);
  auto request = node_connector_->Connect(address).requestWorkerLeaseRequest();
  auto shape = request.initShape();
  auto resources = shape.initResources(static_cast<uint>(actor->resources.size()));
  for (size_t i = 0; i < actor->resources.size(); ++i) {
    resources[static_cast<uint>(i)].setName(actor->resources[i].name);
    resources[static_cast<uint>(i)].setAmount(actor->resources[i].amount);
  }
  shape.setAcceleratorType(actor->accelerator_type);
  request.setJobId(Bytes(actor->job.data(), JobId::kSize));
  request.setLanguage(actor->language == static_cast<uint8_t>(proto::Language::PYTHON)
                          ? proto::Language::PYTHON
                          : proto::Language::CPP);
  request.setCodeSearchPath(job ? job->code_search_path : "");
  request.setPlaced(true);
  // Detached whatever the actor is: the head's connection dropping (it restarts) must not stop
  // the worker. The head stops an actor that is not detached itself when its job finishes
  // (StopActorsOfJob).
  request.setDetached(true);
  WriteStrategy(sched::SchedulingStrategy{}, request.initStrategy());
  request.setRetriable(actor->max_restarts != 0);
  tasks_.add(request.send().then(
      [this, id, node, address](auto response) {
        auto reply = response.getReply();
        if (reply.which() != proto::LeaseReply::GRANTED) {
          RestartRefused(id, node,
                         reply.which() == proto::LeaseReply::INFEASIBLE
                             ? std::string(reply.getInfeasible().cStr())
                             : "node " + address + " spilled back a placed lease");
          return;
        }
        auto grant = reply.getGranted();
        auto worker = grant.getWorker();
        if (worker.getWorkerId().size() != WorkerId::kSize) {
          RestartRefused(id, node,
                         "node " + address + " granted a lease with a malformed worker id");
          return;
        }
        WorkerId worker_id = WorkerId::FromRaw(worker.getWorkerId().begin());
        PushCreation(id, address, grant.getLeaseId(), worker_id,
                     std::string(worker.getHost().cStr()) + ":" + std::to_string(worker.getPort()),
                     worker.getPid(), response.getHolder());
      },
      [this, id, node, address](kj::Exception&& e) {
        node_connector_->Forget(address);
        RestartRefused(id, node, "no worker lease from node " + address + ": " + Why(e));
      }));
}

void HeadServer::RestartRefused(const ActorId& id, const NodeId& node, const std::string& why) {
  KeptActor& kept = kept_[id];
  kept.restarting = false;
  kept.refused.insert(node);
  if (kept.refused.size() >= kMaxRefusals) {
    RecordDead(id, "it cannot be placed again: " + why);
    return;
  }
  AIRT_LOG(INFO) << "actor " << Short(id) << ": the node chosen for its restart refused it ("
                 << why << "); placing it elsewhere";
  RestartActor(id);
}

void HeadServer::PushCreation(const ActorId& id, const std::string& node_address,
                              uint64_t lease_id, const WorkerId& worker,
                              const std::string& worker_address, int32_t pid,
                              capnp::Capability::Client holder) {
  std::optional<ActorRecord> actor = actors_->Find(id);
  KeptActor& kept = kept_[id];
  kept.lease_node = node_address;
  kept.lease_id = lease_id;
  kept.holder = kj::mv(holder);
  if (!actor || actor->state != ActorState::kRestarting) {
    kept.restarting = false;
    ReleaseLease(kept);
    return;
  }
  const std::string& bytes = actor->creation_task;
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), words.size() * sizeof(capnp::word));
  auto push = node_connector_->ConnectAny(worker_address).castAs<proto::Worker>().pushTaskRequest();
  Status read = CatchKj([&] {
    capnp::FlatArrayMessageReader reader(words);
    push.setTask(reader.getRoot<proto::TaskSpec>());
  });
  if (!read.ok()) {
    kept.restarting = false;
    ReleaseLease(kept);
    RecordDead(id, "its kept creation task is corrupt: " + read.message());
    return;
  }
  push.getTask().setActorRestarts(actor->num_restarts);
  push.getTask().setOwnerAddress("");
  tasks_.add(push.send().then(
      [this, id, node_address, worker, worker_address, pid](auto reply) {
        KeptActor& kept = kept_[id];
        if (reply.getFailed()) {
          kept.restarting = false;
          ReleaseLease(kept);
          RecordDead(id, "its constructor failed when the head restarted it: " +
                             std::string(reply.getError().getMessage().cStr()));
          return;
        }
        std::optional<ActorRecord> actor = actors_->Find(id);
        if (!actor) return;
        ActorRecord news = *actor;
        news.state = ActorState::kAlive;
        news.worker_address = worker_address;
        news.node_address = node_address;
        news.worker_id = worker;
        news.pid = pid;
        news.creation_task.clear();
        tasks_.add(Commit([this, news] { return actors_->Update(news); }).then([this, id](Status s) {
          KeptActor& kept = kept_[id];
          kept.restarting = false;
          kept.refused.clear();
          std::optional<ActorRecord> actor = actors_->Find(id);
          if (!s.ok() || !actor || actor->state != ActorState::kAlive) {
            // Killed while it was being constructed: its worker goes.
            AIRT_LOG(WARNING) << "recording actor " << Short(id) << " ALIVE: " << s.ToString();
            ReleaseLease(kept);
            return;
          }
          AIRT_LOG(INFO) << "actor " << Short(id) << " restarted by the head at "
                         << actor->worker_address << " (restart " << actor->num_restarts << ")";
          WatchWorker(*actor);
        }));
      },
      [this, id](kj::Exception&& e) {
        // The new worker died while constructing it: one more death.
        KeptActor& kept = kept_[id];
        kept.restarting = false;
        ReleaseLease(kept);
        std::optional<ActorRecord> actor = actors_->Find(id);
        if (actor && actor->state == ActorState::kRestarting) {
          CountDeath(*actor, "its worker died while the head restarted it: " + Why(e));
        }
      }));
}

void HeadServer::ReleaseLease(KeptActor& kept) {
  if (kept.lease_id != 0 && node_connector_ != nullptr) {
    auto back = node_connector_->Connect(kept.lease_node).returnWorkerLeaseRequest();
    back.setLeaseId(kept.lease_id);
    back.setDisconnectWorker(true);
    // The holder goes once the node answered (node.capnp: requestWorkerLease's `holder`).
    tasks_.add(back.send().ignoreResult().catch_([](kj::Exception&&) {}).then(
        [holder = kj::mv(kept.holder)]() mutable { holder = nullptr; }));
  }
  kept.holder = nullptr;
  kept.lease_id = 0;
  kept.lease_node.clear();
}

void HeadServer::ActorEnded(const ActorRecord& actor) {
  if (node_connector_ == nullptr) return;
  auto found = kept_.find(actor.id);
  bool held = found != kept_.end() && found->second.lease_id != 0;
  if (found != kept_.end()) {
    found->second.watched.reset();
    found->second.watch = nullptr;
    ReleaseLease(found->second);
  }
  if (held || !actor.worker_id || actor.node_address.empty()) return;
  // A lease the head no longer holds (it restarted since it leased it), or its owner's.
  auto kill = node_connector_->Connect(actor.node_address).killWorkerRequest();
  kill.setWorkerId(Bytes(actor.worker_id->data(), WorkerId::kSize));
  tasks_.add(kill.send().ignoreResult().catch_([](kj::Exception&&) {}));
}

void HeadServer::RecordDead(const ActorId& id, const std::string& cause) {
  KeptActor& kept = kept_[id];
  ReleaseLease(kept);
  kept.watched.reset();  // its watch may be what runs this: it stays until the entry goes
  AIRT_LOG(INFO) << "actor " << Short(id) << " is DEAD: " << cause;
  tasks_.add(Commit([this, id, cause]() -> Result<internal::Change> {
               AIRT_ASSIGN_OR_RETURN(internal::Staged<ActorRecord> staged,
                                     actors_->Kill(id, cause));
               return std::move(staged.change);
             }).then([this, id](Status s) {
    if (!s.ok()) {
      restarts_waiting_ = true;
      AIRT_LOG(WARNING) << "recording actor " << Short(id) << " DEAD: " << s.ToString();
    }
  }));
}

}  // namespace airt::head
