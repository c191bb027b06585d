// How the head reaches a node's Node service (placement groups reserve bundles there) and a
// worker's Worker service (it restarts actors whose worker died). An interface so
// that tests serve nodes in process (STYLE.md rule 8); TcpNodeConnector is the real one.
// Loop thread only.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include "common/proto/node.capnp.h"

namespace airt::head::internal {

class NodeConnector {
 public:
  virtual ~NodeConnector() = default;
  // A client of the Node service at "host:port": calls on it fail with kUnavailable when the node
  // cannot be reached.
  virtual proto::Node::Client Connect(const std::string& address) = 0;
  // Drops the connection to `address` (a call on it failed): the next Connect opens a new one.
  virtual void Forget(const std::string& address) = 0;
  // The bootstrap capability at "host:port" (a worker's Worker service), on the same connections.
  capnp::Capability::Client ConnectAny(const std::string& address) { return Connect(address); }
  // Resolves once the connection to `address` (opened now when there is none) has ended: the
  // peer exited, or the connection could not be made, or was forgotten. Dropping it stops the
  // watch.
  virtual kj::Promise<void> WhenGone(const std::string& address) = 0;
};

// One TCP connection per node address, opened at the first Connect and forgotten when it ends (a
// node restarted on the same port is a new connection). `network` must outlive it.
class TcpNodeConnector final : public NodeConnector {
 public:
  explicit TcpNodeConnector(kj::Network& network) : network_(network) {}
  proto::Node::Client Connect(const std::string& address) override;
  void Forget(const std::string& address) override;
  kj::Promise<void> WhenGone(const std::string& address) override;

 private:
  struct Connection {
    kj::Own<kj::AsyncIoStream> stream;
    kj::Own<capnp::TwoPartyClient> client;
    proto::Node::Client node = nullptr;
    kj::Promise<void> gone = nullptr;  // forgets it once the connection ends
    std::vector<kj::Own<kj::PromiseFulfiller<void>>> watchers;  // WhenGone, fulfilled once ended
  };
  void Forget(const std::string& address, const Connection* only);
  kj::Network& network_;
  std::map<std::string, kj::Own<Connection>> connections_;
  std::vector<kj::Own<Connection>> retired_;  // forgotten after a failure
};

}  // namespace airt::head::internal
