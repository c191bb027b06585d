#include "api/core_worker/task_dispatcher.h"

#include <algorithm>

#include "api/core_worker/capnp_util.h"
#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::core_worker {
namespace {

constexpr auto kIdleReturn = 10 * kj::MILLISECONDS;
// How long a force-cancel waits for the worker to cancel its children before killing it.
constexpr auto kCancelChildrenGrace = 1 * kj::SECONDS;
// A lease spilled back to a node that cannot be reached (it died; the local node's view lags the
// head's) is asked for again after kSpillbackRetryDelay, for at most kSpillbackRetryWindow.
constexpr auto kSpillbackRetryDelay = 200 * kj::MILLISECONDS;
constexpr auto kSpillbackRetryWindow = 60 * kj::SECONDS;

}  // namespace

std::string TaskDispatcher::ShapeKey(const TaskOptions& options) {
  std::string key = std::string(options.python ? "py|" : "cpp|") + options.accelerator_type + "|";
  for (const auto& [name, amount] : options.resources) {
    key += name + "=" + std::to_string(amount) + ",";
  }
  if (!(options.strategy == sched::SchedulingStrategy())) key += "|" + ToString(options.strategy);
  // Leases of retriable tasks apart: the node's memory monitor stops their workers first.
  return key + (options.max_retries != 0 ? "|retriable" : "");
}

kj::Promise<void> TaskDispatcher::Dispatch(PendingTask* task) {
  auto done = kj::newPromiseAndFulfiller<void>();
  task->done = kj::mv(done.fulfiller);
  std::string key = ShapeKey(task->options);
  ShapeQueue& q = queues_[key];
  q.one_task_per_lease = task->options.strategy.kind == sched::StrategyKind::kSpread;
  q.waiting.push_back(task);
  Pump(key);
  return kj::mv(done.promise);
}

void TaskDispatcher::Pump(const std::string& key) {
  ShapeQueue& q = queues_[key];
  int max_in_flight = q.one_task_per_lease ? 1 : kMaxInFlight;
  while (!q.waiting.empty()) {
    Lease* best = nullptr;
    for (Lease& l : q.leases) {
      if (!l.dead && !l.killed && !l.draining && l.in_flight < max_in_flight &&
          (!best || l.in_flight < best->in_flight)) {
        best = &l;
      }
    }
    if (best == nullptr) break;
    PendingTask* task = q.waiting.front();
    q.waiting.pop_front();
    Push(key, *best, task);
  }
  // One more lease per kMaxInFlight waiting tasks, within the cap.
  int wanted = static_cast<int>((q.waiting.size() + max_in_flight - 1) / max_in_flight);
  int room = kMaxLeasesPerShape - static_cast<int>(q.leases.size()) - q.requesting;
  int to_request = std::min({wanted - q.requesting, room, kMaxPendingLeaseRequests - q.requesting});
  for (int i = 0; i < to_request; ++i) {
    ++q.requesting;
    const TaskOptions& options = q.waiting.front()->options;
    LeaseRequest shape{options.resources, options.accelerator_type, code_search_path_,
                       options.python};
    shape.strategy = options.strategy;
    shape.retriable = options.max_retries != 0;  // the key keeps the two apart
    background_.add(RequestLease(connect_, local_node_, shape, job_)
                        .then(
                            [this, key](LeaseOutcome lease) {
                              ShapeQueue& q = queues_[key];
                              --q.requesting;
                              if (!lease.infeasible.empty()) {
                                while (!q.waiting.empty()) {
                                  Fail(*q.waiting.front(), ErrorKind::INFEASIBLE,
                                       lease.infeasible);
                                  q.waiting.pop_front();
                                }
                                return;
                              }
                              if (!lease.spillback_unreachable.empty()) {
                                RetryUnreachableSpillback(key, lease.spillback_unreachable);
                                return;
                              }
                              q.unreachable_since = nullptr;
                              Lease& added = q.leases.emplace_back();
                              added.node = lease.node;
                              added.id = lease.lease_id;
                              added.worker = lease.worker;
                              added.worker_id = lease.worker_id;
                              added.holder = kj::mv(lease.holder);
                              added.draining = draining_nodes_.count(added.node) > 0;
                              if (on_first_lease_) {
                                auto first = std::move(on_first_lease_);
                                on_first_lease_ = nullptr;
                                first();
                              }
                              Pump(key);
                              if (added.in_flight == 0) {
                                ScheduleIdleReturn(key, added.id, added.generation);
                              }
                            },
                            [this, key](kj::Exception&& e) {
                              ShapeQueue& q = queues_[key];
                              --q.requesting;
                              if (q.requesting > 0 || !q.leases.empty()) return;  // others serve
                              std::string why = "no worker lease: " + FromKjException(e).ToString();
                              while (!q.waiting.empty()) {
                                Fail(*q.waiting.front(), ErrorKind::UNAVAILABLE, why);
                                q.waiting.pop_front();
                              }
                            }));
  }
}

void TaskDispatcher::RetryUnreachableSpillback(const std::string& key, const std::string& why) {
  ShapeQueue& q = queues_[key];
  kj::TimePoint now = timer_.now();
  kj::TimePoint since = now;
  KJ_IF_MAYBE (first, q.unreachable_since) {
    since = *first;
  } else {
    q.unreachable_since = now;
  }
  if (now - since >= kSpillbackRetryWindow) {
    q.unreachable_since = nullptr;
    if (q.requesting > 0 || !q.leases.empty()) return;  // others serve
    while (!q.waiting.empty()) {
      Fail(*q.waiting.front(), ErrorKind::UNAVAILABLE, "no worker lease: " + why);
      q.waiting.pop_front();
    }
    return;
  }
  AIRT_LOG(DEBUG) << why << "; asking again";
  background_.add(timer_.afterDelay(kSpillbackRetryDelay).then([this, key] { Pump(key); }));
}

void TaskDispatcher::Push(const std::string& key, Lease& lease, PendingTask* task) {
  ++lease.in_flight;
  ++lease.generation;
  auto push = connect_(lease.worker).castAs<proto::Worker>().pushTaskRequest();
  FillTaskSpec(*task, job_, push.initTask());
  uint64_t lease_id = lease.id;
  pushed_[task] = lease_id;
  background_.add(push.send().then(
      [this, key, lease_id, task](auto reply) {
        pushed_.erase(task);
        ReportCopies(on_copies_, reply);
        for (Lease& l : queues_[key].leases) {
          if (l.id != lease_id) continue;
          --l.in_flight;
          if (task->cancelled) {
            // Its returns hold the cancellation already; what it made is dropped.
            DropTaskReply(connect_, background_, reply);
            if (task->done) task->done->fulfill();
          } else if (task->intercept_lost_arguments && reply.getFailed() &&
                     reply.getError().getKind() == ErrorKind::OBJECT_LOST) {
            task->lost_argument =
                ObjectError{ErrorKind::OBJECT_LOST, reply.getError().getFunctionName().cStr(),
                            reply.getError().getMessage().cStr(), ""};
            if (task->done) task->done->fulfill();
          } else {
            RecordTaskReply(memory_, *task, reply);
          }
          AfterTask(key, l);
          return;
        }
      },
      [this, key, lease_id, task](kj::Exception&& e) {
        pushed_.erase(task);
        // The worker died or its connection broke: the task goes back to the queue.
        for (Lease& l : queues_[key].leases) {
          if (l.id != lease_id) continue;
          --l.in_flight;
          l.dead = true;
          if (on_worker_lost_) on_worker_lost_(l.node);
          if (task->cancelled) {
            if (task->done) task->done->fulfill();
            AfterTask(key, l);
            return;
          }
          // A worker killed to cancel another task did not fail this one: a free re-run.
          if (!l.killed) ++task->attempts;
          int32_t max = task->options.max_retries;  // < 0: retried for as long as it dies
          if (max < 0 || task->attempts <= static_cast<uint32_t>(max)) {
            queues_[key].waiting.push_front(task);
          } else {
            std::string task_name =
                "task " + task->id.Hex() + " (" +
                (task->options.name.empty() ? task->function : task->options.name) + ")";
            std::string times = std::to_string(task->attempts) +
                                " times, and the task may be retried " +
                                std::to_string(task->options.max_retries) + " (max_retries)";
            std::string message = "the worker running " + task_name + " died " + times + ": " +
                                  FromKjException(e).message() + ".";
            // The node says why when it stopped the worker itself (a quarantined GPU, GPU
            // memory beyond the worker's share, the node's memory use: kOutOfMemory); else its
            // worker logs do.
            auto ask = connect_(l.node).castAs<proto::Node>().workerExitReasonRequest();
            ask.setWorkerId(AsData(l.worker_id));
            background_.add(
                ask.send()
                    .then(
                        [](auto reply) {
                          return std::make_pair(std::string(reply.getReason().cStr()),
                                                reply.getOutOfMemory());
                        },
                        [](kj::Exception&&) { return std::make_pair(std::string(), false); })
                    .then([this, task, message, task_name,
                           times](std::pair<std::string, bool> exit) {
                      auto& [reason, out_of_memory] = exit;
                      if (out_of_memory) {
                        Fail(*task, ErrorKind::OUT_OF_MEMORY,
                             task_name + " was stopped for memory (it ran " + times +
                                 "): " + reason + ".");
                        return;
                      }
                      Fail(*task, ErrorKind::WORKER_CRASHED,
                           message + (reason.empty() ? " The node's worker logs say why."
                                                     : " The node stopped it: " + reason));
                    }));
          }
          AfterTask(key, l);
          return;
        }
      }));
}

void TaskDispatcher::Cancel(PendingTask& task, bool force, bool recursive) {
  std::string key = ShapeKey(task.options);
  auto queue = queues_.find(key);
  if (queue == queues_.end()) return;
  std::deque<PendingTask*>& waiting = queue->second.waiting;
  if (auto it = std::find(waiting.begin(), waiting.end(), &task); it != waiting.end()) {
    waiting.erase(it);
    if (task.done) task.done->fulfill();
    return;
  }
  auto pushed = pushed_.find(&task);
  if (pushed == pushed_.end()) return;
  Lease* lease = FindLease(key, pushed->second);
  if (lease == nullptr || lease->dead) return;
  kj::Promise<void> asked = kj::READY_NOW;
  if (!force || recursive) {
    auto ask = connect_(lease->worker).castAs<proto::Worker>().cancelTaskRequest();
    ask.setTaskId(AsData(task.id.Binary()));
    ask.setForce(force);
    ask.setRecursive(recursive);
    std::string worker = lease->worker;
    asked = ask.send().ignoreResult().catch_([worker](kj::Exception&& e) {
      AIRT_LOG(DEBUG) << "cancelTask at worker " << worker << ": " << FromKjException(e).ToString();
    });
  }
  if (!force) {
    background_.add(kj::mv(asked));
    return;
  }
  lease->killed = true;
  Lease copy = *lease;
  copy.holder = nullptr;  // the record keeps the lease until it is returned
  background_.add(timer_.timeoutAfter(kCancelChildrenGrace, kj::mv(asked))
                      .catch_([](kj::Exception&&) {})
                      .then([this, copy] { return KillWorker(copy); }));
}

kj::Promise<void> TaskDispatcher::KillWorker(const Lease& lease) {
  auto kill = connect_(lease.node).castAs<proto::Node>().killWorkerRequest();
  kill.setWorkerId(AsData(lease.worker_id));
  std::string worker = lease.worker;
  return kill.send()
      .then([worker](auto reply) {
        AIRT_LOG(DEBUG) << "killed worker " << worker << " to force-cancel its task"
                        << (reply.getKilled() ? "" : " (it had exited)");
      })
      .catch_([worker](kj::Exception&& e) {
        AIRT_LOG(WARNING) << "killing worker " << worker
                          << " to force-cancel its task: " << FromKjException(e).ToString();
      });
}

TaskDispatcher::Lease* TaskDispatcher::FindLease(const std::string& key, uint64_t lease_id) {
  for (Lease& l : queues_[key].leases) {
    if (l.id == lease_id) return &l;
  }
  return nullptr;
}

void TaskDispatcher::NodeDraining(const std::string& node) {
  if (!draining_nodes_.insert(node).second) return;
  for (auto& [key, q] : queues_) {
    std::vector<uint64_t> idle;
    for (Lease& l : q.leases) {
      if (l.node != node) continue;
      l.draining = true;
      if (l.in_flight == 0 && !l.dead) idle.push_back(l.id);
    }
    for (uint64_t id : idle) Remove(key, id, /*disconnect=*/false);
  }
  for (auto& [key, q] : queues_) Pump(key);
}

void TaskDispatcher::AfterTask(const std::string& key, Lease& lease) {
  uint64_t id = lease.id, generation = lease.generation;
  bool dead = lease.dead, idle = lease.in_flight == 0;
  if (dead && idle) Remove(key, id, /*disconnect=*/true);
  if (!dead && idle && (queues_[key].one_task_per_lease || lease.draining)) {
    // SPREAD: every task is placed by the node's policy, so its lease goes back at once.
    Remove(key, id, /*disconnect=*/false);
    Pump(key);
    return;
  }
  Pump(key);
  if (!dead && idle) ScheduleIdleReturn(key, id, generation);
}

void TaskDispatcher::ScheduleIdleReturn(const std::string& key, uint64_t lease_id,
                                        uint64_t generation) {
  background_.add(timer_.afterDelay(kIdleReturn).then([this, key, lease_id, generation] {
    for (Lease& l : queues_[key].leases) {
      if (l.id == lease_id && l.in_flight == 0 && l.generation == generation && !l.dead) {
        Remove(key, lease_id, /*disconnect=*/false);
        return;
      }
    }
  }));
}

void TaskDispatcher::Remove(const std::string& key, uint64_t lease_id, bool disconnect) {
  auto& leases = queues_[key].leases;
  for (auto it = leases.begin(); it != leases.end(); ++it) {
    if (it->id != lease_id) continue;
    background_.add(ReturnLease(connect_, it->node, lease_id, disconnect, kj::mv(it->holder)));
    if (disconnect) forget_(it->worker);
    leases.erase(it);
    return;
  }
}

kj::Promise<void> TaskDispatcher::ReturnAll() {
  auto returns = kj::heapArrayBuilder<kj::Promise<void>>([&] {
    size_t n = 0;
    for (auto& [key, q] : queues_) n += q.leases.size();
    return n;
  }());
  for (auto& [key, q] : queues_) {
    for (Lease& l : q.leases) {
      returns.add(ReturnLease(connect_, l.node, l.id, l.dead, kj::mv(l.holder)));
    }
    q.leases.clear();
  }
  return kj::joinPromises(returns.finish());
}

}  // namespace airt::core_worker
