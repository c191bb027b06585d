#include "api/core_worker/peer_connector.h"

#include <string>

#include "common/rpc_status.h"
#include "common/status.h"

namespace airt::core_worker {

kj::Promise<kj::Own<kj::AsyncIoStream>> TcpPeerConnector::Connect(kj::AsyncIoContext& io,
                                                                  const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return ToKjException(InvalidArgument("'" + address + "' is not host:port"));
  }
  unsigned long port = 0;
  try {
    port = std::stoul(address.substr(colon + 1));
  } catch (const std::exception&) {
    port = 1u << 16;
  }
  if (port >= (1u << 16)) {
    return ToKjException(InvalidArgument("'" + address + "' has no valid port"));
  }
  return io.provider->getNetwork()
      .parseAddress(kj::StringPtr(address.substr(0, colon).c_str()), static_cast<uint>(port))
      .then([](kj::Own<kj::NetworkAddress> a) { return a->connect(); });
}

kj::Promise<kj::Own<kj::ConnectionReceiver>> TcpPeerConnector::Listen(kj::AsyncIoContext& io,
                                                                      const std::string& host) {
  return io.provider->getNetwork().parseAddress(host, 0).then(
      [](kj::Own<kj::NetworkAddress> address) { return address->listen(); });
}

}  // namespace airt::core_worker
