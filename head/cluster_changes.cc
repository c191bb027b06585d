// HeadServer's cluster change feed (cluster.capnp waitClusterChange, docs/cluster.md "Cluster
// changes"): what it publishes, and the long-poll that answers with it.
#include <random>

#include "head/head.h"
#include "head/internal/cluster_feed.h"
#include "head/internal/kv_table.h"
#include "head/internal/node_table.h"
#include "head/internal/placement_group_manager.h"
#include "head/internal/wire.h"

namespace airt::head {
namespace internal {

uint64_t NewFeedEpoch() {
  std::random_device random;
  uint64_t epoch = 0;
  while (epoch == 0) epoch = (uint64_t{random()} << 32) ^ random();
  return epoch;
}

}  // namespace internal

namespace {

void FillClusterChange(const internal::ClusterFeed::Delta& delta,
                       proto::ClusterChange::Builder out) {
  out.setEpoch(delta.epoch);
  out.setVersion(delta.version);
  out.setFull(delta.full);
  auto nodes = out.initNodes(delta.nodes.size());
  for (size_t i = 0; i < delta.nodes.size(); ++i) {
    internal::FillNodeStatus(delta.nodes[i], nodes[i]);
  }
  auto types = out.initNodeTypes(delta.types.size());
  for (size_t i = 0; i < delta.types.size(); ++i) internal::FillNodeInfo(delta.types[i], types[i]);
}

}  // namespace

void HeadServer::ClusterMayHaveChanged() {
  feed_->Publish(groups_->WithBundleResources(nodes_->View()), NodeTypes());
}

void HeadServer::NodeMayHaveChanged(const NodeId& id) {
  std::optional<internal::NodeView> node = nodes_->Find(id);
  if (!node) return;
  std::vector<internal::NodeView> one = groups_->WithBundleResources({std::move(*node)});
  if (!feed_->PublishNode(one.front())) ClusterMayHaveChanged();
}

HeadServer::FeedSnapshot HeadServer::ClusterFeedSnapshot() const {
  internal::ClusterFeed::Snapshot s = feed_->snapshot();
  return FeedSnapshot{s.epoch, s.version, s.membership_version, s.nodes, s.waiters};
}

kj::Promise<void> HeadServer::waitClusterChange(WaitClusterChangeContext context) {
  // A caller that goes away (its call dropped, its connection closed) takes its waiter along.
  context.allowCancellation();
  auto params = context.getParams();
  uint64_t epoch = params.getEpoch();
  uint64_t since = params.getSinceVersion();
  uint32_t max_wait_ms = params.getMaxWaitMs();
  int64_t deadline = max_wait_ms == 0 ? 0 : clock_.MonotonicMs() + max_wait_ms;
  return feed_->Wait(epoch, since, params.getMembershipOnly(), deadline)
      .then([this, context, epoch, since]() mutable {
        FillClusterChange(feed_->Since(epoch, since), context.getResults().initChange());
      });
}

}  // namespace airt::head
