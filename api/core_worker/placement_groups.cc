// The core worker's placement-group calls: the head's createPlacementGroup, removePlacementGroup,
// listPlacementGroups and waitPlacementGroup, from any user thread.
#include "api/core_worker/core_worker.h"
#include "api/core_worker/core_worker_impl.h"
#include "common/rpc_status.h"
#include "common/strategy_wire.h"

namespace airt::core_worker {
namespace {

capnp::Data::Reader Bytes(const uint8_t* data, size_t size) { return {data, size}; }

template <typename Id>
Id IdOf(capnp::Data::Reader bytes) {
  Result<Id> id =
      Id::FromBinary(std::string_view(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
  return id.ok() ? *id : Id::Nil();
}

CoreWorker::PlacementGroupView ViewOf(proto::PlacementGroupInfo::Reader info) {
  CoreWorker::PlacementGroupView view;
  view.id = IdOf<PlacementGroupId>(info.getGroupId());
  view.name = info.getName().cStr();
  view.ns = info.getNamespace().cStr();
  view.job = IdOf<JobId>(info.getJobId());
  view.strategy = static_cast<int>(info.getStrategy());
  for (auto bundle : info.getBundles()) {
    std::map<std::string, double> resources;
    for (auto r : bundle.getResources()) resources[r.getName().cStr()] = r.getAmount();
    view.bundles.push_back(std::move(resources));
  }
  view.state = static_cast<int>(info.getState());
  for (auto node : info.getBundleNodes()) view.bundle_nodes.push_back(IdOf<NodeId>(node));
  view.detached = info.getDetached();
  view.pending_reason = info.getPendingReason().cStr();
  view.infeasible = info.getInfeasible();
  return view;
}

}  // namespace

Result<PlacementGroupId> CoreWorker::Impl::CreatePlacementGroup(
    const CoreWorker::PlacementGroupSpec& spec) {
  if (spec.strategy < 0 || spec.strategy > 3) {
    return InvalidArgument("placement strategy " + std::to_string(spec.strategy) +
                           " is not PACK, SPREAD, STRICT_PACK or STRICT_SPREAD");
  }
  PlacementGroupId id;
  Status created = CatchKj([&] {
    OnLoop([&] {
      auto request = Head().createPlacementGroupRequest();
      auto info = request.initInfo();
      info.setName(spec.name);
      info.setNamespace(namespace_);
      info.setJobId(Bytes(job_id_.data(), JobId::kSize));
      info.setStrategy(static_cast<proto::PlacementStrategy>(spec.strategy));
      info.setDetached(spec.detached);
      auto bundles = info.initBundles(spec.bundles.size());
      for (size_t i = 0; i < spec.bundles.size(); ++i) {
        auto list = bundles[i].initResources(spec.bundles[i].size());
        size_t j = 0;
        for (const auto& [name, amount] : spec.bundles[i]) {
          list[j].setName(name);
          list[j++].setAmount(amount);
        }
      }
      auto selectors = info.initBundleLabelSelector(spec.bundle_label_selector.size());
      for (size_t i = 0; i < spec.bundle_label_selector.size(); ++i) {
        const sched::LabelSelector& selector = spec.bundle_label_selector[i];
        WriteLabelSelector(selector, selectors[i].initExpressions(selector.size()));
      }
      return request.send().then(
          [&](auto reply) { id = IdOf<PlacementGroupId>(reply.getGroupId()); });
    });
  });
  if (!created.ok()) return created;
  return id;
}

Status CoreWorker::Impl::RemovePlacementGroup(const PlacementGroupId& id) {
  return CatchKj([&] {
    OnLoop([&] {
      auto request = Head().removePlacementGroupRequest();
      request.setGroupId(Bytes(id.data(), PlacementGroupId::kSize));
      return request.send().ignoreResult();
    });
  });
}

Result<std::vector<CoreWorker::PlacementGroupView>> CoreWorker::Impl::ListPlacementGroups() {
  std::vector<CoreWorker::PlacementGroupView> out;
  Status listed = CatchKj([&] {
    OnLoop([&] {
      return Head().listPlacementGroupsRequest().send().then([&](auto reply) {
        for (auto info : reply.getGroups()) out.push_back(ViewOf(info));
      });
    });
  });
  if (!listed.ok()) return listed;
  return out;
}

Result<bool> CoreWorker::Impl::WaitPlacementGroup(const PlacementGroupId& id, int64_t timeout_ms) {
  bool ready = false;
  Status waited = CatchKj([&] {
    OnLoop([&] {
      auto request = Head().waitPlacementGroupRequest();
      request.setGroupId(Bytes(id.data(), PlacementGroupId::kSize));
      kj::Promise<void> done = request.send().then([&](auto) { ready = true; });
      if (timeout_ms < 0) return done;
      return done.exclusiveJoin(
          loop_->io.provider->getTimer().afterDelay(timeout_ms * kj::MILLISECONDS));
    });
  });
  if (!waited.ok()) return waited;
  return ready;
}

Result<PlacementGroupId> CoreWorker::CreatePlacementGroup(const PlacementGroupSpec& spec) {
  return impl_->CreatePlacementGroup(spec);
}
Status CoreWorker::RemovePlacementGroup(const PlacementGroupId& id) {
  return impl_->RemovePlacementGroup(id);
}
Result<std::vector<CoreWorker::PlacementGroupView>> CoreWorker::ListPlacementGroups() {
  return impl_->ListPlacementGroups();
}
Result<bool> CoreWorker::WaitPlacementGroup(const PlacementGroupId& id, int64_t timeout_ms) {
  return impl_->WaitPlacementGroup(id, timeout_ms);
}

}  // namespace airt::core_worker
