// airt-node's life: its folder, object store, transfer service, Cap'n Proto service and head
// session, from start to SIGTERM (or to the end of its drain).
#pragma once

#include <signal.h>

#include <string>

#include <kj/async.h>

#include "worker/internal/head_session.h"
#include "worker/internal/node_config.h"
#include "worker/internal/node_service.h"
#include "worker/internal/worker_pool.h"

namespace airt::worker {

// Runs a node on the calling thread until one of `stop_signals` arrives, which the caller has
// blocked in every thread (before starting any), together with SIGCHLD (worker exits are read
// from a signalfd). Makes <temp_dir>/node-<id prefix>/ with store.sock, spill/, fallback/ (the
// store's files for objects its memory cannot hold) and logs/; serves the store and the transfer
// service on their own threads; on this thread's event loop serves
// the Node interface (worker leases, worker registration, killWorker) on the node port, keeps the
// worker processes, fetches the head's cluster view and registers with the head, retrying while
// the head is down; when a heartbeat's answer lists finished jobs it stops their workers and then
// deletes their objects from the store. Prints "node ready <node id hex>" to stdout once the head
// first answers. On a stop signal (SIGINT, SIGTERM), or once a drain is done (Node.drain; SIGUSR1
// is a preemption notice that starts one, node_drain.h): LeaveCluster, then stops the services
// and returns 0. Returns 1, having logged why, when a service cannot start (folder, memory,
// ports, resources) or the head refused the node.
int RunNode(const NodeConfig& config, const sigset_t& stop_signals);

// What LeaveCluster needs of the node.
struct LeavingNode {
  NodeServiceTarget& target;
  WorkerPool& pool;
  HeadSession& session;
  bool tell_head = true;  // false when the head refused the node (it declared it dead)
  kj::Duration unregister_timeout;
  std::string why;  // "drained (...)", "stopping on signal 15", or why the session gave up
  bool evacuate = false;  // drained: its primary objects move to other nodes first
};

// The node's final exit step, however it goes (drained, a stop signal, the head refusing it):
// a drained node first moves its primary objects to other nodes (ObjectEvacuator, within
// kEvacuationDeadline; what cannot move is logged and lost with the node, as on a node death,
// and its owners rebuild it from lineage); then new calls to its service fail with kUnavailable
// from here on, every worker is stopped
// (SIGTERM, SIGKILL after --worker-stop-grace-ms), then the head hears that the node leaves
// (unregisterNode, best effort within the timeout; the head records a drained node's death as
// "drained (...)"). Runs the loop of `wait` until done.
void LeaveCluster(const LeavingNode& node, kj::WaitScope& wait);

}  // namespace airt::worker
