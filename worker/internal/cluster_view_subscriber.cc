#include "worker/internal/cluster_view_subscriber.h"

#include <algorithm>
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

// One NodeStatus as the lease manager wants it; false for a bad id.
bool ToNode(proto::NodeStatus::Reader status, NodeId& id, worker::scheduling::NodeView& view,
            std::string& address) {
  auto info = status.getInfo();
  auto id_bytes = info.getNodeId();
  Result<NodeId> parsed = NodeId::FromBinary(
      std::string_view(reinterpret_cast<const char*>(id_bytes.begin()), id_bytes.size()));
  if (!parsed.ok()) return false;
  id = *parsed;
  view = worker::scheduling::NodeView{};
  view.id = id;
  // A draining node takes no spillback: it is no target.
  view.alive = status.getAlive() && !status.getDraining();
  view.total = ToResourceSet(info.getTotal());
  view.available = ToResourceSet(status.getAvailable());
  for (auto label : info.getLabels()) view.labels[label.getKey()] = label.getValue();
  address = std::string(info.getAddress().cStr()) + ":" + std::to_string(info.getNodePort());
  return true;
}

// The autoscaler's node types: never spillback targets.
std::vector<worker::scheduling::NodeView> ToNodeTypes(capnp::List<proto::NodeInfo>::Reader types) {
  std::vector<worker::scheduling::NodeView> out;
  for (auto type : types) {
    worker::scheduling::NodeView node;
    node.alive = false;
    node.total = ToResourceSet(type.getTotal());
    for (auto label : type.getLabels()) node.labels[label.getKey()] = label.getValue();
    out.push_back(std::move(node));
  }
  return out;
}

constexpr kj::Duration kFirstBackoff = 50 * kj::MILLISECONDS;

}  // namespace

RemoteNodes ToRemoteNodes(capnp::List<proto::NodeStatus>::Reader nodes) {
  RemoteNodes out;
  for (auto status : nodes) {
    NodeId id;
    worker::scheduling::NodeView view;
    std::string address;
    if (!ToNode(status, id, view, address)) continue;
    out.addresses[id] = std::move(address);
    out.view.nodes.push_back(std::move(view));
  }
  return out;
}

ClusterViewSubscriber::ClusterViewSubscriber(HeadConnector& connector, kj::Timer& timer,
                                             ClusterViewSubscriberOptions options,
                                             std::function<void(RemoteNodes)> on_view)
    : connector_(connector),
      timer_(timer),
      options_(options),
      on_view_(std::move(on_view)),
      backoff_(kFirstBackoff) {}

ClusterViewSubscriber::~ClusterViewSubscriber() { run_ = nullptr; }

void ClusterViewSubscriber::Start() {
  run_ = kj::evalLater([this] { return Next(); }).eagerlyEvaluate([](kj::Exception&& e) {
    AIRT_LOG(ERROR) << "cluster view subscription stopped: " << FromKjException(e).ToString();
  });
}

bool ClusterViewSubscriber::Apply(proto::ClusterChange::Reader change) {
  bool changed = change.getFull() || change.getVersion() != version_;
  if (change.getFull()) nodes_.clear();
  for (auto status : change.getNodes()) {
    Known known;
    if (!ToNode(status, known.id, known.view, known.address)) continue;
    auto same = std::find_if(nodes_.begin(), nodes_.end(),
                             [&](const Known& k) { return k.id == known.id; });
    if (same == nodes_.end()) {
      nodes_.push_back(std::move(known));
    } else {
      *same = std::move(known);
    }
  }
  node_types_ = ToNodeTypes(change.getNodeTypes());
  epoch_ = change.getEpoch();
  version_ = change.getVersion();
  return changed;
}

void ClusterViewSubscriber::HandOn() {
  ++views_;
  RemoteNodes view;
  for (const Known& k : nodes_) {
    view.addresses[k.id] = k.address;
    view.view.nodes.push_back(k.view);
  }
  view.view.node_types = node_types_;
  on_view_(std::move(view));
}

kj::Promise<void> ClusterViewSubscriber::Failed(kj::Exception&& e) {
  ++failures_;
  // The head session logs the head being down; one line here per outage is enough.
  if (failures_ == 1 || failures_ % 100 == 0) {
    AIRT_LOG(WARNING) << "cannot follow the cluster view (" << failures_
                      << " failures): " << FromKjException(e).ToString();
  }
  head_ = nullptr;  // a new connection next time
  kj::Duration wait = backoff_;
  backoff_ = std::min(backoff_ * 2, options_.retry);
  return timer_.afterDelay(wait);
}

kj::Promise<void> ClusterViewSubscriber::Next() {
  if (polling_) return Poll();
  if (head_ == nullptr) head_ = connector_.Connect();
  auto request = KJ_ASSERT_NONNULL(head_).waitClusterChangeRequest();
  request.setEpoch(epoch_);
  request.setSinceVersion(version_);
  request.setMembershipOnly(false);
  request.setMaxWaitMs(options_.max_wait_ms);
  kj::Duration limit = options_.max_wait_ms * kj::MILLISECONDS + options_.call_timeout + kj::SECONDS;
  return timer_.timeoutAfter(limit, request.send())
      .then(
          [this](capnp::Response<proto::Head::WaitClusterChangeResults>&& reply)
              -> kj::Promise<void> {
            backoff_ = kFirstBackoff;
            if (Apply(reply.getChange()) || views_ == 0) HandOn();
            if (options_.min_interval == 0 * kj::MILLISECONDS) return kj::READY_NOW;
            return timer_.afterDelay(options_.min_interval);
          },
          [this](kj::Exception&& e) -> kj::Promise<void> {
            if (e.getType() == kj::Exception::Type::UNIMPLEMENTED) {
              AIRT_LOG(INFO) << "the head has no cluster change feed (waitClusterChange); "
                                "polling its cluster view instead";
              polling_ = true;
              return kj::READY_NOW;
            }
            return Failed(kj::mv(e));
          })
      .then([this] { return Next(); });
}

kj::Promise<void> ClusterViewSubscriber::Poll() {
  if (head_ == nullptr) head_ = connector_.Connect();
  auto sent = KJ_ASSERT_NONNULL(head_).clusterViewRequest().send();
  return timer_.timeoutAfter(options_.call_timeout, kj::mv(sent))
      .then(
          [this](capnp::Response<proto::Head::ClusterViewResults>&& reply) -> kj::Promise<void> {
            nodes_.clear();
            for (auto status : reply.getNodes()) {
              Known known;
              if (ToNode(status, known.id, known.view, known.address)) {
                nodes_.push_back(std::move(known));
              }
            }
            node_types_ = ToNodeTypes(reply.getNodeTypes());
            HandOn();
            return timer_.afterDelay(options_.retry);
          },
          [this](kj::Exception&& e) { return Failed(kj::mv(e)); })
      .then([this] { return Poll(); });
}

}  // namespace airt::worker
