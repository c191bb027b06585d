// ActorManager's call side: method calls queued, sent in order, resent after a restart
// (max_task_retries) or failed; and a handle holder finding where the actor lives. The creation,
// placement and death side is actor_manager.cc.
#include "api/core_worker/actor_manager.h"
#include "api/core_worker/capnp_util.h"
#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::core_worker {
namespace {

// How often a handle holder asks the head whether a pending or restarting actor is alive yet.
constexpr auto kResolvePoll = 20 * kj::MILLISECONDS;
// How long a holder (the owner too) waits for the directory to stop showing a worker that died
// (the head notices the death when its connection to the worker ends) before it takes the actor
// for dead.
constexpr int kMaxStalePolls = 30'000 / 20;
// How long a sent call that failed and will not be sent again waits to learn whether the actor's
// death is final before it fails with kActorUnavailable (Ray's
// timeout_ms_task_wait_for_death_info).
constexpr auto kDeathInfoGrace = 1000 * kj::MILLISECONDS;

// What a call that was sent and will not be sent again says: `why` it failed, how often it was.
std::string FailedCall(const std::string& function, const std::string& why, uint32_t attempts,
                       int32_t max_task_retries) {
  std::string text = function + " failed: " + why;
  if (attempts > 0) text += " (sent again " + std::to_string(attempts) + " times)";
  return text + "; max_task_retries=" + std::to_string(max_task_retries) +
         " lets it be sent no more";
}

std::string Why(const kj::Exception& e) { return FromKjException(e).ToString(); }

}  // namespace

void ActorManager::FailQueued(Actor& actor) {
  // A call whose arguments are still resolving is failed now but dropped only once they are
  // (its resolution writes into it).
  std::deque<kj::Own<PendingTask>> waiting;
  for (kj::Own<PendingTask>& call : actor.queue) {
    FailTask(memory_, *call, ErrorKind::ACTOR_DIED,
             "the actor " + actor.id.Hex() + " is dead: " + actor.death_cause);
    if (!call->args_ready) waiting.push_back(kj::mv(call));
  }
  actor.queue = kj::mv(waiting);
  Settle(actor);
}

void ActorManager::Settle(Actor& actor, bool restarting) {
  if (actor.unsettled.empty()) return;
  // Known: DEAD for good; or restarting (the owner decided; a holder was told), or back.
  bool dead = actor.state == State::kDead;
  bool back = !dead && (restarting || actor.state != State::kUnknown);
  kj::TimePoint now = timer_.now();
  std::vector<Actor::Unsettled> waiting;
  for (Actor::Unsettled& entry : actor.unsettled) {
    std::string call =
        FailedCall(entry.call->function, entry.why, entry.call->attempts, actor.max_task_retries);
    if (dead) {
      FailTask(memory_, *entry.call, ErrorKind::ACTOR_DIED,
               "the actor " + actor.id.Hex() + " died and will not come back (" +
                   actor.death_cause + "): " + call);
    } else if (back || entry.until <= now) {
      std::string state =
          back ? "it is restarting" : "no word of its death came: its connection may be broken";
      FailTask(memory_, *entry.call, ErrorKind::ACTOR_UNAVAILABLE,
               "the actor " + actor.id.Hex() + " is unavailable for now (" + state + "): " + call +
                   ". Later calls may succeed; retry it, or set max_task_retries");
    } else {
      waiting.push_back(kj::mv(entry));
    }
  }
  actor.unsettled = kj::mv(waiting);
}

void ActorManager::Submit(kj::Own<PendingTask> call) {
  ActorId id = call->actor_id;
  PendingTask& task = *call;
  Actor& actor = Entry(id);
  task.actor_seq = actor.next_seq++;
  actor.queue.push_back(kj::mv(call));
  background_.add(ResolveArguments(memory_, task).then([this, id](std::optional<ObjectError>) {
    Actor& actor = Entry(id);
    // A call cancelled while its arguments resolved is done with now.
    std::erase_if(actor.dropped, [](const kj::Own<PendingTask>& call) { return call->args_ready; });
    Pump(actor);
  }));
}

void ActorManager::Cancel(const TaskId& task, bool recursive) {
  auto found = actors_.find(task.Actor());
  if (found == actors_.end()) return;
  Actor& actor = *found->second;
  // A dead actor's calls have failed already (or will, once their arguments resolve).
  if (actor.state == State::kDead) return;
  for (auto queued = actor.queue.begin(); queued != actor.queue.end(); ++queued) {
    if ((*queued)->id != task) continue;
    kj::Own<PendingTask> call = kj::mv(*queued);
    actor.queue.erase(queued);
    MarkCancelled(memory_, *call);
    if (!call->args_ready) actor.dropped.push_back(kj::mv(call));
    Pump(actor);  // the calls behind it may go now
    return;
  }
  for (auto& [seq, call] : actor.in_flight) {
    if (call->id != task) continue;
    if (!MarkCancelled(memory_, *call) || actor.worker.empty()) return;
    // Not force: the actor stays. The worker drops the call if it has not started it, or
    // interrupts it where it can (a Python method); else it runs on and its answer is dropped.
    auto ask = connect_(actor.worker).castAs<proto::Worker>().cancelTaskRequest();
    ask.setTaskId(AsData(task.Binary()));
    ask.setForce(false);
    ask.setRecursive(recursive);
    std::string worker = actor.worker;
    background_.add(ask.send().ignoreResult().catch_([worker](kj::Exception&& e) {
      // The actor's process died: the call's returns say cancelled already.
      AIRT_LOG(DEBUG) << "cancelTask at actor worker " << worker << ": " << Why(e);
    }));
    return;
  }
}

void ActorManager::Pump(Actor& actor) {
  if (actor.state == State::kDead) {
    FailQueued(actor);
    return;
  }
  if (actor.queue.empty() && actor.unsettled.empty()) return;
  if (actor.state == State::kUnknown) {
    if (!actor.resolving) Resolve(actor.id);
    return;
  }
  if (actor.state != State::kAlive) return;
  while (!actor.queue.empty() && actor.queue.front()->args_ready) {
    kj::Own<PendingTask> call = kj::mv(actor.queue.front());
    actor.queue.pop_front();
    if (call->arg_error) {
      FailTask(memory_, *call, call->arg_error->kind, call->arg_error->message,
               call->arg_error->data);
      continue;
    }
    Send(actor, kj::mv(call));
  }
}

void ActorManager::Send(Actor& actor, kj::Own<PendingTask> call) {
  auto push = connect_(actor.worker).castAs<proto::Worker>().pushTaskRequest();
  FillTaskSpec(*call, job_, push.initTask());
  ActorId id = actor.id;
  uint64_t seq = call->actor_seq;
  uint64_t incarnation = actor.incarnation;
  actor.in_flight.emplace(seq, kj::mv(call));
  background_.add(push.send().then(
      [this, id, seq](auto reply) {
        ReportCopies(on_copies_, reply);
        Actor& actor = Entry(id);
        auto sent = actor.in_flight.find(seq);
        if (sent == actor.in_flight.end()) return;
        if (sent->second->cancelled) {
          // Its returns hold the cancellation already; what it made is dropped.
          DropTaskReply(connect_, background_, reply);
        } else {
          RecordTaskReply(memory_, *sent->second, reply);
        }
        actor.in_flight.erase(sent);
      },
      [this, id, seq, incarnation](kj::Exception&& e) {
        OnCallFailed(id, seq, incarnation, Why(e));
      }));
}

void ActorManager::OnCallFailed(const ActorId& id, uint64_t seq, uint64_t incarnation,
                                const std::string& why) {
  Actor& actor = Entry(id);
  auto sent = actor.in_flight.find(seq);
  if (sent == actor.in_flight.end()) return;
  kj::Own<PendingTask> call = kj::mv(sent->second);
  actor.in_flight.erase(sent);
  int32_t max = actor.max_task_retries;
  if (call->cancelled) {
    // Its returns say cancelled: never sent again, whatever max_task_retries allows.
  } else if (actor.state != State::kDead &&
             (max < 0 || call->attempts < static_cast<uint32_t>(max))) {
    ++call->attempts;
    AIRT_LOG(INFO) << "actor " << id.Hex() << " died while running " << call->function
                   << "; sending it again once the actor is back (resend " << call->attempts
                   << ", max_task_retries=" << max << ")";
    // Before the calls not sent yet, after the earlier ones resent: submission order holds.
    auto at = actor.queue.begin();
    while (at != actor.queue.end() && (*at)->actor_seq < seq) ++at;
    actor.queue.insert(at, kj::mv(call));
  } else if (actor.state == State::kDead) {
    FailTask(memory_, *call, ErrorKind::ACTOR_DIED,
             "the actor " + id.Hex() + " is dead (" + actor.death_cause +
                 "): " + FailedCall(call->function, why, call->attempts, max));
  } else {
    // Failed once the actor's fate is known (Settle), or the grace period ends.
    actor.unsettled.push_back({kj::mv(call), why, timer_.now() + kDeathInfoGrace});
    background_.add(timer_.afterDelay(kDeathInfoGrace).then([this, id] { Settle(Entry(id)); }));
  }
  OnDied(id, incarnation, why);
  // A late report of an earlier incarnation's death: the resent call goes to the current one.
  Settle(Entry(id));
  Pump(Entry(id));
}

void ActorManager::Resolve(const ActorId& id) {
  Entry(id).resolving = true;
  auto request = head().getActorRequest();
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
          case proto::ActorState::ALIVE: {
            std::string worker_id = ToString(info.getWorkerId());
            if (!actor.dead_worker_id.empty() && worker_id == actor.dead_worker_id) {
              return OnStaleDirectory(id, found.getJobAlive());
            }
            actor.worker = info.getWorkerAddress().cStr();
            actor.node = info.getNodeAddress().cStr();
            actor.worker_id = worker_id;
            actor.max_task_retries = info.getMaxTaskRetries();
            actor.dead_worker_id.clear();
            actor.stale_polls = 0;
            ++actor.incarnation;
            actor.state = State::kAlive;
            Settle(actor);
            Pump(actor);
            return kj::READY_NOW;
          }
          case proto::ActorState::DEAD:
            MarkDead(actor, info.getDeathCause().cStr());
            return kj::READY_NOW;
          default:
            Settle(actor, /*restarting=*/true);
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

kj::Promise<void> ActorManager::OnStaleDirectory(const ActorId& id, bool job_alive) {
  Actor& actor = Entry(id);
  if (++actor.stale_polls <= kMaxStalePolls) {
    actor.resolving = true;
    return timer_.afterDelay(kResolvePoll).then([this, id] { Resolve(id); });
  }
  // The head may still restart it; this holder's calls fail meanwhile, and the directory is the
  // head's to change.
  MarkDead(actor, std::string("its process died and the head has not restarted it within 30 s") +
                      (job_alive ? "" : " (its job " + id.Job().Hex() + " has finished)"));
  return kj::READY_NOW;
}

kj::Promise<ActorId> ActorManager::Lookup(const std::string& name, const std::string& ns) {
  auto request = head().getActorRequest();
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

}  // namespace airt::core_worker
