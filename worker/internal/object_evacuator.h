// Moving a leaving node's primary object copies to other nodes before it goes (idle scale-down,
// a drain; docs/ownership.md "When a node leaves"): for each primary copy in this node's store,
// another alive node with room pulls it over the transfer service and keeps it as its primary
// copy, the object's owner records the new location, and the copy here is deleted. The
// receiving end (Node.pullPrimaries) is here too.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <kj/async.h>
#include <kj/timer.h>

#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "common/status.h"
#include "objectstore/object_store.h"
#include "objectstore/transfer.h"
#include "worker/internal/head_session.h"
#include "worker/internal/resource_report.h"

namespace capnp {
class EzRpcClient;
}

namespace airt::worker {

// A node an evacuation may send objects to: alive, and not the leaving node.
struct EvacuationTarget {
  std::string node_address;      // its Node service, host:port
  std::string transfer_address;  // its transfer service, host:port
  uint64_t free_bytes = 0;       // free in its store's arena, as its last heartbeat said
};

struct EvacuationFailure {
  ObjectId id;
  std::string reason;  // names the object's node, owner or destination, and what went wrong
};

// What Evacuate did (Node.evacuateObjects' answer).
struct EvacuationOutcome {
  uint64_t moved = 0;         // primary copies now on another node, their owners told
  uint64_t unreferenced = 0;  // left here: their owners reference them no more
  std::vector<EvacuationFailure> failed;  // left here, untouched
};

// The alive nodes of a cluster view, less the one whose Node service is `self` and those in
// `avoid` (Node service addresses).
std::vector<EvacuationTarget> EvacuationTargets(capnp::List<proto::NodeStatus>::Reader nodes,
                                                const std::string& self,
                                                const std::vector<std::string>& avoid = {});

// Where each object goes: the index into `targets` of the one with the most room left that holds
// it (placing the largest objects first, counting what is sent to each node already), or -1 when
// no target has room for it. Pure.
std::vector<int> PlanEvacuation(std::span<const objectstore::PrimaryCopy> objects,
                                std::span<const EvacuationTarget> targets);

// What a node's heartbeat says: `leases`' report, plus its store's primary copies and free bytes
// (a short blocking call to the store; a store that does not answer reports none).
class StoreAwareReport final : public ResourceReporter {
 public:
  StoreAwareReport(const ResourceReporter& leases, objectstore::StoreClient& store)
      : leases_(leases), store_(store) {}
  ResourceReport Report() const override;

 private:
  const ResourceReporter& leases_;
  objectstore::StoreClient& store_;
};

struct ObjectEvacuatorOptions {
  std::string node_address;      // this node's Node service, host:port
  std::string transfer_address;  // this node's transfer service, host:port
};

// Event-loop confined (the node's EzRpc loop, which its RPC clients share); `store`, `head` and
// `timer` must outlive it. Destroying it cancels an evacuation in flight (nothing stored is lost:
// a copy here is deleted only after its owner took the new location) and joins the threads of
// pulls in flight.
class ObjectEvacuator final : private kj::TaskSet::ErrorHandler {
 public:
  ObjectEvacuator(ObjectEvacuatorOptions options, objectstore::StoreClient& store,
                  HeadConnector& head, kj::Timer& timer);
  ~ObjectEvacuator();
  ObjectEvacuator(const ObjectEvacuator&) = delete;
  ObjectEvacuator& operator=(const ObjectEvacuator&) = delete;

  // Moves every primary copy here that an owner still references (Node.evacuateObjects), within
  // `deadline` for the whole run; an object left when it passes fails with a reason saying so.
  // A call while a run is in flight joins it (two runs would move the same objects twice). A
  // failure (the head, an owner or a destination unreachable) is the failure of the objects it
  // concerns; rejects only when this node's store cannot list its primary copies. Objects go to
  // no node in `avoid` (Node service addresses: other nodes leaving too; a joining call's list
  // is not added to the run's).
  kj::Promise<EvacuationOutcome> Evacuate(kj::Duration deadline,
                                          std::vector<std::string> avoid = {});

  // The receiving end (Node.pullPrimaries): pulls `ids` from the transfer service at `from` into
  // this node's store and makes each the primary copy owned by `owners[i]`. One error per
  // object, "" when it is here now as a primary copy. The pull runs on a thread of its own (the
  // puller waits); the promise resolves on this loop.
  kj::Promise<std::vector<std::string>> PullPrimaries(std::string from, std::vector<ObjectId> ids,
                                                      std::vector<std::string> owners,
                                                      kj::Duration timeout);

 private:
  struct Run;
  struct PullThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  kj::Promise<EvacuationOutcome> Start(kj::Duration deadline, std::vector<std::string> avoid);
  // Sends the run's objects to `targets` as PlanEvacuation places them (Node.pullPrimaries).
  kj::Promise<void> Send(std::shared_ptr<Run> run, std::vector<EvacuationTarget> targets);
  // `arrived` is on `target` now: tells the owners, and deletes the copies here they took.
  kj::Promise<void> Tell(std::shared_ptr<Run> run, EvacuationTarget target,
                         std::vector<objectstore::PrimaryCopy> arrived);
  void taskFailed(kj::Exception&& exception) override;
  // A client of the Node or Owner service at `address`, one connection per address for the
  // evacuator's life (a broken one is dialled again by the next run).
  capnp::EzRpcClient& Dial(const std::string& address);

  ObjectEvacuatorOptions options_;
  objectstore::StoreClient& store_;
  HeadConnector& head_;
  kj::Timer& timer_;
  std::unique_ptr<objectstore::ObjectPuller> puller_;  // at the first PullPrimaries
  std::vector<PullThread> pulls_;  // finished ones joined at the next pull and at destruction
  std::vector<std::pair<std::string, std::unique_ptr<capnp::EzRpcClient>>> peers_;
  kj::Maybe<kj::ForkedPromise<EvacuationOutcome>> running_;
  kj::TaskSet cleanup_;  // frees of refused copies; forgetting a finished run
};

}  // namespace airt::worker
