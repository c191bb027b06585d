// A fake node for the worker's tests: proto::Node::Server on 127.0.0.1, served by an EzRpcServer on
// a thread of its own, recording the workers that register. Destroying it closes every
// connection, as a node going down.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/ids.h"
#include "tests/testing/rpc_server_thread.h"

namespace airt::testing {

struct RegisteredWorker {
  WorkerId worker_id;
  std::string host;
  uint16_t port = 0;
  int32_t pid = 0;
};

// What the fake node saw. Thread-safe.
class FakeNodeState {
 public:
  std::vector<RegisteredWorker> Registrations() const;
  void Record(RegisteredWorker worker);

 private:
  mutable std::mutex mu_;
  std::vector<RegisteredWorker> registrations_;
};

class FakeNodeThread {
 public:
  // Serves on any free port; port() is 0 when it could not.
  explicit FakeNodeThread(std::shared_ptr<FakeNodeState> state);

  uint16_t port() const { return server_.port(); }

 private:
  RpcServerThread server_;
};

}  // namespace airt::testing
