#include "worker/internal/object_evacuator.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <numeric>
#include <utility>

#include <capnp/ez-rpc.h>

#include "common/logging.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"

namespace airt::worker {
namespace {

capnp::Data::Reader AsData(const ObjectId& id) { return {id.data(), ObjectId::kSize}; }

// What a destination's or an owner's reply may take beyond the evacuation's deadline.
constexpr uint64_t kReplyGraceMs = 5000;

// The part of `deadline` left at `now`, at least 1 ms (a call is always tried once).
uint64_t MsLeft(kj::TimePoint deadline, kj::TimePoint now) {
  if (deadline <= now) return 1;
  return std::max<uint64_t>(1, (deadline - now) / kj::MILLISECONDS);
}

}  // namespace

ResourceReport StoreAwareReport::Report() const {
  ResourceReport report = leases_.Report();
  Result<objectstore::StoreStats> stats = store_.Stats();
  if (stats.ok()) {
    report.num_primary_objects = stats->num_primary;
    report.store_free_bytes = stats->capacity_bytes > stats->used_bytes
                                  ? stats->capacity_bytes - stats->used_bytes
                                  : 0;
  }
  return report;
}

std::vector<EvacuationTarget> EvacuationTargets(capnp::List<proto::NodeStatus>::Reader nodes,
                                                const std::string& self,
                                                const std::vector<std::string>& avoid) {
  std::vector<EvacuationTarget> out;
  for (auto status : nodes) {
    if (!status.getAlive() || status.getDraining()) continue;  // a draining node leaves too
    auto info = status.getInfo();
    std::string host = info.getAddress().cStr();
    std::string node = host + ":" + std::to_string(info.getNodePort());
    if (node == self || info.getTransferPort() == 0) continue;
    if (std::find(avoid.begin(), avoid.end(), node) != avoid.end()) continue;
    out.push_back(EvacuationTarget{node, host + ":" + std::to_string(info.getTransferPort()),
                                   status.getStoreFreeBytes()});
  }
  return out;
}

std::vector<int> PlanEvacuation(std::span<const objectstore::PrimaryCopy> objects,
                                std::span<const EvacuationTarget> targets) {
  std::vector<size_t> order(objects.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return objects[a].size > objects[b].size; });
  std::vector<uint64_t> room;
  for (const EvacuationTarget& t : targets) room.push_back(t.free_bytes);
  std::vector<int> plan(objects.size(), -1);
  for (size_t i : order) {
    int best = -1;
    for (size_t t = 0; t < room.size(); ++t) {
      if (room[t] >= objects[i].size && (best < 0 || room[t] > room[static_cast<size_t>(best)])) {
        best = static_cast<int>(t);
      }
    }
    if (best < 0) continue;
    plan[i] = best;
    room[static_cast<size_t>(best)] -= objects[i].size;
  }
  return plan;
}

// One evacuation: the objects still to deal with and what became of the others. Shared by the
// continuations of its steps (all on the loop).
struct ObjectEvacuator::Run {
  kj::TimePoint deadline = kj::origin<kj::TimePoint>();
  EvacuationOutcome outcome;
  std::vector<objectstore::PrimaryCopy> objects;  // referenced, not dealt with yet
  bool more = false;                              // the store listed only part of its primaries

  void Fail(const ObjectId& id, std::string reason) {
    outcome.failed.push_back(EvacuationFailure{id, std::move(reason)});
  }
};

ObjectEvacuator::ObjectEvacuator(ObjectEvacuatorOptions options, objectstore::StoreClient& store,
                                 HeadConnector& head, kj::Timer& timer)
    : options_(std::move(options)), store_(store), head_(head), timer_(timer), cleanup_(*this) {}

ObjectEvacuator::~ObjectEvacuator() {
  running_ = nullptr;
  for (auto& pull : pulls_) pull.thread.join();
}

capnp::EzRpcClient& ObjectEvacuator::Dial(const std::string& address) {
  for (auto& [a, client] : peers_) {
    if (a == address) return *client;
  }
  peers_.emplace_back(address, std::make_unique<capnp::EzRpcClient>(address));
  return *peers_.back().second;
}

kj::Promise<EvacuationOutcome> ObjectEvacuator::Evacuate(kj::Duration deadline,
                                                         std::vector<std::string> avoid) {
  KJ_IF_MAYBE(run, running_) { return run->addBranch(); }
  // Fresh connections for each run: one broken in an earlier run is not reused.
  peers_.clear();
  kj::ForkedPromise<EvacuationOutcome> forked =
      Start(deadline, std::move(avoid))
          .then(
              [this](EvacuationOutcome outcome) {
                // Forgotten after this turn (the fork cannot be dropped from its own
                // continuation); a call meanwhile gets this outcome.
                cleanup_.add(kj::evalLater([this] { running_ = nullptr; }));
                return outcome;
              },
              [this](kj::Exception&& e) -> EvacuationOutcome {
                cleanup_.add(kj::evalLater([this] { running_ = nullptr; }));
                kj::throwFatalException(kj::mv(e));
              })
          .fork();
  kj::Promise<EvacuationOutcome> branch = forked.addBranch();
  running_ = kj::mv(forked);
  return branch;
}

void ObjectEvacuator::taskFailed(kj::Exception&& exception) {
  AIRT_LOG(ERROR) << "evacuation bookkeeping failed: " << FromKjException(exception).ToString();
}

kj::Promise<void> ObjectEvacuator::Send(std::shared_ptr<Run> run,
                                        std::vector<EvacuationTarget> targets) {
  std::vector<int> plan = PlanEvacuation(run->objects, targets);
  uint64_t most = 0;
  for (const EvacuationTarget& t : targets) most = std::max(most, t.free_bytes);
  std::map<int, std::vector<objectstore::PrimaryCopy>> by_target;
  for (size_t i = 0; i < plan.size(); ++i) {
    const objectstore::PrimaryCopy& copy = run->objects[i];
    if (plan[i] >= 0) {
      by_target[plan[i]].push_back(copy);
      continue;
    }
    run->Fail(copy.id,
              targets.empty()
                  ? "object " + copy.id.Hex() + ": no other alive node to move it to; it stays"
                  : "object " + copy.id.Hex() + ": no other alive node has room for its " +
                        std::to_string(copy.size) + " bytes (" + std::to_string(targets.size()) +
                        " nodes, the most free " + std::to_string(most) + " bytes); it stays");
  }
  run->objects.clear();
  auto sends = kj::heapArrayBuilder<kj::Promise<void>>(by_target.size());
  for (auto& [index, copies] : by_target) {
    const EvacuationTarget& target = targets[static_cast<size_t>(index)];
    auto request = Dial(target.node_address).getMain<proto::Node>().pullPrimariesRequest();
    request.setFromTransfer(options_.transfer_address);
    auto ids = request.initObjects(static_cast<unsigned>(copies.size()));
    auto owners = request.initOwners(static_cast<unsigned>(copies.size()));
    for (size_t i = 0; i < copies.size(); ++i) {
      ids.set(static_cast<unsigned>(i), AsData(copies[i].id));
      owners.set(static_cast<unsigned>(i), copies[i].owner);
    }
    uint64_t left = MsLeft(run->deadline, timer_.now());
    request.setTimeoutMs(left);
    // The destination answers each object by the deadline; a little more for its reply.
    sends.add(timer_.timeoutAfter((left + kReplyGraceMs) * kj::MILLISECONDS, request.send())
                  .then(
                      [this, run, target, copies = copies](auto reply) {
                        auto errors = reply.getErrors();
                        std::vector<objectstore::PrimaryCopy> arrived;
                        for (size_t i = 0; i < copies.size(); ++i) {
                          std::string error = i < errors.size()
                                                  ? errors[static_cast<unsigned>(i)].cStr()
                                                  : "no answer for it";
                          if (error.empty()) {
                            arrived.push_back(copies[i]);
                          } else {
                            run->Fail(copies[i].id, "object " + copies[i].id.Hex() + ": node " +
                                                        target.node_address +
                                                        " could not take it (" + error +
                                                        "); it stays");
                          }
                        }
                        return Tell(run, target, std::move(arrived));
                      },
                      [run, target, copies = copies](kj::Exception&& e) {
                        for (const auto& copy : copies) {
                          run->Fail(copy.id, "object " + copy.id.Hex() + ": destination node " +
                                                 target.node_address + " failed (" +
                                                 FromKjException(e).ToString() + "); it stays");
                        }
                      }));
  }
  return kj::joinPromises(sends.finish());
}

kj::Promise<void> ObjectEvacuator::Tell(std::shared_ptr<Run> run, EvacuationTarget target,
                                        std::vector<objectstore::PrimaryCopy> arrived) {
  std::map<std::string, std::vector<ObjectId>> by_owner;
  for (const auto& copy : arrived) by_owner[copy.owner].push_back(copy.id);
  auto tells = kj::heapArrayBuilder<kj::Promise<void>>(by_owner.size());
  for (auto& [owner, ids] : by_owner) {
    auto request = Dial(owner).getMain<proto::Owner>().objectsMovedRequest();
    request.setFromNode(options_.node_address);
    request.setNodeAddress(target.node_address);
    request.setTransferAddress(target.transfer_address);
    auto list = request.initObjectIds(static_cast<unsigned>(ids.size()));
    for (size_t i = 0; i < ids.size(); ++i) list.set(static_cast<unsigned>(i), AsData(ids[i]));
    tells.add(
        timer_
            .timeoutAfter(MsLeft(run->deadline, timer_.now()) * kj::MILLISECONDS, request.send())
            .then(
                [this, run, target, owner = owner, ids = ids](auto reply) {
                  auto taken = reply.getHeld();
                  std::vector<ObjectId> refused;
                  for (size_t i = 0; i < ids.size(); ++i) {
                    if (i < taken.size() && taken[static_cast<unsigned>(i)]) {
                      // The owner points at the new copy: this one may go.
                      Status deleted = store_.Delete(ids[i]);
                      if (!deleted.ok() && deleted.code() != Code::kNotFound) {
                        AIRT_LOG(WARNING) << "deleting evacuated object " << ids[i].Hex() << ": "
                                          << deleted.ToString();
                      }
                      ++run->outcome.moved;
                      continue;
                    }
                    refused.push_back(ids[i]);
                    run->Fail(ids[i], "object " + ids[i].Hex() + ": its owner at " + owner +
                                          " did not take the new location (it freed the object "
                                          "meanwhile, or knows it elsewhere); the copy on node " +
                                          target.node_address + " is freed, this one stays");
                  }
                  if (refused.empty()) return;
                  auto free = Dial(target.node_address).getMain<proto::Node>().freeObjectsRequest();
                  auto list = free.initObjectIds(static_cast<unsigned>(refused.size()));
                  for (size_t i = 0; i < refused.size(); ++i) {
                    list.set(static_cast<unsigned>(i), AsData(refused[i]));
                  }
                  cleanup_.add(free.send().ignoreResult());
                },
                [run, target, owner = owner, ids = ids](kj::Exception&& e) {
                  for (const ObjectId& id : ids) {
                    run->Fail(id, "object " + id.Hex() + ": its owner at " + owner +
                                      " cannot be reached to take its new location on node " +
                                      target.node_address + " (" + FromKjException(e).ToString() +
                                      "); this copy stays");
                  }
                }));
  }
  return kj::joinPromises(tells.finish());
}

kj::Promise<std::vector<std::string>> ObjectEvacuator::PullPrimaries(
    std::string from, std::vector<ObjectId> ids, std::vector<std::string> owners,
    kj::Duration timeout) {
  if (puller_ == nullptr) puller_ = std::make_unique<objectstore::ObjectPuller>(&store_);
  // Join the pulls that are over.
  for (auto it = pulls_.begin(); it != pulls_.end();) {
    if (!it->done->load()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = pulls_.erase(it);
  }
  auto paf = kj::newPromiseAndCrossThreadFulfiller<std::vector<std::string>>();
  // Held through a shared_ptr: a thread's callable must not throw from its destructor.
  auto fulfiller =
      std::make_shared<kj::Own<kj::CrossThreadPromiseFulfiller<std::vector<std::string>>>>(
          kj::mv(paf.fulfiller));
  auto done = std::make_shared<std::atomic<bool>>(false);
  int64_t timeout_ms = static_cast<int64_t>(timeout / kj::MILLISECONDS);
  std::thread thread([puller = puller_.get(), store = &store_, from = std::move(from),
                      ids = std::move(ids), owners = std::move(owners), timeout_ms,
                      fulfiller, done]() mutable {
    std::vector<objectstore::PullRequest> wanted;
    wanted.reserve(ids.size());
    for (const ObjectId& id : ids) wanted.push_back(objectstore::PullRequest{id, from});
    std::vector<Status> pulled = puller->PullEach(wanted, timeout_ms);
    std::vector<std::string> errors;
    errors.reserve(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      Status kept = pulled[i].ok() ? store->MakePrimary(ids[i], owners[i]) : pulled[i];
      errors.push_back(kept.ok() ? std::string() : kept.ToString());
    }
    (*fulfiller)->fulfill(kj::mv(errors));
    done->store(true);
  });
  pulls_.push_back(PullThread{std::move(thread), std::move(done)});
  return kj::mv(paf.promise);
}

kj::Promise<EvacuationOutcome> ObjectEvacuator::Start(kj::Duration deadline,
                                                      std::vector<std::string> avoid) {
  auto run = std::make_shared<Run>();
  run->deadline = timer_.now() + deadline;
  Result<std::vector<objectstore::PrimaryCopy>> listed = store_.ListPrimaries(&run->more);
  if (!listed.ok()) {
    return ToKjException(listed.status().WithContext("listing the primary copies of node " +
                                                     options_.node_address));
  }
  std::map<std::string, std::vector<objectstore::PrimaryCopy>> by_owner;
  for (objectstore::PrimaryCopy& copy : *listed) {
    if (copy.owner.empty()) {
      run->Fail(copy.id, "object " + copy.id.Hex() + " on node " + options_.node_address +
                             " names no owner (its creator served no proto::Owner), so nobody "
                             "could learn where it went; it stays");
      continue;
    }
    by_owner[copy.owner].push_back(std::move(copy));
  }
  AIRT_LOG(INFO) << "evacuating node " << options_.node_address << ": " << listed->size()
                 << " primary copies, " << by_owner.size() << " owners";

  // 1. Which objects their owners still reference.
  auto asks = kj::heapArrayBuilder<kj::Promise<void>>(by_owner.size());
  for (auto& [owner, copies] : by_owner) {
    auto request = Dial(owner).getMain<proto::Owner>().heldObjectsRequest();
    auto ids = request.initObjectIds(static_cast<unsigned>(copies.size()));
    for (size_t i = 0; i < copies.size(); ++i) ids.set(static_cast<unsigned>(i), AsData(copies[i].id));
    kj::Promise<void> asked =
        timer_.timeoutAfter(MsLeft(run->deadline, timer_.now()) * kj::MILLISECONDS,
                            request.send())
            .then(
                [run, copies = copies](auto reply) {
                  auto held = reply.getHeld();
                  for (size_t i = 0; i < copies.size(); ++i) {
                    if (i < held.size() && held[static_cast<unsigned>(i)]) {
                      run->objects.push_back(copies[i]);
                    } else {
                      ++run->outcome.unreferenced;
                    }
                  }
                },
                [run, copies = copies, owner = owner](kj::Exception&& e) {
                  for (const auto& copy : copies) {
                    run->Fail(copy.id, "object " + copy.id.Hex() + ": its owner at " + owner +
                                           " cannot be reached (" +
                                           FromKjException(e).ToString() + "); it stays");
                  }
                });
    asks.add(kj::mv(asked));
  }
  return kj::joinPromises(asks.finish())
      .then([this, run, avoid]() -> kj::Promise<void> {
        if (run->objects.empty()) return kj::READY_NOW;
        // 2. Where they can go: the head's cluster view.
        proto::Head::Client head = head_.Connect();
        return timer_
            .timeoutAfter(MsLeft(run->deadline, timer_.now()) * kj::MILLISECONDS,
                          head.clusterViewRequest().send())
            .then(
                [this, run, avoid](auto view) -> kj::Promise<void> {
                  return Send(run,
                              EvacuationTargets(view.getNodes(), options_.node_address, avoid));
                },
                [this, run](kj::Exception&& e) {
                  for (const auto& copy : run->objects) {
                    run->Fail(copy.id, "object " + copy.id.Hex() +
                                           ": the head's cluster view cannot be read (" +
                                           FromKjException(e).ToString() +
                                           "), so no node to move it to is known; it stays");
                  }
                  run->objects.clear();
                });
      })
      .then([this, run, avoid]() -> kj::Promise<EvacuationOutcome> {
        // The store listed only part of them: the next part, once this one moved something.
        if (run->more && run->outcome.moved > 0 && timer_.now() < run->deadline) {
          return Start(run->deadline - timer_.now(), avoid).then([run](EvacuationOutcome next) {
            EvacuationOutcome all = run->outcome;
            all.moved += next.moved;
            all.unreferenced += next.unreferenced;
            for (auto& f : next.failed) all.failed.push_back(std::move(f));
            return all;
          });
        }
        AIRT_LOG(INFO) << "evacuated node " << options_.node_address << ": "
                       << run->outcome.moved << " moved, " << run->outcome.unreferenced
                       << " unreferenced, " << run->outcome.failed.size() << " failed";
        return run->outcome;
      });
}

}  // namespace airt::worker
