// HeadServer's demand calls (cluster.capnp requestResources, waitDemand) and the numbering of
// demand changes (docs/autoscaler.md "Demand").
#include <algorithm>
#include <memory>

#include "common/logging.h"
#include "common/rpc_status.h"
#include "head/head.h"
#include "head/internal/actor_table.h"
#include "head/internal/cluster_feed.h"
#include "head/internal/kv_table.h"
#include "head/internal/demand.h"
#include "head/internal/node_table.h"
#include "head/internal/placement_group_manager.h"

namespace airt::head {

internal::DemandRecord HeadServer::CurrentDemand() const {
  std::vector<internal::ActorRecord> waiting;
  for (const auto& [id, since] : placing_since_) {
    if (std::optional<internal::ActorRecord> actor = actors_->Find(id)) {
      waiting.push_back(std::move(*actor));
    }
  }
  return internal::CollectDemand(nodes_->View(), waiting, groups_->Live(), *requested_);
}

void HeadServer::DemandMayHaveChanged() {
  internal::DemandRecord now = CurrentDemand();
  if (demand_version_ > 0 && now == *last_demand_) return;
  *last_demand_ = std::move(now);
  ++demand_version_;
  for (auto& waiter : demand_waiters_) waiter->fulfill();
  demand_waiters_.clear();
}

const std::vector<internal::NodeInfo>& HeadServer::NodeTypes() {
  std::optional<std::string> text = kv_->Get("autoscaler", "node_types");
  std::string now = text.value_or("");
  if (!node_types_ || now != node_types_text_) {
    node_types_ = std::make_shared<std::vector<internal::NodeInfo>>(internal::ParseNodeTypes(now));
    node_types_text_ = std::move(now);
  }
  return *node_types_;
}

Status HeadServer::LoadResourceRequest() {
  AIRT_ASSIGN_OR_RETURN(std::optional<std::string> row,
                        store_.Get(internal::kResourceRequestKey));
  if (!row) return Status::Ok();
  Result<internal::ResourceRequest> request = internal::DecodeResourceRequestRow(*row);
  if (!request.ok()) {
    AIRT_LOG(ERROR) << "skipping metadata row '" << internal::kResourceRequestKey
                    << "': " << request.status().message();
    return Status::Ok();
  }
  *requested_ = std::move(*request);
  return Status::Ok();
}

kj::Promise<void> HeadServer::requestResources(RequestResourcesContext context) {
  Result<internal::ResourceRequest> request =
      internal::ParseResourceRequest(context.getParams());
  if (!request.ok()) return ToKjException(request.status());
  // Written to the store (an empty request deletes the row), so a restarted head keeps it.
  return Commit([this, request = std::move(*request)]() mutable -> Result<internal::Change> {
           internal::Change change;
           change.what = "recording the request_resources call";
           if (request.bundles.empty()) {
             change.rows.Delete(std::string(internal::kResourceRequestKey));
           } else {
             change.rows.Put(std::string(internal::kResourceRequestKey),
                             internal::EncodeResourceRequestRow(request));
           }
           change.on_written.push_back(
               [this, request = std::move(request)] { *requested_ = request; });
           return change;
         })
      .then([this](Status status) -> kj::Promise<void> {
        if (!status.ok()) return ToKjException(status);
        DemandMayHaveChanged();
        return kj::READY_NOW;
      });
}

kj::Promise<void> HeadServer::waitDemand(WaitDemandContext context) {
  // A caller that goes away (its call dropped, its connection closed) takes its waiter along.
  context.allowCancellation();
  if (demand_version_ == 0) DemandMayHaveChanged();
  uint64_t since = context.getParams().getSinceVersion();
  if (demand_version_ > since) {
    internal::FillDemand(*last_demand_, demand_version_, context.getResults().initDemand());
    return kj::READY_NOW;
  }
  std::erase_if(demand_waiters_, [](auto& w) { return !w->isWaiting(); });
  auto paf = kj::newPromiseAndFulfiller<void>();
  demand_waiters_.push_back(kj::mv(paf.fulfiller));
  return paf.promise.then([this, context]() mutable {
    internal::FillDemand(*last_demand_, demand_version_, context.getResults().initDemand());
  });
}

}  // namespace airt::head

namespace airt::head {

HeadServer::WaitersSnapshot HeadServer::Waiters() {
  WaitersSnapshot out;
  std::erase_if(demand_waiters_, [](auto& w) { return !w->isWaiting(); });
  out.demand = demand_waiters_.size();
  out.placement_groups = groups_->Waiting();
  out.cluster_changes = feed_->snapshot().waiters;
  for (const auto& [id, kept] : kept_) out.actors_watched += kept.watched ? 1 : 0;
  return out;
}

}  // namespace airt::head
