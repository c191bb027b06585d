// A head and several airt-node processes on this machine for the multi-node tests, with the test
// process as their driver. Each node has a temp folder of its own (its own store, transfer service
// and workers), so objects move between nodes only through the transfer services. Built into each
// test binary that defines AIRT_HEAD_BIN, AIRT_NODE_BIN, AIRT_WORKER_BIN and AIRT_TASK_FUNCTIONS.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/testing/test_support.h"

namespace airt::e2e {

// The flags of the tests that kill nodes (chaos, lineage, node death, object copies): a killed
// node's connection drops, and the head declares it dead within the grace; heartbeats do not
// time out on a loaded machine.
inline const std::vector<std::string> kNodeKillHeadFlags = {
    "--heartbeat-interval-ms=200", "--node-timeout-ms=20000", "--node-disconnect-grace-ms=300"};
inline const std::vector<std::string> kNodeKillNodeFlags = {
    "--num-cpus=2", "--object-store-memory=64M", "--cluster-view-interval-ms=100"};

class MultiNodeCluster {
 public:
  // Starts the head; `node_flags` go to every node AddNode starts. A failure is a fatal test
  // failure naming the log (check with ASSERT_NO_FATAL_FAILURE or HasFatalFailure()).
  // `head_flags` go to the head (e.g. --heartbeat-interval-ms=...).
  explicit MultiNodeCluster(std::vector<std::string> node_flags,
                            std::vector<std::string> head_flags = {});
  // airt::Shutdown if Init was called, then the nodes (the last added first) and the head are
  // killed by pid.
  ~MultiNodeCluster();
  MultiNodeCluster(const MultiNodeCluster&) = delete;
  MultiNodeCluster& operator=(const MultiNodeCluster&) = delete;

  // Starts node `name` (folder <dir>/<name>, log <dir>/<name>.log) with the common flags and
  // `flags` (--resources=...), its workers airt-worker loading airt_task_functions, and waits
  // until it is ready. A failure is fatal, as above.
  void AddNode(const std::string& name, const std::vector<std::string>& flags);
  // airt::Init with the head's address. The driver joins the first alive node at 127.0.0.1: the
  // first one added.
  void Init();

  // Kills the head with SIGKILL, runs `while_down`, and starts it again on the same port with
  // the same flags (log head-<n>.log). A failure is fatal, as above.
  void RestartHead(const std::function<void()>& while_down = {});

  testing::ChildProcess& node(const std::string& name);
  testing::ChildProcess& head() { return *head_; }
  const std::string& address() const { return address_; }
  // The cluster's own folder (temp folders and logs).
  std::string Dir() const { return dir_.path(); }
  std::string Log(const std::string& name) const;
  // The store socket of node `name` (<dir>/<name>/node-<id>/store.sock); "" when none is there.
  std::string StoreSocket(const std::string& name) const;

 private:
  void StartHead(const std::string& port = "0");

  testing::TempDir dir_;
  std::vector<std::string> node_flags_;
  std::vector<std::string> head_flags_;
  std::string address_;
  std::unique_ptr<testing::ChildProcess> head_;
  std::vector<std::pair<std::string, std::unique_ptr<testing::ChildProcess>>> nodes_;
  bool initialized_ = false;
  int head_starts_ = 0;
};

}  // namespace airt::e2e
