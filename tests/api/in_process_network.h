// An in-process network for core workers (core_worker::PeerConnector): what Listen binds is
// reachable by Connect from any other loop of this process, each connection a Unix socket pair (so
// that the two ends may live on different threads' event loops), carrying the real Cap'n Proto RPC
// stack. Addresses nothing listens on here are reached over TCP, so that a test can mix
// in-process peers with the EzRpc fakes on loopback. Break(address) cuts every connection to an
// address, as a peer's process dying or the network failing.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <capnp/capability.h>
#include <kj/async-io.h>

#include "api/core_worker/peer_connector.h"

namespace airt::testing {

// Thread-safe; hand one shared_ptr to every core worker and server of a test.
class InProcessNetwork final : public core_worker::PeerConnector {
 public:
  ~InProcessNetwork() override;

  kj::Promise<kj::Own<kj::AsyncIoStream>> Connect(kj::AsyncIoContext& io,
                                                  const std::string& address) override;
  // Binds `host`:N for the next free N (from 1); the receiver unbinds it when destroyed.
  kj::Promise<kj::Own<kj::ConnectionReceiver>> Listen(kj::AsyncIoContext& io,
                                                      const std::string& host) override;

  // Shuts down every open connection made so far to `address`, both ways: each end's reads end
  // and its writes fail. Later connections are not affected. The number cut.
  size_t Break(const std::string& address);
  // Connections made to `address` so far (broken or not).
  size_t Connections(const std::string& address) const;
  // From now on Listen binds the lowest N free, as the kernel hands a port that a process
  // dying freed to the next one (until then each Listen takes a new N).
  void ReuseFreedPorts();

 private:
  class Receiver;
  class TrackedStream;
  struct Endpoint {
    std::deque<int> pending;  // accepted ends not taken by accept() yet
    kj::Own<kj::CrossThreadPromiseFulfiller<void>> wake;  // an accept() waiting
  };
  // accept()'s next end, or none (then `wake` is armed). Receiver's loop thread.
  int TakePending(const std::string& address, kj::Own<kj::CrossThreadPromiseFulfiller<void>> wake);
  void Unbind(const std::string& address);
  void Untrack(const std::string& address, int fd);  // a client end is closing

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Endpoint>> bound_;  // guarded by mu_
  std::map<std::string, uint32_t> next_port_;               // by host; guarded by mu_
  bool reuse_ports_ = false;                                 // guarded by mu_
  // Per address, the client ends of its open connections, and how many were ever made.
  std::map<std::string, std::vector<int>> live_;  // guarded by mu_
  std::map<std::string, size_t> made_;            // guarded by mu_
  core_worker::TcpPeerConnector tcp_;
};

// Serves one capability on the network at `host`:N from a thread and event loop of its own, as
// a peer process would. Destruction stops it, closing its connections.
class InProcessServer {
 public:
  // `make` runs on the server's thread and gives the bootstrap capability.
  InProcessServer(std::shared_ptr<InProcessNetwork> network, const std::string& host,
                  std::function<capnp::Capability::Client()> make);
  ~InProcessServer();
  InProcessServer(const InProcessServer&) = delete;
  InProcessServer& operator=(const InProcessServer&) = delete;

  const std::string& address() const { return address_; }  // host:N

 private:
  std::string address_;
  std::thread thread_;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> stop_;
};

}  // namespace airt::testing
