// The Node service's calls about a leaving node's primary copies (node.capnp evacuateObjects,
// pullPrimaries), forwarded to the ObjectEvacuator.
#include <string>
#include <vector>

#include "common/rpc_status.h"
#include "worker/internal/node_service.h"

namespace airt::worker {
namespace {

constexpr uint64_t kDefaultEvacuationMs = 60'000;
constexpr uint64_t kMaxEvacuationMs = 24ull * 3600 * 1000;
constexpr size_t kMaxPullObjects = 1'000'000;
constexpr size_t kMaxNodeAddressBytes = 512;

kj::Promise<void> Fail(const Status& status) { return ToKjException(status); }

}  // namespace

kj::Promise<void> NodeService::evacuateObjects(EvacuateObjectsContext context) {
  if (target_->evacuator == nullptr) return Fail(Unavailable("the node is not serving (stopping)"));
  uint64_t ms = context.getParams().getDeadlineMs();
  if (ms == 0) ms = kDefaultEvacuationMs;
  if (ms > kMaxEvacuationMs) {
    return Fail(InvalidArgument("deadlineMs: " + std::to_string(ms) + " is over a day"));
  }
  std::vector<std::string> avoid;
  for (auto node : context.getParams().getAvoid()) {
    if (node.size() > kMaxNodeAddressBytes) {
      return Fail(InvalidArgument("avoid: an address of " + std::to_string(node.size()) +
                                  " bytes, over " + std::to_string(kMaxNodeAddressBytes)));
    }
    avoid.push_back(node.cStr());
  }
  context.allowCancellation();
  return target_->evacuator->Evacuate(ms * kj::MILLISECONDS, std::move(avoid))
      .then([context](EvacuationOutcome outcome) mutable {
        auto results = context.getResults();
        results.setMoved(outcome.moved);
        results.setUnreferenced(outcome.unreferenced);
        auto failed = results.initFailed(static_cast<unsigned>(outcome.failed.size()));
        for (size_t i = 0; i < outcome.failed.size(); ++i) {
          auto out = failed[static_cast<unsigned>(i)];
          out.setObjectId(capnp::Data::Reader(outcome.failed[i].id.data(), ObjectId::kSize));
          out.setReason(outcome.failed[i].reason);
        }
      });
}

kj::Promise<void> NodeService::pullPrimaries(PullPrimariesContext context) {
  if (target_->evacuator == nullptr) return Fail(Unavailable("the node is not serving (stopping)"));
  auto params = context.getParams();
  auto objects = params.getObjects();
  auto owners = params.getOwners();
  if (objects.size() != owners.size()) {
    return Fail(InvalidArgument("owners: " + std::to_string(owners.size()) + " owners for " +
                                std::to_string(objects.size()) + " objects"));
  }
  if (objects.size() > kMaxPullObjects) {
    return Fail(InvalidArgument("objects: more than " + std::to_string(kMaxPullObjects)));
  }
  std::string from = params.getFromTransfer().cStr();
  if (from.empty() || from.find(':') == std::string::npos) {
    return Fail(InvalidArgument("fromTransfer: '" + from + "' is not host:port"));
  }
  std::vector<ObjectId> ids;
  std::vector<std::string> owner_list;
  for (unsigned i = 0; i < objects.size(); ++i) {
    Result<ObjectId::BaseId> id = ObjectId::FromBinary(
        std::string_view(reinterpret_cast<const char*>(objects[i].begin()), objects[i].size()));
    if (!id.ok()) {
      return Fail(InvalidArgument("objects[" + std::to_string(i) + "]: " + id.status().message()));
    }
    if (owners[i].size() > objectstore::kMaxOwnerBytes) {
      return Fail(InvalidArgument("owners[" + std::to_string(i) + "]: over " +
                                  std::to_string(objectstore::kMaxOwnerBytes) + " bytes"));
    }
    ids.push_back(ObjectId(*id));
    owner_list.push_back(owners[i].cStr());
  }
  uint64_t ms = std::min<uint64_t>(std::max<uint64_t>(params.getTimeoutMs(), 1), kMaxEvacuationMs);
  return target_->evacuator
      ->PullPrimaries(std::move(from), std::move(ids), std::move(owner_list),
                      ms * kj::MILLISECONDS)
      .then([context](std::vector<std::string> errors) mutable {
        auto list = context.getResults().initErrors(static_cast<unsigned>(errors.size()));
        for (size_t i = 0; i < errors.size(); ++i) list.set(static_cast<unsigned>(i), errors[i]);
      });
}

}  // namespace airt::worker
