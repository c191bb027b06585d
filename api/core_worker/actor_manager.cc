// ActorManager's creation side: registration, placement by the head, the lease and the factory
// on the chosen node, deaths (the head restarts a started actor; the owner places again only one
// that died in its first constructor), kills. The call side is actor_calls.cc.
#include "api/core_worker/actor_manager.h"

#include <capnp/serialize.h>

#include "api/core_worker/capnp_util.h"
#include "common/strategy_wire.h"
#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::core_worker {
namespace {

// How often the owner asks the head again for a node while none can hold the actor yet.
constexpr auto kPlacementPoll = 100 * kj::MILLISECONDS;
// Refusals of one placement (the chosen node unreachable, or infeasible there after all) after
// which the creation fails with the last one.
constexpr size_t kMaxRefusals = 3;
// A call the head could not take (it is down, restarting) is sent again over a new connection
// this often, this many times: 30 s, longer than a head restart with Redis takes.
constexpr auto kHeadRetryDelay = 200 * kj::MILLISECONDS;
constexpr int kHeadRetries = 150;

bool HeadUnreachable(const kj::Exception& e) {
  return e.getType() == kj::Exception::Type::DISCONNECTED ||
         e.getType() == kj::Exception::Type::OVERLOADED;
}

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
  std::string class_name = creation->function;
  return Register(id, options, class_name, 0).then([this, id, options, creation = kj::mv(creation)]() mutable {
    Actor& actor = Entry(id);
    actor.owned = true;
    actor.state = State::kPending;
    actor.options = options;
    actor.max_task_retries = options.max_task_retries;
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

kj::Promise<void> ActorManager::Register(const ActorId& id, const ActorOptions& options,
                                         const std::string& class_name, int attempt) {
  auto request = head().registerActorRequest();
  auto info = request.initInfo();
  info.setActorId(AsData(id.Binary()));
  info.setJobId(AsData(job_.Binary()));
  info.setName(options.name);
  info.setNamespace(options.ns);
  info.setClassName(class_name);
  info.setState(proto::ActorState::PENDING);
  info.setMaxRestarts(options.max_restarts);
  info.setDetached(options.detached);
  info.setMaxTaskRetries(options.max_task_retries);
  SetAmounts(info.initResources(static_cast<uint>(options.resources.size())), options.resources);
  info.setAcceleratorType(options.accelerator_type);
  WriteStrategy(options.strategy, info.initStrategy());
  return request.send().ignoreResult().catch_(
      [this, id, options, class_name, attempt](kj::Exception&& e) -> kj::Promise<void> {
        if (!HeadUnreachable(e) || attempt >= kHeadRetries) return kj::mv(e);
        head_.reconnect();
        return timer_.afterDelay(kHeadRetryDelay).then([this, id, options, class_name, attempt] {
          // The head may have taken the try that failed before it went: then it knows the actor.
          auto found = head().getActorRequest();
          found.setActorId(AsData(id.Binary()));
          auto again = [this, id, options, class_name, attempt] {
            return Register(id, options, class_name, attempt + 1);
          };
          return found.send().then(
              [again](auto reply) -> kj::Promise<void> {
                if (reply.getFound()) return kj::READY_NOW;
                return again();
              },
              [again](kj::Exception&& e) -> kj::Promise<void> {
                if (!HeadUnreachable(e)) return kj::mv(e);
                return again();
              });
        });
      });
}

void ActorManager::Place(Actor& actor) {
  uint64_t incarnation = ++actor.incarnation;
  ActorId id = actor.id;
  auto request = head().placeActorRequest();
  request.setActorId(AsData(id.Binary()));
  auto avoid = request.initAvoidNodes(static_cast<uint>(actor.refused_by.size()));
  for (size_t i = 0; i < actor.refused_by.size(); ++i) avoid.set(i, AsData(actor.refused_by[i]));
  background_.add(request.send().then(
      [this, id, incarnation](auto reply) -> kj::Promise<void> {
        Actor& actor = Entry(id);
        if (!Current(actor, incarnation)) return kj::READY_NOW;
        actor.head_retries = 0;
        auto placement = reply.getPlacement();
        switch (placement.which()) {
          case proto::ActorPlacement::PLACED: {
            auto node = placement.getPlaced();
            Lease(id, incarnation, ToString(node.getNodeId()), node.getNodeAddress().cStr());
            return kj::READY_NOW;
          }
          case proto::ActorPlacement::WAITING:
            return timer_.afterDelay(kPlacementPoll).then([this, id, incarnation] {
              Actor& actor = Entry(id);
              if (Current(actor, incarnation)) Place(actor);
            });
          case proto::ActorPlacement::INFEASIBLE:
            FailCreation(actor, ErrorKind::INFEASIBLE, placement.getInfeasible().cStr());
            return kj::READY_NOW;
        }
        FailCreation(actor, ErrorKind::UNAVAILABLE, "the head answered placeActor oddly");
        return kj::READY_NOW;
      },
      [this, id, incarnation](kj::Exception&& e) -> kj::Promise<void> {
        // The head is down, or the actor was killed meanwhile (kFailedPrecondition).
        Actor& actor = Entry(id);
        if (Current(actor, incarnation) && HeadUnreachable(e) && actor.head_retries < kHeadRetries) {
          // It is restarting: ask it again over a new connection.
          ++actor.head_retries;
          head_.reconnect();
          return timer_.afterDelay(kHeadRetryDelay).then([this, id, incarnation] {
            Actor& actor = Entry(id);
            if (Current(actor, incarnation)) Place(actor);
          });
        }
        if (Current(actor, incarnation)) {
          FailCreation(actor, ErrorKind::UNAVAILABLE, "the head could not place it: " + Why(e));
        }
        return kj::READY_NOW;
      }));
}

void ActorManager::Lease(const ActorId& id, uint64_t incarnation, const std::string& node_id,
                         const std::string& node_address) {
  Actor& actor = Entry(id);
  LeaseRequest shape{actor.options.resources, actor.options.accelerator_type,
                     code_search_path_,       actor.options.python,
                     /*placed=*/true,         actor.options.detached};
  shape.retriable = actor.options.max_restarts != 0;
  background_.add(
      RequestLease(connect_, node_address, shape, job_)
          .then(
              [this, id, incarnation, node_id](LeaseOutcome lease) -> kj::Promise<void> {
                Actor& actor = Entry(id);
                if (!Current(actor, incarnation)) {
                  if (lease.lease_id != 0) {
                    return ReturnLease(connect_, lease.node, lease.lease_id, true,
                                       kj::mv(lease.holder));
                  }
                  return kj::READY_NOW;
                }
                if (!lease.infeasible.empty()) {
                  Refused(id, incarnation, node_id, ErrorKind::INFEASIBLE, lease.infeasible);
                  return kj::READY_NOW;
                }
                actor.worker = lease.worker;
                actor.node = lease.node;
                actor.worker_id = lease.worker_id;
                actor.lease_id = lease.lease_id;
                actor.holder = kj::mv(lease.holder);
                actor.pid = lease.pid;
                auto push = connect_(actor.worker).castAs<proto::Worker>().pushTaskRequest();
                auto spec = push.initTask();
                FillTaskSpec(*actor.creation, job_, spec);
                SetAmounts(spec.initResources(static_cast<uint>(actor.options.resources.size())),
                           actor.options.resources);
                spec.setActorRestarts(actor.restarts);
                return push.send().then(
                    [this, id, incarnation](auto reply) { OnCreated(id, incarnation, reply); },
                    [this, id, incarnation](kj::Exception&& e) {
                      OnDied(id, incarnation, "its worker died while constructing it: " + Why(e));
                    });
              },
              [this, id, incarnation, node_id,
               node_address](kj::Exception&& e) -> kj::Promise<void> {
                Refused(id, incarnation, node_id, ErrorKind::UNAVAILABLE,
                        "no worker lease from node " + node_address + ": " + Why(e));
                return kj::READY_NOW;
              }));
}

void ActorManager::Refused(const ActorId& id, uint64_t incarnation, const std::string& node_id,
                           ErrorKind kind, const std::string& why) {
  Actor& actor = Entry(id);
  if (!Current(actor, incarnation)) return;
  actor.refused_by.push_back(node_id);
  if (actor.refused_by.size() >= kMaxRefusals) {
    FailCreation(actor, kind, why);
    return;
  }
  AIRT_LOG(INFO) << "actor " << id.Hex() << ": the node the head chose refused it (" << why
                 << "); placing it again elsewhere";
  Place(actor);
}

void ActorManager::FailCreation(Actor& actor, ErrorKind kind, const std::string& why) {
  FailTask(memory_, *actor.creation, kind, why);
  MarkDead(actor, "it cannot be placed: " + why);
  background_.add(UpdateDirectory(actor, proto::ActorState::DEAD).catch_([](kj::Exception&&) {
    // DEAD already (killed): nothing to record.
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
    background_.add(ReturnLease(connect_, actor.node, actor.lease_id, /*disconnect=*/true,
                                kj::mv(actor.holder)));
    background_.add(UpdateDirectory(actor, proto::ActorState::DEAD));
    return;
  }
  actor.state = State::kAlive;
  actor.started = true;
  actor.refused_by.clear();
  background_.add(UpdateDirectory(actor, proto::ActorState::ALIVE)
                      .catch_([this, id, incarnation](kj::Exception&& e) {
                        Actor& actor = Entry(id);
                        if (actor.incarnation != incarnation) return;
                        if (HeadUnreachable(e)) {
                          // Still alive here; holders find it once the head is back.
                          AIRT_LOG(WARNING) << "actor " << id.Hex()
                                            << " is alive but the head never heard of it: "
                                            << Why(e);
                          return;
                        }
                        // Killed while it was being constructed: the directory has it DEAD.
                        MarkDead(actor, "killed while starting (" + Why(e) + ")");
                        background_.add(ReturnLease(connect_, actor.node, actor.lease_id, true,
                                                    kj::mv(actor.holder)));
                      }));
  Pump(actor);
}

void ActorManager::OnDied(const ActorId& id, uint64_t incarnation, const std::string& why) {
  Actor& actor = Entry(id);
  // Each call in flight reports the death; the first one handles it.
  if (!Current(actor, incarnation) || actor.died == incarnation) return;
  actor.died = incarnation;
  forget_(actor.worker);
  actor.worker.clear();
  if (actor.owned && actor.lease_id != 0) {
    background_.add(ReturnLease(connect_, actor.node, actor.lease_id, /*disconnect=*/true,
                                kj::mv(actor.holder))
                        .catch_([](kj::Exception&&) {}));
    actor.lease_id = 0;
  }
  if (!actor.owned || actor.started) {
    // The head restarts it (or records it DEAD), holding its creation task since the owner
    // recorded it ALIVE: ask the head again before the next call.
    actor.state = State::kUnknown;
    actor.dead_worker_id = actor.worker_id;
    Pump(actor);
    return;
  }
  // It died in its first constructor, before the head held its creation task: this owner places
  // it again, within max_restarts.
  actor.state = State::kRestarting;
  auto request = head().getActorRequest();
  request.setActorId(AsData(id.Binary()));
  background_.add(request.send().then(
      [this, id, incarnation, why](auto found) -> kj::Promise<void> {
        Actor& actor = Entry(id);
        if (actor.incarnation != incarnation || actor.state == State::kDead) {
          Settle(actor);
          return kj::READY_NOW;
        }
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
        AIRT_LOG(INFO) << "actor " << id.Hex() << " died in its constructor (" << why
                       << "): its owner places it again (restart " << actor.restarts << ")";
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
        Settle(actor);
        return kj::READY_NOW;
      }));
}

void ActorManager::MarkDead(Actor& actor, const std::string& cause) {
  // The caller learns it through ActorDiedError; a driver's console stays quiet, as Ray's does.
  actor.state = State::kDead;
  actor.death_cause = cause;
  AIRT_LOG(DEBUG) << "actor " << actor.id.Hex() << " is dead: " << cause;
  FailQueued(actor);
}

kj::Promise<void> ActorManager::Kill(const ActorId& id, bool no_restart) {
  auto stop_worker = [this](proto::ActorInfo::Reader info) -> kj::Promise<void> {
    if (info.getWorkerId().size() == 0 || info.getNodeAddress().size() == 0) return kj::READY_NOW;
    auto kill = connect_(info.getNodeAddress().cStr()).castAs<proto::Node>().killWorkerRequest();
    kill.setWorkerId(info.getWorkerId());
    return kill.send().ignoreResult();
  };
  if (no_restart) {
    auto request = head().killActorRequest();
    request.setActorId(AsData(id.Binary()));
    request.setCause("killed by airt::Kill (ray.kill) from job " + job_.Hex());
    return request.send().then([this, id, stop_worker](auto killed) {
      if (auto it = actors_.find(id); it != actors_.end()) {
        MarkDead(*it->second, killed.getInfo().getDeathCause().cStr());
      }
      return stop_worker(killed.getInfo());
    });
  }
  auto request = head().getActorRequest();
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
      stops.add(ReturnLease(connect_, actor->node, actor->lease_id, /*disconnect=*/true,
                            kj::mv(actor->holder))
                    .catch_([](kj::Exception&&) {}));
    }
    MarkDead(*actor, "its owner (job " + job_.Hex() + ") shut down");
  }
  return kj::joinPromises(stops.releaseAsArray());
}

kj::Promise<void> ActorManager::UpdateDirectory(const Actor& actor, proto::ActorState state) {
  return SendUpdate(actor.id, actor.incarnation, state, 0);
}

kj::Promise<void> ActorManager::SendUpdate(const ActorId& id, uint64_t incarnation,
                                           proto::ActorState state, int attempt) {
  const Actor& actor = Entry(id);
  auto request = head().updateActorRequest();
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
  info.setLanguage(actor.options.python ? static_cast<uint8_t>(proto::Language::PYTHON)
                                        : static_cast<uint8_t>(proto::Language::CPP));
  if (state == proto::ActorState::ALIVE && actor.creation) {
    // The head restarts it from this when its worker or node dies (docs/fault_tolerance.md).
    capnp::MallocMessageBuilder message;
    auto spec = message.initRoot<proto::TaskSpec>();
    FillTaskSpec(*actor.creation, job_, spec);
    SetAmounts(spec.initResources(static_cast<uint>(actor.options.resources.size())),
               actor.options.resources);
    spec.setOwnerAddress("");  // the head pushes it and drops what it returns
    kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
    kj::ArrayPtr<const kj::byte> bytes = words.asBytes();
    info.setCreationTask(capnp::Data::Reader(bytes.begin(), bytes.size()));
  }
  return request.send().ignoreResult().catch_(
      [this, id, incarnation, state, attempt](kj::Exception&& e) -> kj::Promise<void> {
        if (!HeadUnreachable(e) || attempt >= kHeadRetries) return kj::mv(e);
        if (attempt == 0) {
          AIRT_LOG(INFO) << "actor " << id.Hex() << ": the head cannot be reached (" << Why(e)
                         << "); its directory entry is written once the head is back";
        }
        head_.reconnect();
        return timer_.afterDelay(kHeadRetryDelay).then([this, id, incarnation, state, attempt] {
          // A later placement writes its own state: this one is stale.
          if (Entry(id).incarnation != incarnation) return kj::Promise<void>(kj::READY_NOW);
          return SendUpdate(id, incarnation, state, attempt + 1);
        });
      });
}

}  // namespace airt::core_worker
