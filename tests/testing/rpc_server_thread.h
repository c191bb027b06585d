// Serves one Cap'n Proto object on 127.0.0.1 from a thread of its own (an EzRpcServer there), for
// tests whose own thread waits on processes. Destruction stops it and closes every connection,
// as a peer going down.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include <capnp/capability.h>

namespace airt::testing {

class RpcServerThread {
 public:
  // `make_bootstrap` runs on the server thread (KJ objects belong to their thread). port 0: any
  // free port. port() is 0 when the port could not be bound.
  RpcServerThread(std::function<capnp::Capability::Client()> make_bootstrap, uint16_t port = 0);
  ~RpcServerThread();
  RpcServerThread(const RpcServerThread&) = delete;
  RpcServerThread& operator=(const RpcServerThread&) = delete;

  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  std::thread thread_;
  uint16_t port_ = 0;
  int stop_fd_ = -1;  // the write end of a pipe the server's loop reads; a byte stops it
};

}  // namespace airt::testing
