// HeadServer's drainNode (cluster.capnp; docs/cluster.md "Draining a node"): the head marks the
// node draining in its node table (clusterView shows it; actor and bundle placement leave it
// out) and tells the node, which stops taking leases and leaves once its work is done or its
// deadline passed.
#include <algorithm>
#include <memory>
#include <string>

#include "common/logging.h"
#include "common/rpc_status.h"
#include "head/head.h"
#include "head/internal/node_connector.h"
#include "head/internal/node_table.h"
#include "head/internal/wire.h"

namespace airt::head {
namespace {

constexpr uint64_t kDefaultDrainTimeoutMs = 10 * 60 * 1000;
constexpr uint64_t kMaxDrainTimeoutMs = 7ull * 24 * 3600 * 1000;
constexpr size_t kMaxDrainReasonBytes = 4096;
constexpr std::string_view kDefaultDrainReason = "drained by airt drain";

}  // namespace

kj::Promise<void> HeadServer::drainNode(DrainNodeContext context) {
  auto params = context.getParams();
  Result<NodeId> id = internal::ParseNodeId(params.getNodeId(), "nodeId");
  if (!id.ok()) return ToKjException(id.status());
  Result<std::string> reason =
      internal::ParseText(params.getReason(), "reason", kMaxDrainReasonBytes, true);
  if (!reason.ok()) return ToKjException(reason.status());
  if (reason->empty()) *reason = kDefaultDrainReason;
  uint64_t timeout = params.getTimeoutMs() == 0 ? kDefaultDrainTimeoutMs : params.getTimeoutMs();
  if (timeout > kMaxDrainTimeoutMs) {
    return ToKjException(InvalidArgument("timeoutMs " + std::to_string(timeout) +
                                         " is more than the 7 days allowed"));
  }
  std::optional<internal::NodeView> node = nodes_->Find(*id);
  if (!node) return ToKjException(NotFound("node " + id->Hex() + " is not registered"));
  if (node_connector_ == nullptr) {
    return ToKjException(Unavailable("the head has no connection to its nodes"));
  }
  uint64_t now = static_cast<uint64_t>(std::max<int64_t>(0, clock_.WallMs()));
  // The mark is in the node's row before the node is told, so a restarted head still has it.
  auto deadline = std::make_shared<uint64_t>(0);
  kj::Promise<Status> marked =
      Commit([this, id = *id, reason = *reason, until = now + timeout,
              deadline]() -> Result<internal::Change> {
        AIRT_ASSIGN_OR_RETURN(internal::Staged<uint64_t> staged,
                              nodes_->StartDrain(id, reason, until));
        *deadline = staged.value;
        return std::move(staged.change);
      });
  bool was_draining = node->draining;
  std::string address = node->info.address + ":" + std::to_string(node->info.node_port);
  return marked.then([this, context, id = *id, reason = *reason, address, was_draining, now,
                      deadline](Status status) mutable -> kj::Promise<void> {
    if (!status.ok()) return ToKjException(status);
    auto request = node_connector_->Connect(address).drainRequest();
    request.setReason(reason);
    request.setTimeoutMs(std::max<uint64_t>(1, *deadline > now ? *deadline - now : 1));
    return request.send().ignoreResult().then(
        [context, deadline]() mutable -> kj::Promise<void> {
          context.getResults().setDeadlineMs(*deadline);
          return kj::READY_NOW;
        },
        [this, id, address, was_draining](kj::Exception&& e) -> kj::Promise<void> {
          Status status = FromKjException(e);
          if (status.code() == Code::kUnavailable) node_connector_->Forget(address);
          AIRT_LOG(WARNING) << "draining node " << id.Hex() << ": " << status.ToString();
          Status told = status.WithContext("telling node " + id.Hex() + " at " + address +
                                           " to drain");
          if (was_draining) return ToKjException(told);
          return Commit([this, id]() -> Result<internal::Change> {
                   return nodes_->CancelDrain(id);
                 })
              .then([told](Status) -> kj::Promise<void> { return ToKjException(told); });
        });
  });
}

}  // namespace airt::head
