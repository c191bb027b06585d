#include "api/core_worker/task_dispatcher.h"

#include "api/core_worker/capnp_util.h"
#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::core {
namespace {

constexpr int kMaxSpillbacks = 8;
constexpr auto kIdleReturn = 10 * kj::MILLISECONDS;

}  // namespace

std::string TaskDispatcher::ShapeKey(const TaskOptions& options) {
  std::string key = options.accelerator_type + "|";
  for (const auto& [name, amount] : options.resources) {
    key += name + "=" + std::to_string(amount) + ",";
  }
  return key;
}

kj::Promise<void> TaskDispatcher::Dispatch(PendingTask* task) {
  auto done = kj::newPromiseAndFulfiller<void>();
  task->done = kj::mv(done.fulfiller);
  std::string key = ShapeKey(task->options);
  queues_[key].waiting.push_back(task);
  Pump(key);
  return kj::mv(done.promise);
}

void TaskDispatcher::Pump(const std::string& key) {
  ShapeQueue& q = queues_[key];
  while (!q.waiting.empty()) {
    Lease* best = nullptr;
    for (Lease& l : q.leases) {
      if (!l.dead && l.in_flight < kMaxInFlight && (!best || l.in_flight < best->in_flight)) {
        best = &l;
      }
    }
    if (best == nullptr) break;
    PendingTask* task = q.waiting.front();
    q.waiting.pop_front();
    Push(key, *best, task);
  }
  // One more lease per kMaxInFlight waiting tasks, within the cap.
  int wanted = static_cast<int>((q.waiting.size() + kMaxInFlight - 1) / kMaxInFlight);
  int room = kMaxLeasesPerShape - static_cast<int>(q.leases.size()) - q.requesting;
  int to_request = std::min({wanted - q.requesting, room, kMaxPendingLeaseRequests - q.requesting});
  for (int i = 0; i < to_request; ++i) {
    ++q.requesting;
    TaskOptions options = q.waiting.front()->options;
    background_.add(RequestLease(local_node_, options, 0)
                        .then(
                            [this, key](LeaseOutcome lease) {
                              ShapeQueue& q = queues_[key];
                              --q.requesting;
                              if (!lease.infeasible.empty()) {
                                while (!q.waiting.empty()) {
                                  Fail(*q.waiting.front(), ObjectErrorKind::kInfeasible,
                                       lease.infeasible);
                                  q.waiting.pop_front();
                                }
                                return;
                              }
                              q.leases.push_back(Lease{lease.node, lease.lease_id, lease.worker});
                              Lease& added = q.leases.back();
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
                                Fail(*q.waiting.front(), ObjectErrorKind::kUnavailable, why);
                                q.waiting.pop_front();
                              }
                            }));
  }
}

void TaskDispatcher::Push(const std::string& key, Lease& lease, PendingTask* task) {
  ++lease.in_flight;
  ++lease.generation;
  auto push = connect_(lease.worker).castAs<proto::Worker>().pushTaskRequest();
  auto spec = push.initTask();
  spec.setTaskId(AsData(task->id.Binary()));
  spec.setJobId(AsData(job_.Binary()));
  spec.setFunctionName(task->function);
  spec.setNumReturns(static_cast<uint32_t>(task->returns.size()));
  spec.setName(task->options.name);
  auto args = spec.initArgs(static_cast<uint>(task->args.size()));
  for (size_t i = 0; i < task->args.size(); ++i) {
    const ObjectEntry& dep = task->resolved[i];
    if (!task->args[i].ref) {
      args[i].setInline(AsData(task->args[i].value));
    } else if (dep.value) {
      args[i].setInline(AsData(*dep.value));
    } else {
      auto where = args[i].initObject();
      where.setObjectId(AsData(dep.location->id.Binary()));
      where.setTransferAddress(dep.location->transfer_address);
      where.setSize(dep.location->size);
    }
  }
  uint64_t lease_id = lease.id;
  background_.add(push.send().then(
      [this, key, lease_id, task](auto reply) {
        for (Lease& l : queues_[key].leases) {
          if (l.id != lease_id) continue;
          --l.in_flight;
          RecordReturns(*task, reply);
          task->done->fulfill();
          AfterTask(key, l);
          return;
        }
      },
      [this, key, lease_id, task](kj::Exception&& e) {
        // The worker died or its connection broke: the task goes back to the queue.
        for (Lease& l : queues_[key].leases) {
          if (l.id != lease_id) continue;
          --l.in_flight;
          l.dead = true;
          if (++task->attempts <= task->options.max_retries) {
            queues_[key].waiting.push_front(task);
          } else {
            Fail(*task, ObjectErrorKind::kWorkerCrashed,
                 "the worker running " + task->function + " died " +
                     std::to_string(task->attempts) + " times: " + FromKjException(e).message());
          }
          AfterTask(key, l);
          return;
        }
      }));
}

void TaskDispatcher::AfterTask(const std::string& key, Lease& lease) {
  uint64_t id = lease.id, generation = lease.generation;
  bool dead = lease.dead, idle = lease.in_flight == 0;
  if (dead && idle) Remove(key, id, /*disconnect=*/true);
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
    auto request = connect_(it->node).castAs<proto::Node>().returnWorkerLeaseRequest();
    request.setLeaseId(lease_id);
    request.setDisconnectWorker(disconnect);
    background_.add(request.send().ignoreResult());
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
      auto request = connect_(l.node).castAs<proto::Node>().returnWorkerLeaseRequest();
      request.setLeaseId(l.id);
      request.setDisconnectWorker(l.dead);
      returns.add(request.send().ignoreResult());
    }
    q.leases.clear();
  }
  return kj::joinPromises(returns.finish());
}

kj::Promise<TaskDispatcher::LeaseOutcome> TaskDispatcher::RequestLease(const std::string& node,
                                                                       const TaskOptions& options,
                                                                       int hops) {
  auto request = connect_(node).castAs<proto::Node>().requestWorkerLeaseRequest();
  auto shape = request.initShape();
  auto resources = shape.initResources(static_cast<uint>(options.resources.size()));
  uint i = 0;
  for (const auto& [name, amount] : options.resources) {
    resources[i].setName(name);
    resources[i++].setAmount(amount);
  }
  shape.setAcceleratorType(options.accelerator_type);
  request.setJobId(AsData(job_.Binary()));
  request.setLanguage(proto::Language::CPP);
  return request.send().then(
      [this, node, options, hops](auto response) -> kj::Promise<LeaseOutcome> {
        auto reply = response.getReply();
        switch (reply.which()) {
          case proto::LeaseReply::GRANTED: {
            auto grant = reply.getGranted();
            auto worker = grant.getWorker();
            return LeaseOutcome{
                node, grant.getLeaseId(),
                std::string(worker.getHost().cStr()) + ":" + std::to_string(worker.getPort()), ""};
          }
          case proto::LeaseReply::SPILLBACK:
            if (hops >= kMaxSpillbacks) {
              throw ToKjException(Unavailable("the lease was spilled back " + std::to_string(hops) +
                                              " times without a grant"));
            }
            return RequestLease(reply.getSpillback().cStr(), options, hops + 1);
          case proto::LeaseReply::INFEASIBLE:
            return LeaseOutcome{node, 0, "", reply.getInfeasible().cStr()};
        }
        throw ToKjException(Internal("a lease reply of unknown kind from " + node));
      });
}

void TaskDispatcher::RecordReturns(PendingTask& task,
                                   proto::Worker::PushTaskResults::Reader reply) {
  if (reply.getFailed()) {
    auto error = reply.getError();
    ObjectErrorKind kind = error.getKind() == proto::TaskError::Kind::FUNCTION_NOT_FOUND
                               ? ObjectErrorKind::kFunctionNotFound
                               : ObjectErrorKind::kTaskError;
    Fail(task, kind, error.getMessage().cStr());
    return;
  }
  auto returns = reply.getReturns();
  if (returns.size() != task.returns.size()) {
    Fail(task, ObjectErrorKind::kTaskError,
         "the worker answered " + std::to_string(returns.size()) + " returns, expected " +
             std::to_string(task.returns.size()));
    return;
  }
  for (uint i = 0; i < returns.size(); ++i) {
    ObjectEntry entry;
    if (returns[i].isInline()) {
      entry.value = std::make_shared<const std::string>(ToString(returns[i].getInline()));
    } else {
      auto where = returns[i].getObject();
      entry.location =
          ObjectLocation{task.returns[i], where.getTransferAddress().cStr(), where.getSize()};
    }
    memory_.Put(task.returns[i], std::move(entry));
  }
}

void TaskDispatcher::Fail(PendingTask& task, ObjectErrorKind kind, const std::string& message) {
  for (const ObjectId& id : task.returns) {
    memory_.Put(id, ObjectEntry{nullptr, std::nullopt, ObjectError{kind, task.function, message}});
  }
  if (task.done) task.done->fulfill();
}

}  // namespace airt::core
