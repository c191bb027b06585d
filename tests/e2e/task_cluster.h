// A head and one node for the task tests of one test binary, with the test process as their
// driver: a real airt-head, an airt-node that starts real airt-worker processes loading
// airt_task_functions, and airt::Init with the head's address. Built into each test binary that
// defines AIRT_HEAD_BIN, AIRT_NODE_BIN, AIRT_WORKER_BIN and AIRT_TASK_FUNCTIONS.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "airt/driver.h"
#include "tests/testing/test_support.h"

namespace airt::e2e {

class TaskCluster {
 public:
  // Starts the head, then the node with `node_flags` (--num-cpus=2, --object-store-memory=...)
  // added to the head's address, the temp folder, the worker binary and its code search path;
  // waits for both to be ready and calls airt::Init with `config` (its address set to the head's).
  // A failure is a fatal test failure naming the log (check HasFatalFailure()).
  explicit TaskCluster(const std::vector<std::string>& node_flags, Config config = {});
  // airt::Shutdown, then the node and the head are killed by pid.
  ~TaskCluster();
  TaskCluster(const TaskCluster&) = delete;
  TaskCluster& operator=(const TaskCluster&) = delete;

  const testing::TempDir& dir() const { return dir_; }
  std::string NodeLog() const { return testing::ReadFile(dir_.File("node.log")); }

 private:
  void Start(const std::vector<std::string>& node_flags, Config config);

  testing::TempDir dir_;
  std::unique_ptr<testing::ChildProcess> head_;
  std::unique_ptr<testing::ChildProcess> node_;
  bool initialized_ = false;
};

}  // namespace airt::e2e
