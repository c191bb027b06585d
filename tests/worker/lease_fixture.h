// A node's lease service assembled in the test process: the Node service (NodeService over a
// LeaseManager and a WorkerPool) served by EzRpc on loopback, a FakeHead on the same thread that
// the node heartbeats to and fetches its cluster view from, the node's object store and the
// cleanup of the jobs the head says finished, and real worker processes (airt_fake_worker,
// fake_worker.cc) that register over TCP. The test drives it through a
// proto::Node client on its own event loop; every wait has a deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>
#include <kj/async.h>

#include "common/ids.h"
#include "common/proto/node.capnp.h"
#include "common/status.h"
#include "objectstore/object_store.h"
#include "tests/testing/test_support.h"
#include "tests/worker/fake_head.h"
#include "worker/internal/child_processes.h"
#include "worker/internal/cluster_view_subscriber.h"
#include "worker/internal/head_session.h"
#include "worker/internal/job_cleanup.h"
#include "worker/internal/lease_manager.h"
#include "worker/internal/node_service.h"
#include "worker/internal/worker_pool.h"

namespace airt::testing {

// The node under test.
struct NodeSetup {
  std::map<std::string, double> total = {{"CPU", 4}};  // GPU ids 0..GPU-1
  kj::Duration infeasible_grace = 10 * kj::SECONDS;
  kj::Duration register_timeout = 10 * kj::SECONDS;
  kj::Duration idle_timeout = 60 * kj::SECONDS;
  kj::Duration stop_grace = 2 * kj::SECONDS;
};

// A requestWorkerLease answer, or the error of the call.
struct LeaseReply {
  enum class Kind { kNone, kGranted, kSpillback, kInfeasible };
  Status status;  // not ok: the call failed (kind kNone)
  Kind kind = Kind::kNone;
  uint64_t lease_id = 0;
  worker::WorkerAddress worker;
  std::vector<uint32_t> gpu_ids;
  std::string text;  // the spillback address or the infeasible message
};

// requestWorkerLease's flags for an actor's worker.
struct LeaseFlags {
  bool placed = false;    // the head placed it on this node: never spilled back
  bool detached = false;  // a detached actor's: outlives its job
};

class LeaseFixture : public ::testing::Test {
 protected:
  LeaseFixture();
  ~LeaseFixture() override;

  // Builds the node (store, pool, lease manager, job cleanup, head session, view subscriber) and a
  // client to it.
  void StartNode(const NodeSetup& setup);

  kj::WaitScope& wait() { return loop_->getWaitScope(); }
  kj::Timer& timer() { return loop_->getIoProvider().getTimer(); }
  proto::Node::Client& node() { return *node_; }

  // requestWorkerLease for `shape` as job_ (C++); resolves with the answer or the call's error.
  kj::Promise<LeaseReply> Request(const std::map<std::string, double>& shape,
                                  const JobId& job = JobId(), LeaseFlags flags = {});
  // Waits for `pending` for at most `timeout` (kDeadlineExceeded after).
  LeaseReply Await(kj::Promise<LeaseReply>& pending,
                   std::chrono::milliseconds timeout = std::chrono::seconds(20));
  LeaseReply Lease(const std::map<std::string, double>& shape, const JobId& job = JobId(),
                   LeaseFlags flags = {});
  Status Return(uint64_t lease_id, bool disconnect_worker = false);
  // The fixture keeps each grant's LeaseHolder (as a submitter keeps it while it holds the lease);
  // this drops it, as a requester that exits does.
  void DropHolder(uint64_t lease_id) { holders_.erase(lease_id); }
  // Runs the event loop until `condition` holds or `timeout` passes.
  bool PumpUntil(const std::function<bool()>& condition,
                 std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // Waits until the node has fetched a view after this call (so it has seen recent changes).
  bool WaitForFreshView();
  // Waits for a heartbeat after this call whose `name` amount is `amount`.
  bool WaitForHeartbeatAvailable(const std::string& name, double amount);

  worker::LeaseManagerSnapshot Snap() const { return leases_->Snapshot(); }
  worker::JobCleanupSnapshot Cleanup() const { return cleanup_->Snapshot(); }
  worker::HeadSessionSnapshot Session() const { return session_->Snapshot(); }
  // A client of the node's store.
  objectstore::StoreClient& store() { return *store_client_; }
  worker::WorkerPool& pool() { return *pool_; }
  worker::LeaseManager& leases() { return *leases_; }
  std::string LogPath(const WorkerId& worker) const;
  std::string WorkerLog(const WorkerId& worker) const { return ReadFile(LogPath(worker)); }

  TempDir dir_;
  JobId job_ = JobId::FromRandom();
  NodeId node_id_ = NodeId::FromRandom();
  std::shared_ptr<FakeHeadState> head_state_ = std::make_shared<FakeHeadState>();
  std::shared_ptr<worker::NodeServiceTarget> target_ =
      std::make_shared<worker::NodeServiceTarget>();

 private:
  // Destroyed in reverse: the client and the node's parts first, the thread's loop last.
  std::unique_ptr<capnp::EzRpcServer> loop_;  // serves the NodeService
  uint16_t node_port_ = 0;
  std::unique_ptr<capnp::EzRpcServer> head_;
  uint16_t head_port_ = 0;
  std::unique_ptr<objectstore::StoreServer> store_;
  std::unique_ptr<objectstore::StoreClient> store_client_;
  std::unique_ptr<worker::ChildReaper> reaper_;
  worker::ForkExecLauncher launcher_;
  std::unique_ptr<worker::WorkerPool> pool_;
  std::unique_ptr<worker::LeaseManager> leases_;
  std::unique_ptr<worker::JobCleanup> cleanup_;
  std::unique_ptr<worker::EzRpcHeadConnector> connector_;
  std::unique_ptr<worker::HeadSession> session_;
  std::unique_ptr<worker::EzRpcHeadConnector> view_connector_;
  std::unique_ptr<worker::ClusterViewSubscriber> view_subscriber_;
  std::unique_ptr<capnp::EzRpcClient> client_;
  std::unique_ptr<proto::Node::Client> node_;
  std::map<uint64_t, proto::LeaseHolder::Client> holders_;  // by lease id
};

}  // namespace airt::testing
