// The node's Cap'n Proto service (common/proto/node.capnp, interface Node): the edge where lease
// requests, lease returns, worker registrations and kills enter the node. Every field is validated
// here (a bad one is kInvalidArgument naming the field as the schema spells it, e.g.
// "shape.resources[1].amount"), then handed to the LeaseManager; errors travel as kj::Exceptions
// carrying a Status (common/rpc_status.h).
#pragma once

#include <memory>
#include <string_view>

#include "common/proto/node.capnp.h"
#include "common/status.h"
#include "objectstore/object_store.h"
#include "worker/internal/gpu_monitor.h"
#include "worker/internal/lease_manager.h"
#include "worker/internal/log_streamer.h"
#include "worker/internal/node_drain.h"
#include "worker/internal/object_evacuator.h"

namespace airt::worker {

// Bounds on what the node accepts.
inline constexpr size_t kMaxShapeResources = 256;
inline constexpr size_t kMaxHostBytes = 256;
inline constexpr size_t kMaxCodeSearchPathBytes = 64 << 10;

// Where a NodeService sends calls. The service is owned by the RPC system and may outlive the
// lease manager, so the node sets `leases` once the manager exists and clears it before the
// manager goes (and `logs` likewise for the log streamer); calls meanwhile fail with
// kUnavailable. Event-loop confined.
struct NodeServiceTarget {
  LeaseManager* leases = nullptr;
  LogStreamer* logs = nullptr;
  objectstore::StoreClient* store = nullptr;  // the node's own client of its store
  GpuMonitor* gpus = nullptr;                 // the node's GPU health
  NodeDrain* drain = nullptr;                 // the node's drain (Node.drain)
  ObjectEvacuator* evacuator = nullptr;       // moving primary copies off a leaving node
};

// The edge's parsing, exposed for tests.
Result<LeaseAsk> ParseLeaseAsk(proto::Node::RequestWorkerLeaseParams::Reader params);
Result<WorkerAddress> ParseWorkerAddress(proto::WorkerAddress::Reader address,
                                         std::string_view field);
void FillLeaseReply(const LeaseOutcome& outcome, proto::LeaseReply::Builder reply);
// A placement group's id (18 bytes) and its bundles (indices below 4096, listed once; amounts
// as a lease shape's).
Result<PlacementGroupId> ParseGroupId(capnp::Data::Reader bytes);
Result<std::vector<BundleAsk>> ParseBundles(capnp::List<proto::BundleSpec>::Reader bundles);

class NodeService final : public proto::Node::Server {
 public:
  explicit NodeService(std::shared_ptr<NodeServiceTarget> target) : target_(std::move(target)) {}

 protected:
  // Dropping the call (the client cancels or disconnects) cancels the request.
  kj::Promise<void> requestWorkerLease(RequestWorkerLeaseContext context) override;
  kj::Promise<void> returnWorkerLease(ReturnWorkerLeaseContext context) override;
  kj::Promise<void> registerWorker(RegisterWorkerContext context) override;
  // kInvalidArgument: a malformed jobId.
  kj::Promise<void> subscribeLogs(SubscribeLogsContext context) override;
  // kInvalidArgument: a malformed workerId.
  kj::Promise<void> killWorker(KillWorkerContext context) override;
  kj::Promise<void> notifyWorkerBlocked(NotifyWorkerBlockedContext context) override;
  // kInvalidArgument: a malformed id (the ids before it are freed).
  kj::Promise<void> freeObjects(FreeObjectsContext context) override;
  // Placement groups (node_service_bundles.cc). kInvalidArgument: a malformed groupId or bundle.
  kj::Promise<void> prepareBundles(PrepareBundlesContext context) override;
  kj::Promise<void> commitBundles(CommitBundlesContext context) override;
  kj::Promise<void> cancelBundles(CancelBundlesContext context) override;
  kj::Promise<void> gpuHealth(GpuHealthContext context) override;
  // kNotFound, kFailedPrecondition: as GpuMonitor::Return.
  kj::Promise<void> returnGpu(ReturnGpuContext context) override;
  // kInvalidArgument: a malformed workerId.
  kj::Promise<void> workerExitReason(WorkerExitReasonContext context) override;
  // kInvalidArgument: a zero timeoutMs or a bad reason; others as NodeDrain::Start.
  kj::Promise<void> drain(DrainContext context) override;
  // A leaving node's primary copies (node_service_objects.cc, ObjectEvacuator).
  // kInvalidArgument: a malformed id, owners not one per object, an owner too long.
  kj::Promise<void> evacuateObjects(EvacuateObjectsContext context) override;
  kj::Promise<void> pullPrimaries(PullPrimariesContext context) override;

 private:
  Result<LeaseManager*> Leases() const;

  std::shared_ptr<NodeServiceTarget> target_;
};

}  // namespace airt::worker
