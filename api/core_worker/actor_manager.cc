#include "api/core_worker/actor_manager.h"

#include "api/core_worker/capnp_util.h"
#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::core {
namespace {

// How often a handle holder asks the head whether a pending or restarting actor is alive yet.
constexpr auto kResolvePoll = 20 * kj::MILLISECONDS;

std::string Why(const kj::Exception& e) { return FromKjException(e).ToString(); }

}  // namespace

ActorManager::Actor& ActorManager::Entry(const ActorId& id) {
  auto& slot = actors_[id];
  if (!slot) {
    slot = std::make_unique<Actor>();
    slot->id = id;
  }
  return *slot;
}

kj::Promise<void> ActorManager::Create(kj::Own<PendingTask> creation, const ActorOptions& options) {
  ActorId id = creation->actor_id;
  auto request = head_.registerActorRequest();
  auto info = request.initInfo();
  info.setActorId(AsData(id.Binary()));
  info.setJobId(AsData(job_.Binary()));
  info.setName(options.name);
  info.setNamespace(options.ns);
  info.setClassName(creation->function);
  info.setState(proto::ActorState::PENDING);
  info.setMaxRestarts(options.max_restarts);
  info.setDetached(options.detached);
  return request.send().then([this, id, options, creation = kj::mv(creation)](auto) mutable {
    Actor& actor = Entry(id);
    actor.owned = true;
    actor.state = State::kPending;
    actor.options = options;
    actor.creation = kj::mv(creation);
    PendingTask& task = *actor.creation;
    background_.add(
        ResolveArguments(memory_, task).then([this, id](std::optional<ObjectError> failed) {
          Actor& actor = Entry(id);
          if (failed) {
            FailTask(memory_, *actor.creation, failed->kind, failed->message);
            MarkDead(actor, "its constructor's " + failed->message);
            background_.add(UpdateDirectory(actor, proto::ActorState::DEAD));
            return;
          }
          Place(actor);
        }));
  });
}

void ActorManager::Place(Actor& actor) {
  uint64_t incarnation = ++actor.incarnation;
  ActorId id = actor.id;
  LeaseRequest shape{actor.options.resources, actor.options.accelerator_type, code_search_path_,
                     actor.options.python};
  background_.add(
      RequestLease(connect_, local_node_, shape, job_)
          .then(
              [this, id, incarnation](LeaseOutcome lease) -> kj::Promise<void> {
                Actor& actor = Entry(id);
                if (actor.state == State::kDead || actor.incarnation != incarnation) {
                  if (lease.lease_id != 0) {
                    return ReturnLease(connect_, lease.node, lease.lease_id, true);
                  }
                  return kj::READY_NOW;
                }
                if (!lease.infeasible.empty()) {
                  FailTask(memory_, *actor.creation, ObjectErrorKind::kInfeasible,
                           lease.infeasible);
                  MarkDead(actor, "it cannot be placed: " + lease.infeasible);
                  return UpdateDirectory(actor, proto::ActorState::DEAD);
                }
                actor.worker = lease.worker;
                actor.node = lease.node;
                actor.worker_id = lease.worker_id;
                actor.lease_id = lease.lease_id;
                actor.pid = lease.pid;
                auto push = connect_(actor.worker).castAs<proto::Worker>().pushTaskRequest();
                FillTaskSpec(*actor.creation, job_, push.initTask());
                return push.send().then(
                    [this, id, incarnation](auto reply) { OnCreated(id, incarnation, reply); },
                    [this, id, incarnation](kj::Exception&& e) {
                      OnDied(id, incarnation, "its worker died while constructing it: " + Why(e));
                    });
              },
              [this, id, incarnation](kj::Exception&& e) -> kj::Promise<void> {
                Actor& actor = Entry(id);
                if (actor.incarnation != incarnation) return kj::READY_NOW;
                FailTask(memory_, *actor.creation, ObjectErrorKind::kUnavailable, Why(e));
                MarkDead(actor, "no worker lease for it: " + Why(e));
                return UpdateDirectory(actor, proto::ActorState::DEAD);
              }));
}

void ActorManager::OnCreated(const ActorId& id, uint64_t incarnation,
                             proto::Worker::PushTaskResults::Reader reply) {
  Actor& actor = Entry(id);
  if (actor.incarnation != incarnation || actor.state == State::kDead) return;
  RecordTaskReply(memory_, *actor.creation, reply);
  if (reply.getFailed()) {
    MarkDead(actor, "its constructor " + actor.creation->function +
                        " failed: " + std::string(reply.getError().getMessage().cStr()));
    background_.add(ReturnLease(connect_, actor.node, actor.lease_id, /*disconnect=*/true));
    background_.add(UpdateDirectory(actor, proto::ActorState::DEAD));
    return;
  }
  actor.state = State::kAlive;
  background_.add(UpdateDirectory(actor, proto::ActorState::ALIVE)
                      .catch_([this, id, incarnation](kj::Exception&& e) {
                        // Killed while it was being constructed: the directory has it DEAD.
                        Actor& actor = Entry(id);
                        if (actor.incarnation != incarnation) return;
                        MarkDead(actor, "killed while starting (" + Why(e) + ")");
                        background_.add(ReturnLease(connect_, actor.node, actor.lease_id, true));
                      }));
  Pump(actor);
}

void ActorManager::OnDied(const ActorId& id, uint64_t incarnation, const std::string& why) {
  Actor& actor = Entry(id);
  if (actor.incarnation != incarnation || actor.state == State::kDead) return;
  forget_(actor.worker);
  actor.worker.clear();
  if (!actor.owned) {
    // The owner restarts it (or not): ask the head again before the next call.
    actor.state = State::kUnknown;
    Pump(actor);
    return;
  }
  background_.add(ReturnLease(connect_, actor.node, actor.lease_id, /*disconnect=*/true)
                      .catch_([](kj::Exception&&) {}));
  actor.state = State::kRestarting;
  auto request = head_.getActorRequest();
  request.setActorId(AsData(id.Binary()));
  background_.add(request.send().then(
      [this, id, incarnation, why](auto found) -> kj::Promise<void> {
        Actor& actor = Entry(id);
        if (actor.incarnation != incarnation || actor.state == State::kDead) return kj::READY_NOW;
        auto info = found.getInfo();
        if (found.getFound() && info.getState() == proto::ActorState::DEAD) {
          MarkDead(actor, info.getDeathCause().cStr());  // killed
          return kj::READY_NOW;
        }
        int32_t max = actor.options.max_restarts;
        if (max >= 0 && actor.restarts >= static_cast<uint32_t>(max)) {
          MarkDead(actor, "its process died (" + why +
                              ") and it may not restart (max_restarts=" + std::to_string(max) +
                              ", restarted " + std::to_string(actor.restarts) + " times)");
          return UpdateDirectory(actor, proto::ActorState::DEAD);
        }
        ++actor.restarts;
        AIRT_LOG(INFO) << "actor " << id.Hex() << " died (" << why << "): restart "
                       << actor.restarts;
        return UpdateDirectory(actor, proto::ActorState::RESTARTING).then([this, id, incarnation] {
          Actor& actor = Entry(id);
          if (actor.incarnation == incarnation && actor.state == State::kRestarting) Place(actor);
        });
      },
      [this, id, incarnation](kj::Exception&& e) -> kj::Promise<void> {
        Actor& actor = Entry(id);
        if (actor.incarnation == incarnation) {
          MarkDead(actor, "its process died and the head could not be asked about it: " + Why(e));
        }
        return kj::READY_NOW;
      }));
}

void ActorManager::MarkDead(Actor& actor, const std::string& cause) {
  actor.state = State::kDead;
  actor.death_cause = cause;
  AIRT_LOG(INFO) << "actor " << actor.id.Hex() << " is dead: " << cause;
  FailQueued(actor);
}

void ActorManager::FailQueued(Actor& actor) {
  // A call whose arguments are still resolving is failed now but dropped only once they are
  // (its resolution writes into it).
  std::deque<kj::Own<PendingTask>> waiting;
  for (kj::Own<PendingTask>& call : actor.queue) {
    FailTask(memory_, *call, ObjectErrorKind::kActorDied,
             "the actor " + actor.id.Hex() + " is dead: " + actor.death_cause);
    if (!call->args_ready) waiting.push_back(kj::mv(call));
  }
  actor.queue = kj::mv(waiting);
}

void ActorManager::Submit(kj::Own<PendingTask> call) {
  ActorId id = call->actor_id;
  PendingTask& task = *call;
  Actor& actor = Entry(id);
  actor.queue.push_back(kj::mv(call));
  background_.add(ResolveArguments(memory_, task).then([this, id](std::optional<ObjectError>) {
    Pump(Entry(id));
  }));
}

void ActorManager::Pump(Actor& actor) {
  if (actor.state == State::kDead) {
    FailQueued(actor);
    return;
  }
  if (actor.queue.empty()) return;
  if (actor.state == State::kUnknown && !actor.owned) {
    if (!actor.resolving) Resolve(actor.id);
    return;
  }
  if (actor.state != State::kAlive) return;
  while (!actor.queue.empty() && actor.queue.front()->args_ready) {
    kj::Own<PendingTask> call = kj::mv(actor.queue.front());
    actor.queue.pop_front();
    PendingTask& task = *call;
    if (task.arg_error) {
      FailTask(memory_, task, task.arg_error->kind, task.arg_error->message);
      continue;
    }
    auto push = connect_(actor.worker).castAs<proto::Worker>().pushTaskRequest();
    FillTaskSpec(task, job_, push.initTask());
    ActorId id = actor.id;
    uint64_t incarnation = actor.incarnation;
    background_.add(push.send()
                        .then([this, &task](auto reply) { RecordTaskReply(memory_, task, reply); },
                              [this, &task, id, incarnation](kj::Exception&& e) {
                                std::string why = Why(e);
                                FailTask(memory_, task, ObjectErrorKind::kActorDied,
                                         "the actor " + id.Hex() + " died while running " +
                                             task.function + ": " + why);
                                OnDied(id, incarnation, why);
                              })
                        .attach(kj::mv(call)));
  }
}

void ActorManager::Resolve(const ActorId& id) {
  Entry(id).resolving = true;
  auto request = head_.getActorRequest();
  request.setActorId(AsData(id.Binary()));
  background_.add(request.send().then(
      [this, id](auto found) -> kj::Promise<void> {
        Actor& actor = Entry(id);
        actor.resolving = false;
        if (!found.getFound()) {
          MarkDead(actor, "no such actor in the head's directory");
          return kj::READY_NOW;
        }
        auto info = found.getInfo();
        switch (info.getState()) {
          case proto::ActorState::ALIVE:
            actor.worker = info.getWorkerAddress().cStr();
            actor.node = info.getNodeAddress().cStr();
            actor.worker_id = ToString(info.getWorkerId());
            ++actor.incarnation;
            actor.state = State::kAlive;
            Pump(actor);
            return kj::READY_NOW;
          case proto::ActorState::DEAD:
            MarkDead(actor, info.getDeathCause().cStr());
            return kj::READY_NOW;
          default:
            actor.resolving = true;
            return timer_.afterDelay(kResolvePoll).then([this, id] { Resolve(id); });
        }
      },
      [this, id](kj::Exception&& e) -> kj::Promise<void> {
        Actor& actor = Entry(id);
        actor.resolving = false;
        MarkDead(actor, "the head could not be asked where it is: " + Why(e));
        return kj::READY_NOW;
      }));
}

kj::Promise<ActorId> ActorManager::Lookup(const std::string& name, const std::string& ns) {
  auto request = head_.getActorRequest();
  request.setName(name);
  request.setNamespace(ns);
  return request.send().then([this, name, ns](auto found) -> ActorId {
    if (!found.getFound()) {
      throw ToKjException(NotFound("no actor named '" + name + "' in namespace '" + ns + "'"));
    }
    std::string raw = ToString(found.getInfo().getActorId());
    if (raw.size() != ActorId::kSize) {
      throw ToKjException(Internal("the head gave a malformed actor id"));
    }
    ActorId id = ActorId::FromRaw(reinterpret_cast<const uint8_t*>(raw.data()));
    Entry(id);  // unknown until the first call resolves it
    return id;
  });
}

kj::Promise<void> ActorManager::Kill(const ActorId& id, bool no_restart) {
  auto stop_worker = [this](proto::ActorInfo::Reader info) -> kj::Promise<void> {
    if (info.getWorkerId().size() == 0 || info.getNodeAddress().size() == 0) return kj::READY_NOW;
    auto kill = connect_(info.getNodeAddress().cStr()).castAs<proto::Node>().killWorkerRequest();
    kill.setWorkerId(info.getWorkerId());
    return kill.send().ignoreResult();
  };
  if (no_restart) {
    auto request = head_.killActorRequest();
    request.setActorId(AsData(id.Binary()));
    request.setCause("killed by airt::Kill (ray.kill) from job " + job_.Hex());
    return request.send().then([this, id, stop_worker](auto killed) {
      if (auto it = actors_.find(id); it != actors_.end()) {
        MarkDead(*it->second, killed.getInfo().getDeathCause().cStr());
      }
      return stop_worker(killed.getInfo());
    });
  }
  auto request = head_.getActorRequest();
  request.setActorId(AsData(id.Binary()));
  return request.send().then([id, stop_worker](auto found) -> kj::Promise<void> {
    if (!found.getFound()) throw ToKjException(NotFound("no actor " + id.Hex()));
    return stop_worker(found.getInfo());
  });
}

kj::Promise<void> ActorManager::StopOwned() {
  kj::Vector<kj::Promise<void>> stops;
  for (auto& [id, actor] : actors_) {
    if (!actor->owned || actor->options.detached || actor->state == State::kDead) continue;
    if (actor->lease_id != 0) {
      stops.add(ReturnLease(connect_, actor->node, actor->lease_id, /*disconnect=*/true)
                    .catch_([](kj::Exception&&) {}));
    }
    MarkDead(*actor, "its owner (job " + job_.Hex() + ") shut down");
  }
  return kj::joinPromises(stops.releaseAsArray());
}

kj::Promise<void> ActorManager::UpdateDirectory(const Actor& actor, proto::ActorState state) {
  auto request = head_.updateActorRequest();
  auto info = request.initInfo();
  info.setActorId(AsData(actor.id.Binary()));
  info.setJobId(AsData(job_.Binary()));
  info.setName(actor.options.name);
  info.setNamespace(actor.options.ns);
  info.setClassName(actor.creation ? actor.creation->function : "");
  info.setState(state);
  if (state == proto::ActorState::ALIVE) {
    info.setWorkerAddress(actor.worker);
    info.setNodeAddress(actor.node);
    info.setWorkerId(AsData(actor.worker_id));
    info.setPid(actor.pid);
  }
  info.setNumRestarts(actor.restarts);
  info.setMaxRestarts(actor.options.max_restarts);
  info.setDeathCause(actor.death_cause);
  info.setDetached(actor.options.detached);
  return request.send().ignoreResult();
}

}  // namespace airt::core
