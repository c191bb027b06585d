// Evacuating an idle node before the autoscaler stops it (docs/autoscaler.md "Idle
// scale-down"): its primary object copies are moved to other nodes (Node.evacuateObjects), and
// the node is stopped only once they all are; one whose objects cannot all be moved is spared.
#include <algorithm>

#include <capnp/rpc-twoparty.h>

#include "autoscaler/autoscaler.h"
#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::autoscaler {

void Autoscaler::EvacuateThenStop(const NodeNow& node, const Stop& stop,
                                  std::vector<std::string> leaving, int64_t now) {
  std::string count = std::to_string(node.primary_objects);
  if (options_.nodes == nullptr) {
    return Spare(node.id,
                 "idle with " + count +
                     " primary objects, and this autoscaler cannot reach nodes to move them",
                 now);
  }
  AIRT_LOG(INFO) << "autoscaler: node " << node.id.substr(0, 8) << " is idle with " << count
                 << " primary objects: moving them to other nodes before it stops";
  evacuating_[node.id] = node.node_address;
  auto request = options_.nodes->Connect(node.node_address).evacuateObjectsRequest();
  request.setDeadlineMs(static_cast<uint64_t>(std::max<int64_t>(options_.evacuation_deadline_ms, 1)));
  leaving.erase(std::remove(leaving.begin(), leaving.end(), node.node_address), leaving.end());
  auto avoid = request.initAvoid(static_cast<unsigned>(leaving.size()));
  for (size_t i = 0; i < leaving.size(); ++i) avoid.set(static_cast<unsigned>(i), leaving[i]);
  detached_.add(request.send().then(
      [this, stop, address = node.node_address](auto reply) {
        evacuating_.erase(stop.id);
        int64_t at = now_ms_();
        auto failed = reply.getFailed();
        if (failed.size() > 0) {
          return Spare(stop.id,
                       "idle, but " + std::to_string(failed.size()) +
                           " of its primary objects could not be moved (first: " +
                           std::string(failed[0].getReason().cStr()) + "); tried again in " +
                           std::to_string(options_.evacuation_retry_ms) + " ms",
                       at);
        }
        // Busy again meanwhile (a round saw a lease, an actor or a bundle): kept.
        if (idle_since_.count(stop.id) == 0) return;
        Stop moved = stop;
        moved.reason += "; " + std::to_string(reply.getMoved()) +
                        " primary objects moved to other nodes first";
        if (reply.getUnreferenced() > 0) {
          moved.reason += " (" + std::to_string(reply.getUnreferenced()) + " unreferenced left)";
        }
        StopNode(moved, address, at);
      },
      [this, stop](kj::Exception&& e) {
        evacuating_.erase(stop.id);
        Spare(stop.id,
              "idle, but evacuating its primary objects failed (" + FromKjException(e).ToString() +
                  "); tried again in " + std::to_string(options_.evacuation_retry_ms) + " ms",
              now_ms_());
      }));
  (void)now;
}

namespace {

// Node connections over TCP, each kept while the next few are made (an evacuation's call is
// answered by then).
class TcpNodeConnector final : public NodeConnector {
 public:
  explicit TcpNodeConnector(kj::Network& network) : network_(network) {}

  proto::Node::Client Connect(const std::string& address) override {
    auto colon = address.rfind(':');
    if (colon == std::string::npos) {
      return capnp::Capability::Client(
                 ToKjException(InvalidArgument("node address '" + address + "' is not host:port")))
          .castAs<proto::Node>();
    }
    auto conn = kj::heap<Connection>();
    Connection* raw = conn.get();
    if (connections_.size() >= kKept) connections_.erase(connections_.begin());
    connections_.push_back(kj::mv(conn));
    return capnp::Capability::Client(
               network_
                   .parseAddress(address.substr(0, colon),
                                 static_cast<uint>(std::stoul(address.substr(colon + 1))))
                   .then([](kj::Own<kj::NetworkAddress> a) { return a->connect(); })
                   .then([raw](kj::Own<kj::AsyncIoStream> stream) {
                     raw->stream = kj::mv(stream);
                     raw->rpc = kj::heap<capnp::TwoPartyClient>(*raw->stream);
                     return raw->rpc->bootstrap();
                   }))
        .castAs<proto::Node>();
  }

 private:
  static constexpr size_t kKept = 16;
  struct Connection {
    kj::Own<kj::AsyncIoStream> stream;
    kj::Own<capnp::TwoPartyClient> rpc;
  };
  kj::Network& network_;
  std::vector<kj::Own<Connection>> connections_;
};

}  // namespace

std::unique_ptr<NodeConnector> MakeTcpNodeConnector(kj::Network& network) {
  return std::make_unique<TcpNodeConnector>(network);
}

}  // namespace airt::autoscaler
