// HeadServer's placement-group calls (cluster.capnp createPlacementGroup ... waitPlacementGroup):
// the edge of internal::PlacementGroupManager.
#include <memory>

#include "common/rpc_status.h"
#include "head/head.h"
#include "head/internal/placement_group_manager.h"

namespace airt::head {
namespace {

Result<PlacementGroupId> ParseGroupId(capnp::Data::Reader bytes) {
  Result<PlacementGroupId> id = PlacementGroupId::FromBinary(
      std::string_view(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
  if (!id.ok()) return InvalidArgument("groupId: " + id.status().message());
  return id;
}

}  // namespace

kj::Promise<void> HeadServer::createPlacementGroup(CreatePlacementGroupContext context) {
  Result<internal::PlacementGroupRecord> spec =
      internal::ParsePlacementGroupSpec(context.getParams().getInfo());
  if (!spec.ok()) return ToKjException(spec.status());
  auto id = std::make_shared<PlacementGroupId>();
  return groups_->Create(std::move(*spec), id).then([this, context, id](Status s) mutable
                                                    -> kj::Promise<void> {
    DemandMayHaveChanged();
    if (!s.ok()) return ToKjException(s);
    context.getResults().setGroupId(capnp::Data::Reader(id->data(), PlacementGroupId::kSize));
    return kj::READY_NOW;
  });
}

kj::Promise<void> HeadServer::removePlacementGroup(RemovePlacementGroupContext context) {
  Result<PlacementGroupId> id = ParseGroupId(context.getParams().getGroupId());
  if (!id.ok()) return ToKjException(id.status());
  return groups_->Remove(*id).then([this](Status s) -> kj::Promise<void> {
    DemandMayHaveChanged();
    if (!s.ok()) return ToKjException(s);
    return kj::READY_NOW;
  });
}

kj::Promise<void> HeadServer::listPlacementGroups(ListPlacementGroupsContext context) {
  std::vector<internal::PlacementGroupRecord> groups = groups_->List();
  auto out = context.getResults().initGroups(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) internal::FillPlacementGroupInfo(groups[i], out[i]);
  return kj::READY_NOW;
}

kj::Promise<void> HeadServer::waitPlacementGroup(WaitPlacementGroupContext context) {
  // A caller that goes away (its call dropped, its connection closed) takes its waiter along.
  context.allowCancellation();
  Result<PlacementGroupId> id = ParseGroupId(context.getParams().getGroupId());
  if (!id.ok()) return ToKjException(id.status());
  return groups_->Wait(*id).then([context](internal::PlacementGroupRecord group) mutable {
    internal::FillPlacementGroupInfo(group, context.getResults().initInfo());
  });
}

}  // namespace airt::head
