// How a core worker reaches its peers (the head, nodes, workers) and where a worker's core worker
// serves: the seam its connections go through, as the node's HeadConnector is for the head.
// Production uses TCP; tests give an in-process network of socket pairs
// (tests/api/in_process_network.h) that can break a connection on demand, so that retries,
// restarts and cancellation are tested over the real RPC stack without ports or processes.
#pragma once

#include <string>

#include <kj/async-io.h>

namespace airt::core_worker {

// Called on the core worker's loop thread only (`io` is that loop's); one instance may serve
// several core workers, each on its own loop.
class PeerConnector {
 public:
  virtual ~PeerConnector() = default;
  // A byte stream to whoever serves at `address` ("host:port"). Rejects (a kj::Exception, which
  // callers see as kUnavailable) when nothing can be reached there.
  virtual kj::Promise<kj::Own<kj::AsyncIoStream>> Connect(kj::AsyncIoContext& io,
                                                          const std::string& address) = 0;
  // Accepts connections on a free port of `host`; the receiver's getPort() names it. Rejects (a
  // kj::Exception) when nothing can be bound there.
  virtual kj::Promise<kj::Own<kj::ConnectionReceiver>> Listen(kj::AsyncIoContext& io,
                                                              const std::string& host) = 0;
};

// TCP through the loop's network.
class TcpPeerConnector final : public PeerConnector {
 public:
  kj::Promise<kj::Own<kj::AsyncIoStream>> Connect(kj::AsyncIoContext& io,
                                                  const std::string& address) override;
  kj::Promise<kj::Own<kj::ConnectionReceiver>> Listen(kj::AsyncIoContext& io,
                                                      const std::string& host) override;
};

}  // namespace airt::core_worker
