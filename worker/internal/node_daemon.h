// airt-node's life: its folder, object store, transfer service, Cap'n Proto service and head
// session, from start to SIGTERM.
#pragma once

#include <signal.h>

#include "worker/internal/node_config.h"

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
// first answers. On a stop signal: stops every worker (SIGTERM, SIGKILL after
// --worker-stop-grace-ms), unregisters (best effort, a short timeout), stops the services, returns
// 0. Returns 1, having logged why, when a service cannot start (folder, memory, ports, resources).
int RunNode(const NodeConfig& config, const sigset_t& stop_signals);

}  // namespace airt::worker
