#include "head/internal/node_connector.h"

#include <string>

#include "common/rpc_status.h"
#include "common/status.h"

namespace airt::head::internal {

proto::Node::Client TcpNodeConnector::Connect(const std::string& address) {
  auto it = connections_.find(address);
  if (it != connections_.end()) return it->second->node;
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return proto::Node::Client(
        ToKjException(InvalidArgument("node address '" + address + "' is not host:port")));
  }
  uint port = static_cast<uint>(std::strtoul(address.c_str() + colon + 1, nullptr, 10));
  auto connection = kj::heap<Connection>();
  Connection* raw = connection.get();
  connections_[address] = kj::mv(connection);
  kj::Promise<proto::Node::Client> connected =
      network_.parseAddress(kj::StringPtr(address.substr(0, colon).c_str()), port)
          .then([](kj::Own<kj::NetworkAddress> a) { return a->connect(); })
          .then([this, raw, address](kj::Own<kj::AsyncIoStream> stream) {
            raw->stream = kj::mv(stream);
            raw->client = kj::heap<capnp::TwoPartyClient>(*raw->stream);
            raw->gone = raw->client->onDisconnect()
                            .then([this, raw, address] { Forget(address, raw); })
                            .eagerlyEvaluate(nullptr);
            // Not into raw->node: that client's own promise is running this continuation.
            return raw->client->bootstrap().castAs<proto::Node>();
          },
          [this, raw, address](kj::Exception&& e) -> proto::Node::Client {
            Forget(address, raw);  // could not connect: the next Connect tries again
            kj::throwFatalException(kj::mv(e));
          });
  raw->node = proto::Node::Client(kj::mv(connected));
  return raw->node;
}

void TcpNodeConnector::Forget(const std::string& address) { Forget(address, nullptr); }

void TcpNodeConnector::Forget(const std::string& address, const Connection* only) {
  auto it = connections_.find(address);
  if (it == connections_.end() || (only != nullptr && it->second.get() != only)) return;
  // Kept: a connect still under way writes into it.
  Connection& gone = *it->second;
  for (auto& watcher : gone.watchers) watcher->fulfill();
  gone.watchers.clear();
  retired_.push_back(kj::mv(it->second));
  connections_.erase(it);
}

kj::Promise<void> TcpNodeConnector::WhenGone(const std::string& address) {
  proto::Node::Client client = Connect(address);
  auto it = connections_.find(address);
  if (it == connections_.end()) return kj::READY_NOW;  // not host:port, or failed already
  std::erase_if(it->second->watchers, [](auto& w) { return !w->isWaiting(); });
  auto paf = kj::newPromiseAndFulfiller<void>();
  it->second->watchers.push_back(kj::mv(paf.fulfiller));
  return kj::mv(paf.promise);
}

}  // namespace airt::head::internal
