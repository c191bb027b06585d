#include "worker/internal/cluster_view_poller.h"

#include <cmath>
#include <string>
#include <utility>

#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::worker {
namespace {

// A view's amounts may be fractional GPUs above 1 (3.5 free of 4), which a request may not ask
// for and ResourceSet::FromDoubles therefore refuses: such an amount is added as its whole part
// plus its fraction.
worker::scheduling::ResourceSet ToResourceSet(capnp::List<proto::Resource>::Reader list) {
  worker::scheduling::ResourceSet set;
  for (auto r : list) {
    std::string name(r.getName().cStr(), r.getName().size());
    double amount = r.getAmount();
    if (!std::isfinite(amount) || amount < 0) continue;
    auto one = worker::scheduling::ResourceSet::FromDoubles({{name, amount}});
    if (one.ok()) {
      set.Add(*one);
      continue;
    }
    double whole = std::floor(amount);
    auto whole_part = worker::scheduling::ResourceSet::FromDoubles({{name, whole}});
    auto fraction = worker::scheduling::ResourceSet::FromDoubles({{name, amount - whole}});
    if (whole_part.ok() && fraction.ok()) {
      set.Add(*whole_part);
      set.Add(*fraction);
    } else {
      AIRT_LOG(DEBUG) << "cluster view: dropped " << name << " " << amount << ": "
                      << one.status().message();
    }
  }
  return set;
}

}  // namespace

RemoteNodes ToRemoteNodes(capnp::List<proto::NodeStatus>::Reader nodes) {
  RemoteNodes out;
  for (auto status : nodes) {
    auto info = status.getInfo();
    auto id_bytes = info.getNodeId();
    Result<NodeId> id = NodeId::FromBinary(
        std::string_view(reinterpret_cast<const char*>(id_bytes.begin()), id_bytes.size()));
    if (!id.ok()) continue;
    worker::scheduling::NodeView view;
    view.id = *id;
    view.alive = status.getAlive();
    view.total = ToResourceSet(info.getTotal());
    view.available = ToResourceSet(status.getAvailable());
    for (auto label : info.getLabels()) view.labels[label.getKey()] = label.getValue();
    out.addresses[*id] =
        std::string(info.getAddress().cStr()) + ":" + std::to_string(info.getNodePort());
    out.view.nodes.push_back(std::move(view));
  }
  return out;
}

ClusterViewPoller::ClusterViewPoller(HeadConnector& connector, kj::Timer& timer,
                                     ClusterViewPollerOptions options,
                                     std::function<void(RemoteNodes)> on_view)
    : connector_(connector), timer_(timer), options_(options), on_view_(std::move(on_view)) {}

ClusterViewPoller::~ClusterViewPoller() { run_ = nullptr; }

void ClusterViewPoller::Start() {
  run_ = kj::evalLater([this] { return Poll(); }).eagerlyEvaluate([](kj::Exception&& e) {
    AIRT_LOG(ERROR) << "cluster view poller stopped: " << FromKjException(e).ToString();
  });
}

kj::Promise<void> ClusterViewPoller::Poll() {
  if (head_ == nullptr) head_ = connector_.Connect();
  auto sent = KJ_ASSERT_NONNULL(head_).clusterViewRequest().send();
  return timer_.timeoutAfter(options_.call_timeout, kj::mv(sent))
      .then(
          [this](capnp::Response<proto::Head::ClusterViewResults>&& reply) {
            ++views_;
            RemoteNodes view = ToRemoteNodes(reply.getNodes());
            for (auto type : reply.getNodeTypes()) {
              worker::scheduling::NodeView node;
              node.alive = false;  // never a spillback target
              node.total = ToResourceSet(type.getTotal());
              for (auto label : type.getLabels()) node.labels[label.getKey()] = label.getValue();
              view.view.node_types.push_back(std::move(node));
            }
            on_view_(std::move(view));
          },
          [this](kj::Exception&& e) {
            ++failures_;
            // The head session logs the head being down; one line here per outage is enough.
            if (failures_ == 1 || failures_ % 100 == 0) {
              AIRT_LOG(WARNING) << "cannot fetch the cluster view (" << failures_
                                << " failures): " << FromKjException(e).ToString();
            }
            head_ = nullptr;  // reconnect on the next tick
          })
      .then([this] { return timer_.afterDelay(options_.interval); })
      .then([this] { return Poll(); });
}

}  // namespace airt::worker
