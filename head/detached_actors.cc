// HeadServer's actor placement policy as a step (placeActor's and its own), and the detached
// actors whose job has finished, which the head restarts itself (head.h; docs/fault_tolerance.md
// "Detached actors").
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

void HeadServer::AdoptOrphans() {
  if (node_connector_ == nullptr) return;  // the head cannot reach workers (tests without nodes)
  orphans_waiting_ = false;
  std::erase_if(orphans_, [this](const auto& entry) {
    std::optional<ActorRecord> actor = actors_->Find(entry.first);
    return !entry.second.restarting && (!actor || actor->state == ActorState::kDead);
  });
  for (const ActorRecord& actor : actors_->List()) {
    if (!actor.detached || actor.state == ActorState::kDead) continue;
    std::optional<internal::JobRecord> job = jobs_->Find(actor.job);
    if (job && job->alive) continue;  // its owner's
    Orphan& orphan = orphans_[actor.id];
    if (orphan.restarting) continue;
    switch (actor.state) {
      case ActorState::kAlive: {
        std::optional<internal::NodeView> node =
            actor.node ? nodes_->Find(*actor.node) : std::nullopt;
        if (actor.node && (!node || !node->alive)) {
          OrphanDied(actor.id, actor.worker_id, "its node " + actor.node->Hex() + " died");
        } else if (orphan.watched != actor.worker_id || !orphan.watched) {
          WatchOrphan(actor);
        }
        break;
      }
      case ActorState::kRestarting:
        RestartOrphan(actor.id);
        break;
      case ActorState::kPending:
        // Its creator exited before the constructor ran: nobody will create it.
        OrphanDead(actor.id, "the job that created it (" + actor.job.Hex() +
                                 ") finished before its constructor ran");
        break;
      case ActorState::kDead:
        break;
    }
  }
}

void HeadServer::WatchOrphan(const ActorRecord& actor) {
  Orphan& orphan = orphans_[actor.id];
  orphan.watched = actor.worker_id;
  AIRT_LOG(INFO) << "detached actor " << Short(actor.id) << " outlived its job " << actor.job.Hex()
                 << ": the head watches its worker at " << actor.worker_address;
  orphan.watch = node_connector_->WhenGone(actor.worker_address)
                     .then([this, id = actor.id, worker = actor.worker_id] {
                       OrphanDied(id, worker, "its worker process exited");
                     })
                     .eagerlyEvaluate(nullptr);
}

void HeadServer::OrphanDied(const ActorId& id, const std::optional<WorkerId>& worker,
                            const std::string& why) {
  std::optional<ActorRecord> actor = actors_->Find(id);
  if (!actor || actor->worker_id != worker) return;  // a death already handled
  Orphan& orphan = orphans_[id];
  if (actor->state != ActorState::kAlive || orphan.restarting) return;
  orphan.watched.reset();
  orphan.holder = nullptr;
  CountOrphanDeath(*actor, why);
}

void HeadServer::CountOrphanDeath(const ActorRecord& dead, const std::string& why) {
  const ActorId id = dead.id;
  const ActorRecord* actor = &dead;
  int32_t max = actor->max_restarts;
  if (max >= 0 && actor->num_restarts >= static_cast<uint32_t>(max)) {
    OrphanDead(id, "its process died (" + why + ") after its job (" + actor->job.Hex() +
                       ") had finished, and it may not restart (max_restarts=" +
                       std::to_string(max) + ", restarted " +
                       std::to_string(actor->num_restarts) + " times)");
    return;
  }
  if (actor->creation_task.empty()) {
    OrphanDead(id, "its process died (" + why + ") after its job (" + actor->job.Hex() +
                       ") had finished, and its owner never sent the head its creation task");
    return;
  }
  ActorRecord news = *actor;
  news.state = ActorState::kRestarting;
  ++news.num_restarts;
  news.worker_address.clear();
  news.node_address.clear();
  news.worker_id.reset();
  news.pid = 0;
  news.death_cause = why;
  news.creation_task.clear();  // the stored one stays
  AIRT_LOG(INFO) << "detached actor " << Short(id) << " died (" << why << "): the head restarts it"
                 << " (restart " << news.num_restarts << ")";
  orphans_[id].restarting = true;
  tasks_.add(Commit([this, news] { return actors_->Update(news); }).then([this, id](Status s) {
    orphans_[id].restarting = false;
    if (!s.ok()) {
      // Killed meanwhile, or the store failed: the next liveness check looks again.
      orphans_waiting_ = true;
      AIRT_LOG(WARNING) << "recording detached actor " << Short(id)
                        << " RESTARTING: " << s.ToString();
      return;
    }
    RestartOrphan(id);
  }));
}

void HeadServer::RestartOrphan(const ActorId& id) {
  std::optional<ActorRecord> actor = actors_->Find(id);
  if (!actor || actor->state != ActorState::kRestarting) return;
  Orphan& orphan = orphans_[id];
  if (orphan.restarting) return;
  if (actor->creation_task.empty()) {
    OrphanDead(id, "it was restarting after its job (" + actor->job.Hex() +
                       ") had finished, and its owner never sent the head its creation task");
    return;
  }
  ActorNodeChoice choice = ChooseActorNode(*actor, orphan.refused);
  switch (choice.kind) {
    case ActorNodeChoice::Kind::kWait:
      orphans_waiting_ = true;  // the next liveness check asks again
      return;
    case ActorNodeChoice::Kind::kCannot:
      OrphanDead(id, "it cannot be placed again: " + choice.message);
      return;
    case ActorNodeChoice::Kind::kPlace:
      break;
  }
  orphan.restarting = true;
  tasks_.add(Commit([this, id, node = choice.node] { return actors_->Place(id, node); })
                 .then([this, id, node = choice.node, address = choice.address](Status s) {
                   if (!s.ok()) {
                     orphans_[id].restarting = false;
                     orphans_waiting_ = true;
                     AIRT_LOG(WARNING) << "placing detached actor " << Short(id) << ": "
                                       << s.ToString();
                     return;
                   }
                   LeaseForOrphan(id, node, address);
                 }));
}

void HeadServer::LeaseForOrphan(const ActorId& id, const NodeId& node, const std::string& address) {
  std::optional<ActorRecord> actor = actors_->Find(id);
  if (!actor || actor->state != ActorState::kRestarting) {
    orphans_[id].restarting = false;
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
  request.setDetached(true);
  WriteStrategy(sched::SchedulingStrategy{}, request.initStrategy());
  request.setRetriable(actor->max_restarts != 0);
  tasks_.add(request.send().then(
      [this, id, node, address](auto response) {
        auto reply = response.getReply();
        if (reply.which() != proto::LeaseReply::GRANTED) {
          OrphanRefused(id, node,
                        reply.which() == proto::LeaseReply::INFEASIBLE
                            ? std::string(reply.getInfeasible().cStr())
                            : "node " + address + " spilled back a placed lease");
          return;
        }
        auto grant = reply.getGranted();
        auto worker = grant.getWorker();
        if (worker.getWorkerId().size() != WorkerId::kSize) {
          OrphanRefused(id, node, "node " + address + " granted a lease with a malformed worker id");
          return;
        }
        WorkerId worker_id = WorkerId::FromRaw(worker.getWorkerId().begin());
        PushOrphanCreation(id, address, grant.getLeaseId(), worker_id,
                           std::string(worker.getHost().cStr()) + ":" +
                               std::to_string(worker.getPort()),
                           worker.getPid(), response.getHolder());
      },
      [this, id, node, address](kj::Exception&& e) {
        node_connector_->Forget(address);
        OrphanRefused(id, node, "no worker lease from node " + address + ": " + Why(e));
      }));
}

void HeadServer::OrphanRefused(const ActorId& id, const NodeId& node, const std::string& why) {
  Orphan& orphan = orphans_[id];
  orphan.restarting = false;
  orphan.refused.insert(node);
  if (orphan.refused.size() >= kMaxRefusals) {
    OrphanDead(id, "it cannot be placed again: " + why);
    return;
  }
  AIRT_LOG(INFO) << "detached actor " << Short(id) << ": the node chosen refused it (" << why
                 << "); placing it elsewhere";
  RestartOrphan(id);
}

void HeadServer::PushOrphanCreation(const ActorId& id, const std::string& node_address,
                                    uint64_t lease_id, const WorkerId& worker,
                                    const std::string& worker_address, int32_t pid,
                                    capnp::Capability::Client holder) {
  std::optional<ActorRecord> actor = actors_->Find(id);
  auto give_back = [this, node_address, lease_id] {
    auto back = node_connector_->Connect(node_address).returnWorkerLeaseRequest();
    back.setLeaseId(lease_id);
    back.setDisconnectWorker(true);
    tasks_.add(back.send().ignoreResult().catch_([](kj::Exception&&) {}));
  };
  if (!actor || actor->state != ActorState::kRestarting) {
    orphans_[id].restarting = false;
    give_back();
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
    orphans_[id].restarting = false;
    give_back();
    OrphanDead(id, "its kept creation task is corrupt: " + read.message());
    return;
  }
  push.getTask().setActorRestarts(actor->num_restarts);
  push.getTask().setOwnerAddress("");
  orphans_[id].holder = kj::mv(holder);
  tasks_.add(push.send().then(
      [this, id, node_address, worker, worker_address, pid, give_back](auto reply) {
        if (reply.getFailed()) {
          orphans_[id].restarting = false;
          give_back();
          OrphanDead(id, "its constructor failed when the head restarted it: " +
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
        tasks_.add(Commit([this, news] { return actors_->Update(news); })
                       .then([this, id, give_back](Status s) {
                         Orphan& orphan = orphans_[id];
                         orphan.restarting = false;
                         orphan.refused.clear();
                         std::optional<ActorRecord> actor = actors_->Find(id);
                         if (!s.ok() || !actor || actor->state != ActorState::kAlive) {
                           // Killed while it was being constructed: its worker goes.
                           AIRT_LOG(WARNING) << "recording detached actor " << Short(id)
                                             << " ALIVE: " << s.ToString();
                           orphan.holder = nullptr;
                           give_back();
                           return;
                         }
                         AIRT_LOG(INFO) << "detached actor " << Short(id)
                                        << " restarted by the head at " << actor->worker_address;
                         WatchOrphan(*actor);
                       }));
      },
      [this, id, give_back](kj::Exception&& e) {
        // The new worker died while constructing it: one more death.
        orphans_[id].restarting = false;
        orphans_[id].holder = nullptr;
        give_back();
        std::optional<ActorRecord> actor = actors_->Find(id);
        if (actor && actor->state == ActorState::kRestarting) {
          CountOrphanDeath(*actor, "its worker died while the head restarted it: " + Why(e));
        }
      }));
}

void HeadServer::OrphanDead(const ActorId& id, const std::string& cause) {
  Orphan& orphan = orphans_[id];
  orphan.holder = nullptr;
  orphan.watched.reset();
  AIRT_LOG(INFO) << "detached actor " << Short(id) << " is DEAD: " << cause;
  tasks_.add(Commit([this, id, cause]() -> Result<internal::Change> {
               AIRT_ASSIGN_OR_RETURN(internal::Staged<ActorRecord> staged,
                                     actors_->Kill(id, cause));
               return std::move(staged.change);
             }).then([this, id](Status s) {
    if (!s.ok()) {
      orphans_waiting_ = true;
      AIRT_LOG(WARNING) << "recording detached actor " << Short(id) << " DEAD: " << s.ToString();
    }
  }));
}

}  // namespace airt::head
