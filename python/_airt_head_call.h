// One call to the head from airt._airt, over a connection of its own made on a thread of its own
// (so that it never meets the event loop of the calling thread). The caller releases the GIL.
#pragma once

#include <functional>
#include <string>
#include <thread>

#include <capnp/ez-rpc.h>

#include "common/proto/cluster.capnp.h"
#include "common/rpc_status.h"

namespace airt::python {

// Runs `call` with a client of the head at `address` ("host:port") and that connection's wait
// scope; kInvalidArgument for an address that is not host:port, else the call's error.
inline Status CallHead(const std::string& address,
                       const std::function<void(proto::Head::Client&, kj::WaitScope&)>& call) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return InvalidArgument("the head's address '" + address + "' is not host:port");
  }
  Status status;
  std::thread([&] {
    status = CatchKj([&] {
      capnp::EzRpcClient client(address.substr(0, colon),
                                static_cast<uint>(std::stoul(address.substr(colon + 1))));
      auto head = client.getMain<proto::Head>();
      call(head, client.getWaitScope());
    });
  }).join();
  return status;
}

}  // namespace airt::python
