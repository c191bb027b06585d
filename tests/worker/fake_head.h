// A fake head for the node's tests: proto::Head::Server over EzRpc on loopback, recording what
// nodes send (registrations, heartbeats, unregistrations) and answering as the real head would,
// with switches for the failure paths (forget a node, never answer), and finished jobs that its
// heartbeats' answers list as the real head's do. Serve it on the test's own
// thread (EzRpcServer + FakeHead) or on a thread of its own (FakeHeadThread) when the test's
// thread waits on processes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <capnp/ez-rpc.h>
#include <kj/async.h>

#include "common/ids.h"
#include "common/proto/cluster.capnp.h"
#include "tests/testing/rpc_server_thread.h"

namespace airt::testing {

// A NodeInfo as the fake head received it.
struct RecordedNode {
  NodeId id;
  std::string address;
  uint16_t node_port = 0;
  uint16_t transfer_port = 0;
  std::string store_socket;
  std::map<std::string, double> total;
  std::map<std::string, std::string> labels;
  std::vector<uint32_t> gpu_ids;
  std::string temp_dir;
  int32_t pid = 0;
};

struct RecordedHeartbeat {
  NodeId id;
  std::map<std::string, double> available;
  std::vector<uint32_t> gpu_ids_in_use;
  std::vector<uint32_t> quarantined_gpu_ids;
  uint64_t jobs_seen = 0;
  bool known = false;  // what the fake answered
};

// A node the fake head lists in its cluster view without it ever registering: another node of
// the cluster, for spillback tests.
struct ViewNode {
  RecordedNode info;  // id, address, node_port, total, labels, gpu_ids
  std::map<std::string, double> available;
  bool alive = true;
};

// What a FakeHead saw, and how it answers. Thread-safe: the test reads it from any thread.
// Its cluster view lists each registered node (last registration, with the available amounts of
// its last heartbeat, its totals before one), then the nodes added with AddViewNode.
class FakeHeadState {
 public:
  uint32_t heartbeat_interval_ms = 50;  // set before serving
  uint32_t node_timeout_ms = 1000;

  std::vector<RecordedNode> Registrations() const;
  std::vector<RecordedHeartbeat> Heartbeats() const;
  std::vector<NodeId> Unregistrations() const;
  size_t NumRegistrations() const;
  size_t NumRegisterCalls() const;  // answered or not
  // Heartbeats answered known=true for `id`.
  size_t NumKnownHeartbeats(const NodeId& id) const;
  size_t NumUnknownHeartbeats() const;

  // Forgets every node, as a head that declared them dead: their heartbeats get known=false.
  void ForgetAll();
  // Finishes `job`: the next heartbeats list it (finish numbers 1, 2, ... as the real head's).
  void FinishJob(const JobId& job);
  // Adds `node` to the cluster view, or replaces the one with its id.
  void AddViewNode(ViewNode node);
  size_t NumClusterViewCalls() const;

  // registerNode / unregisterNode calls are left unanswered while set.
  void SetHangRegister(bool hang);
  void SetHangUnregister(bool hang);
  // registerNode fails with kFailedPrecondition and `why` while set (non-empty), as the head
  // refusing a node it declared dead.
  void SetRefuseRegister(std::string why);

 private:
  friend class FakeHead;
  mutable std::mutex mu_;
  std::vector<RecordedNode> registrations_;
  std::vector<RecordedHeartbeat> heartbeats_;
  std::vector<NodeId> unregistrations_;
  std::vector<JobId> finished_jobs_;  // finish number i + 1 at i
  std::map<NodeId, bool> known_;      // registered and not forgotten or unregistered
  std::vector<ViewNode> view_nodes_;
  size_t register_calls_ = 0;
  size_t cluster_view_calls_ = 0;
  bool hang_register_ = false;
  bool hang_unregister_ = false;
  std::string refuse_register_;
};

class FakeHead final : public proto::Head::Server {
 public:
  explicit FakeHead(std::shared_ptr<FakeHeadState> state) : state_(std::move(state)) {}

 protected:
  kj::Promise<void> registerNode(RegisterNodeContext context) override;
  kj::Promise<void> heartbeat(HeartbeatContext context) override;
  kj::Promise<void> unregisterNode(UnregisterNodeContext context) override;
  kj::Promise<void> clusterView(ClusterViewContext context) override;

 private:
  std::shared_ptr<FakeHeadState> state_;
};

// A FakeHead served on 127.0.0.1 by an EzRpcServer on a thread of its own. Destruction stops it
// and closes every connection, as a head going down.
class FakeHeadThread {
 public:
  // port 0: any free port. port() is 0 when the port could not be bound.
  explicit FakeHeadThread(std::shared_ptr<FakeHeadState> state, uint16_t port = 0);

  uint16_t port() const { return server_.port(); }
  std::string address() const { return server_.address(); }

 private:
  RpcServerThread server_;
};

// A port on 127.0.0.1 that was free a moment ago (bound, then closed).
uint16_t UnusedPort();

}  // namespace airt::testing
