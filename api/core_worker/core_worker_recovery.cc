// Node death and lineage reconstruction (docs/fault_tolerance.md): the owner learns that a node
// died from the head (asked when a worker there died or a copy there could not be read), drops
// the copies the node held from its location table, and re-runs the tasks that made the objects
// it owns that lay there, arguments first. The rest of the core worker is in core_worker.cc and
// core_worker_objects.cc.
#include <algorithm>
#include <cstdlib>

#include "api/core_worker/capnp_util.h"
#include "api/core_worker/core_worker_impl.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::core_worker {
namespace {

// A watch's retry after a failed call, and how often it polls a head without the change feed.
constexpr auto kWatchInterval = 100 * kj::MILLISECONDS;
// The longest a watch's waitClusterChange asks the head to hold, and the time beyond that after
// which an unanswered call counts as a lost connection.
constexpr int64_t kMaxWatchWaitMs = 10'000;
constexpr auto kWatchCallTimeout = 5 * kj::SECONDS;

// Whether `nodes` (a view or a change) lists the node whose Node service is at `node` dead.
bool ShowsDead(capnp::List<proto::NodeStatus>::Reader nodes, const std::string& node) {
  for (auto n : nodes) {
    auto info = n.getInfo();
    if (std::string(info.getAddress().cStr()) + ":" + std::to_string(info.getNodePort()) == node) {
      return !n.getAlive();
    }
  }
  return false;
}

std::string TaskName(const LineageTask& task) {
  return task.options.name.empty() ? task.function : task.options.name;
}

}  // namespace

uint64_t DefaultMaxLineageBytes() {
  constexpr uint64_t kDefault = 1ull << 30;
  const char* env = std::getenv("AIRT_MAX_LINEAGE_BYTES");
  if (env == nullptr || *env == '\0') return kDefault;
  Result<uint64_t> bytes = ParseByteSize(env);
  if (!bytes.ok()) {
    AIRT_LOG(WARNING) << "AIRT_MAX_LINEAGE_BYTES=" << env
                      << " ignored: " << bytes.status().ToString();
    return kDefault;
  }
  return *bytes;
}

kj::Promise<bool> CoreWorker::Impl::WatchNode(const std::string& node) {
  if (node.empty() || node == node_address_ || stopping_) return false;
  if (dead_nodes_.count(node) > 0) return true;
  auto it = node_watches_.find(node);
  if (it == node_watches_.end()) {
    kj::TimePoint deadline =
        loop_->io.provider->getTimer().now() + options_.node_death_wait_ms * kj::MILLISECONDS;
    kj::Promise<bool> asked = AskHeadUntilDead(node, deadline, 0, 0).then([this, node](bool dead) {
      // The next question about this node starts a new watch (the entry goes after this turn).
      loop_->tasks.add(kj::evalLater([this, node] { node_watches_.erase(node); }));
      return dead;
    });
    it = node_watches_.emplace(node, asked.fork()).first;
  }
  return it->second.addBranch();
}

kj::Promise<bool> CoreWorker::Impl::AskHeadUntilDead(const std::string& node,
                                                     kj::TimePoint deadline, uint64_t epoch,
                                                     uint64_t since) {
  kj::Timer& timer = loop_->io.provider->getTimer();
  if (stopping_ || timer.now() >= deadline) return false;
  int64_t left_ms = (deadline - timer.now()) / kj::MILLISECONDS;
  auto request = Head().waitClusterChangeRequest();
  request.setEpoch(epoch);
  request.setSinceVersion(since);
  request.setMembershipOnly(true);
  request.setMaxWaitMs(static_cast<uint32_t>(std::clamp<int64_t>(left_ms, 1, kMaxWatchWaitMs)));
  // The head answers by maxWaitMs (within its liveness tick); later, the connection is lost.
  kj::Duration limit = std::min<int64_t>(left_ms, kMaxWatchWaitMs) * kj::MILLISECONDS +
                       kWatchCallTimeout;
  return timer.timeoutAfter(limit, request.send())
      .then(
          [this, node, deadline](auto reply) -> kj::Promise<bool> {
            auto change = reply.getChange();
            if (ShowsDead(change.getNodes(), node)) {
              NodeDied(node);
              return true;
            }
            return AskHeadUntilDead(node, deadline, change.getEpoch(), change.getVersion());
          },
          [this, node, deadline, epoch, since](kj::Exception&& e) -> kj::Promise<bool> {
            if (e.getType() == kj::Exception::Type::UNIMPLEMENTED) {
              return PollHeadUntilDead(node, deadline);  // a head without the change feed
            }
            if (e.getType() == kj::Exception::Type::DISCONNECTED ||
                e.getType() == kj::Exception::Type::OVERLOADED) {
              ReconnectHead();  // it restarted, or the connection was lost
            }
            return loop_->io.provider->getTimer()
                .afterDelay(kWatchInterval)
                .then([this, node, deadline, epoch, since] {
                  // The same version: a restarted head (another epoch) answers with its full view.
                  return AskHeadUntilDead(node, deadline, epoch, since);
                });
          });
}

kj::Promise<void> CoreWorker::Impl::WatchDrains(uint64_t epoch, uint64_t since) {
  if (stopping_) return kj::READY_NOW;
  auto request = Head().waitClusterChangeRequest();
  request.setEpoch(epoch);
  request.setSinceVersion(since);
  request.setMembershipOnly(true);  // a node starting to drain is a membership change
  request.setMaxWaitMs(static_cast<uint32_t>(kMaxWatchWaitMs));
  kj::Timer& timer = loop_->io.provider->getTimer();
  return timer.timeoutAfter(kMaxWatchWaitMs * kj::MILLISECONDS + kWatchCallTimeout, request.send())
      .then(
          [this](auto reply) -> kj::Promise<void> {
            auto change = reply.getChange();
            for (auto n : change.getNodes()) {
              if (!n.getAlive() || !n.getDraining()) continue;
              auto info = n.getInfo();
              loop_->dispatcher->NodeDraining(std::string(info.getAddress().cStr()) + ":" +
                                              std::to_string(info.getNodePort()));
            }
            return WatchDrains(change.getEpoch(), change.getVersion());
          },
          [this, epoch, since](kj::Exception&& e) -> kj::Promise<void> {
            if (e.getType() == kj::Exception::Type::UNIMPLEMENTED) {
              AIRT_LOG(INFO) << "the head has no cluster change feed: leases on draining nodes "
                                "go on taking tasks until they go back idle";
              return kj::READY_NOW;
            }
            if (e.getType() == kj::Exception::Type::DISCONNECTED ||
                e.getType() == kj::Exception::Type::OVERLOADED) {
              ReconnectHead();
            }
            return loop_->io.provider->getTimer().afterDelay(kWatchInterval).then(
                [this, epoch, since] { return WatchDrains(epoch, since); });
          });
}

kj::Promise<bool> CoreWorker::Impl::PollHeadUntilDead(const std::string& node,
                                                      kj::TimePoint deadline) {
  auto again = [this, node, deadline]() -> kj::Promise<bool> {
    kj::Timer& timer = loop_->io.provider->getTimer();
    if (stopping_ || timer.now() >= deadline) return false;
    return timer.afterDelay(kWatchInterval).then([this, node, deadline] {
      return PollHeadUntilDead(node, deadline);
    });
  };
  return Head().clusterViewRequest().send().then(
      [this, node, again](auto view) -> kj::Promise<bool> {
        if (!ShowsDead(view.getNodes(), node)) return again();
        NodeDied(node);
        return true;
      },
      [again](kj::Exception&&) { return again(); });
}

void CoreWorker::Impl::ReconnectHead() {
  if (options_.head_address.empty()) return;
  Forget(options_.head_address);
}

proto::Head::Client CoreWorker::Impl::Head() {
  if (options_.head_address.empty()) return loop_->no_head;
  return Connect(options_.head_address).castAs<proto::Head>();
}

void CoreWorker::Impl::NodeDied(const std::string& node) {
  if (!dead_nodes_.insert(node).second) return;
  DropCopiesAt(node);
  std::vector<ObjectId> there = memory_.LocatedAt(node);
  // Copies elsewhere become primaries first: a re-run started for one return of a task must not
  // drop another return that still has a copy.
  size_t promoted = 0;
  for (const ObjectId& id : there) {
    if (borrowed_.count(id) == 0 && Promote(id, node)) ++promoted;
  }
  AIRT_LOG(INFO) << "node " << node << " died; " << there.size()
                 << " objects of this process lay there, " << promoted
                 << " read on from copies on other nodes (the others rebuilt from lineage where "
                    "they can be)";
  for (const ObjectId& id : there) {
    if (borrowed_.count(id) > 0) continue;  // its owner rebuilds it (and answers again)
    Recover(id, node);
  }
}

void CoreWorker::Impl::SetError(const ObjectId& id, ObjectError error) {
  memory_.Erase(id);
  memory_.Put(id, ObjectEntry{nullptr, std::nullopt, std::move(error)});
}

void CoreWorker::Impl::Recover(const ObjectId& id, const std::string& node,
                               const std::string& gone) {
  std::optional<ObjectEntry> entry = memory_.Peek(id);
  if (!entry || !entry->location || entry->location->node_address != node) return;
  if (Promote(id, node)) return;
  if (id.IsPut()) {
    return SetError(id, ObjectError{ErrorKind::OBJECT_LOST, "",
                                    "object " + id.Hex() + " is lost: it was put by this process " +
                                        "and its last copy was on node " + node + ", " + gone +
                                        ". A put object has no lineage to rebuild it " +
                                        "from; put the value again.",
                                    ""});
  }
  TaskId task_id = id.Task();
  // A copy gone from a live node (a promoted copy it dropped) is not among the returns on dead
  // nodes that a re-run replaces: its entry waits for the re-run here.
  bool on_live_node = dead_nodes_.count(node) == 0;
  if (rebuilding_.count(task_id) > 0) {
    if (on_live_node) memory_.Erase(id);
    return;
  }
  LineageTask* task = lineage_.Find(task_id);
  if (task == nullptr) {
    bool evicted = lineage_.Evicted(task_id);
    std::string why =
        evicted
            ? "its task's lineage was released to keep this process under its lineage cap "
              "(max_lineage_bytes " +
                  std::to_string(lineage_.Stats().max_bytes) + "; AIRT_MAX_LINEAGE_BYTES raises it)"
        : task_id.Actor() == ActorId::NilFor(task_id.Job())
            ? "its task's lineage is not kept (a streaming generator's item, or a task whose "
              "returns were all inline)"
            : "it was made by an actor task, whose returns airt does not rebuild";
    return SetError(
        id, ObjectError{evicted ? ErrorKind::OBJECT_RECONSTRUCTION_FAILED_LINEAGE_EVICTED
                                : ErrorKind::OBJECT_RECONSTRUCTION_FAILED,
                        "",
                        "object " + id.Hex() + " is lost (its last copy was on node " + node +
                            ", " + gone + ") and cannot be rebuilt: " + why + ".",
                        ""});
  }
  if (task->retries_left == 0) {
    ObjectError error{ErrorKind::OBJECT_RECONSTRUCTION_FAILED_MAX_ATTEMPTS_EXCEEDED, task->function,
                      "object " + id.Hex() + " is lost (its last copy was on node " + node +
                          ", " + gone + ") and its task " + task_id.Hex() + " (" + TaskName(*task) +
                          ") may not run again: it was retried as often as its max_retries (" +
                          std::to_string(task->options.max_retries) + ") allows.",
                      ""};
    for (const ObjectId& r : task->returns) {
      std::optional<ObjectEntry> e = memory_.Peek(r);
      if (e && e->location && dead_nodes_.count(e->location->node_address) > 0) {
        SetError(r, error);
      }
    }
    SetError(id, error);
    return;
  }
  if (on_live_node) memory_.Erase(id);
  Resubmit(*task);
}

void CoreWorker::Impl::Resubmit(LineageTask& lineage) {
  TaskId task_id = lineage.id;
  rebuilding_.insert(task_id);
  if (lineage.retries_left > 0) --lineage.retries_left;
  ++tasks_rebuilt_;
  AIRT_LOG(DEBUG) << "re-running task " << task_id.Hex() << " (" << TaskName(lineage)
                  << ") to rebuild its lost returns (" << tasks_rebuilt_ << " re-runs so far)";
  // Its lost returns wait for the re-run (a Get of one blocks until it answers).
  for (const ObjectId& r : lineage.returns) {
    std::optional<ObjectEntry> e = memory_.Peek(r);
    if (e && e->location && dead_nodes_.count(e->location->node_address) > 0) memory_.Erase(r);
  }
  for (const TaskArgument& arg : lineage.args) {
    if (arg.ref) EnsureArgument(*arg.ref);
    for (const ObjectId& element : arg.ref_list) EnsureArgument(element);
  }
  auto task = kj::heap<PendingTask>();
  task->kind = proto::TaskKind::NORMAL;
  task->id = task_id;
  task->function = lineage.function;
  task->args = lineage.args;
  task->resolved.resize(task->args.size());
  task->options = lineage.options;
  task->options.max_retries = lineage.retries_left;  // what is left covers its worker's deaths
  task->returns = lineage.returns;
  HoldArguments(*task);
  // Its returns are held while it runs: one nobody references any more is freed once it
  // answers (the same way as any object whose last reference went).
  for (const ObjectId& r : task->returns) refs_.AddSubmitted(r);
  PendingTask* raw = task.get();
  live_tasks_[task_id] = raw;
  loop_->tasks.add(Run(raw)
                       .then([this, raw] {
                         if (LineageTask* kept = lineage_.Find(raw->id)) {
                           if (kept->retries_left > 0) {
                             kept->retries_left = std::max<int32_t>(
                                 0, kept->retries_left - static_cast<int32_t>(raw->attempts));
                           }
                         }
                       })
                       .attach(kj::mv(task), kj::defer([this, task_id, returns = lineage.returns] {
                                 live_tasks_.erase(task_id);
                                 rebuilding_.erase(task_id);
                                 for (const ObjectId& r : returns) refs_.RemoveSubmitted(r);
                               })));
}

void CoreWorker::Impl::EnsureArgument(const ObjectId& id) {
  if (std::optional<ObjectEntry> entry = memory_.Peek(id)) {
    if (entry->location && dead_nodes_.count(entry->location->node_address) > 0 &&
        borrowed_.count(id) == 0) {
      Recover(id, entry->location->node_address);
    }
    return;
  }
  if (borrowed_.count(id) > 0) return;           // its owner answers where it is
  if (live_tasks_.count(id.Task()) > 0) return;  // its task runs (or runs again): it answers
  // Freed since (nothing referenced it but the lineage): made again, or why it cannot be.
  LineageTask* task = id.IsPut() ? nullptr : lineage_.Find(id.Task());
  if (task != nullptr && task->retries_left != 0) return Resubmit(*task);
  ErrorKind kind = ErrorKind::OBJECT_RECONSTRUCTION_FAILED;
  std::string why = "it is not this process's object to rebuild (a borrowed or put argument)";
  if (task != nullptr) {
    kind = ErrorKind::OBJECT_RECONSTRUCTION_FAILED_MAX_ATTEMPTS_EXCEEDED;
    why = "its task was retried as often as its max_retries allows";
  } else if (!id.IsPut() && lineage_.Evicted(id.Task())) {
    kind = ErrorKind::OBJECT_RECONSTRUCTION_FAILED_LINEAGE_EVICTED;
    why = "its task's lineage was released to keep under the lineage cap (max_lineage_bytes)";
  }
  memory_.Put(id, ObjectEntry{nullptr, std::nullopt,
                              ObjectError{kind, "",
                                          "argument " + id.Hex() +
                                              " of a task being re-run is gone and cannot be "
                                              "rebuilt: " +
                                              why + ".",
                                          ""}});
}

void CoreWorker::Impl::KeepLineage(const PendingTask& task) {
  if (task.kind != proto::TaskKind::NORMAL || task.stream || task.cancelled) return;
  bool stored = false;
  std::vector<ObjectId> live;
  for (const ObjectId& r : task.returns) {
    std::optional<ObjectEntry> e = memory_.Peek(r);
    if (e && e->location) stored = true;
    if (refs_.Has(r)) live.push_back(r);
  }
  if (!stored) return;  // inline values and errors live in this process: nothing to rebuild
  LineageTask kept;
  kept.id = task.id;
  kept.function = task.function;
  kept.args = task.args;
  kept.options = task.options;
  kept.returns = task.returns;
  int32_t max = task.options.max_retries;
  kept.retries_left =
      max < 0 ? -1 : std::max<int32_t>(0, max - static_cast<int32_t>(task.attempts));
  lineage_.Add(std::move(kept), live);
}

kj::Promise<void> CoreWorker::Impl::AfterDispatch(PendingTask* task) {
  if (!task->lost_argument) return kj::READY_NOW;
  ObjectError error = std::move(*task->lost_argument);
  task->lost_argument.reset();
  // The owned arguments that lay on another node: did one of those nodes die?
  std::vector<std::string> nodes;
  auto consider = [&](const ObjectId& id, const ObjectEntry& entry) {
    if (entry.location && borrowed_.count(id) == 0 &&
        entry.location->node_address != node_address_) {
      nodes.push_back(entry.location->node_address);
    }
  };
  for (size_t i = 0; i < task->args.size(); ++i) {
    if (task->args[i].ref) consider(*task->args[i].ref, task->resolved[i]);
    for (size_t j = 0; j < task->args[i].ref_list.size() && i < task->resolved_lists.size(); ++j) {
      consider(task->args[i].ref_list[j], task->resolved_lists[i][j]);
    }
  }
  constexpr uint32_t kMaxArgumentRebuilds = 3;
  if (nodes.empty() || task->argument_rebuilds >= kMaxArgumentRebuilds) {
    FailTask(memory_, *task, error.kind, error.message);
    return kj::READY_NOW;
  }
  auto watches = kj::heapArrayBuilder<kj::Promise<bool>>(nodes.size());
  for (const std::string& node : nodes) watches.add(WatchNode(node));
  return kj::joinPromises(watches.finish())
      .then([this, task, error = kj::mv(error)](kj::Array<bool> dead) mutable -> kj::Promise<void> {
        bool any = false;
        for (bool d : dead) any = any || d;
        if (!any || task->cancelled) {
          if (!task->cancelled) FailTask(memory_, *task, error.kind, error.message);
          return kj::READY_NOW;
        }
        ++task->argument_rebuilds;
        task->args_ready = false;
        return Run(task);  // Run rebuilds the arguments that lay on the dead node first
      });
}

Result<std::optional<ObjectEntry>> CoreWorker::Impl::Rebuilt(const ObjectId& id,
                                                             const ObjectLocation& where,
                                                             int64_t timeout_ms) {
  std::optional<ObjectEntry> rebuilt;
  bool timed_out = false;
  Blocked blocked(*this);
  // `wait`, or timed_out once timeout_ms passed (< 0: no limit).
  auto with_timeout = [&](kj::Promise<void> wait) -> kj::Promise<void> {
    if (timeout_ms < 0) return wait;
    return loop_->io.provider->getTimer()
        .timeoutAfter(timeout_ms * kj::MILLISECONDS, kj::mv(wait))
        .catch_([&timed_out](kj::Exception&& e) {
          if (e.getType() != kj::Exception::Type::OVERLOADED) kj::throwFatalException(kj::mv(e));
          timed_out = true;
        });
  };
  Status waited = CatchKj([&] {
    OnLoop([&]() -> kj::Promise<void> {
      if (auto b = borrowed_.find(id); b != borrowed_.end()) {
        // A borrower: the owner may know a newer copy (the node left and handed it on, or the
        // owner rebuilt it). Ask it again; the same location again is no news.
        std::optional<ObjectEntry> now = memory_.Peek(id);
        if (!now || !now->location || now->location->transfer_address != where.transfer_address) {
          rebuilt = now;
          return kj::READY_NOW;
        }
        memory_.Erase(id);
        b->second.asked = false;
        AskOwner(id);
        return with_timeout(memory_.WhenReady(id).then([&rebuilt, where](ObjectEntry e) {
          if (!e.location || e.location->transfer_address != where.transfer_address) rebuilt = e;
        }));
      }
      kj::Promise<void> wait =
          WatchNode(where.node_address)
              .then([this, id, where, &rebuilt](bool dead) -> kj::Promise<void> {
                if (!dead) return kj::READY_NOW;
                Recover(id, where.node_address);  // nothing when it is rebuilt or being rebuilt
                return memory_.WhenReady(id).then(
                    [&rebuilt](ObjectEntry entry) { rebuilt = entry; });
              });
      return with_timeout(kj::mv(wait));
    });
  });
  if (timed_out) {
    return DeadlineExceeded("object " + id.Hex() + " was not rebuilt within " +
                            std::to_string(timeout_ms) + " ms (its node " + where.node_address +
                            " died)");
  }
  if (!waited.ok()) return waited;
  return rebuilt;
}

}  // namespace airt::core_worker
