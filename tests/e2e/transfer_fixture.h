// A GoogleTest fixture for the transfer service's multi-process tests. Each "node" is its own
// `airt-store --transfer` daemon with its own socket, capacity and log in the test's temp folder;
// pulls run in their own processes (airt_transfer_tool), puts and reads in others
// (airt_store_client_tool). Every process is killed by pid when the test ends, pass or fail; on
// failure every log is printed. Waiting is always for a condition with a deadline.
//
// NamespacePair puts nodes on separate hosts: two network namespaces joined by a veth pair.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "common/ids.h"
#include "common/status.h"
#include "objectstore/object_store.h"
#include "tests/testing/test_support.h"

namespace airt::e2e {

using namespace std::chrono_literals;

// Exit status of airt_transfer_tool and airt_store_client_tool for a failed call with `code`.
inline int TransferToolExitFor(Code code) { return 10 + static_cast<int>(code); }

// Two network namespaces named "airt-xfer-<pid>-a" and "-b", joined by a veth pair addressed
// 10.231.0.1/24 (in a) and 10.231.0.2/24 (in b), loopback up in both. Destruction deletes both
// namespaces, which destroys the veth pair with them; it runs even when the test fails. Namespaces
// of this prefix left by a test process that no longer exists (one killed mid-test) are deleted
// on creation.
class NamespacePair {
 public:
  static constexpr const char* kAddressA = "10.231.0.1";
  static constexpr const char* kAddressB = "10.231.0.2";

  // kFailedPrecondition when namespaces cannot be made here (no `ip`, `ip netns add` refused):
  // callers skip. kInternal when a later step fails (the message holds `ip`'s output).
  static Result<std::unique_ptr<NamespacePair>> Create();
  ~NamespacePair();
  NamespacePair(const NamespacePair&) = delete;
  NamespacePair& operator=(const NamespacePair&) = delete;

  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  // The argv prefix that runs a command inside namespace `ns`: ip netns exec <ns>. `ip` execs the
  // command in its own process, so the child's pid is the command's.
  static std::vector<std::string> Exec(const std::string& ns);

 private:
  NamespacePair() = default;
  Status Setup();

  testing::TempDir logs_;
  std::vector<std::string> created_;  // namespaces to delete
  std::string a_, b_;
};

// The ip(8) binary, or "" when there is none.
std::string IpBinary();
// Runs `argv` to its end (20 s at most); its exit status and its output.
std::pair<int, std::string> RunCommand(const std::vector<std::string>& argv,
                                       const std::string& log_path);

class TransferFixture : public ::testing::Test {
 protected:
  struct Node {
    std::string name;
    std::string socket;
    std::string log;
    std::string transfer;             // "host:port" of its transfer service
    std::vector<std::string> prefix;  // runs it and its tools (e.g. inside a namespace)
    std::unique_ptr<testing::ChildProcess> process;
    std::unique_ptr<objectstore::StoreClient> observer;  // this test process's client
  };
  struct Tool {
    std::string name;
    std::string log;
    std::unique_ptr<testing::ChildProcess> process;
  };

  TransferFixture();
  ~TransferFixture() override;
  void TearDown() override;

  // Starts `prefix... airt-store --socket <dir>/<name>.sock --transfer flags...`, waits for its
  // "transfer" and "ready" lines and connects an observer. Null, with a failure recorded, when it
  // does not come up.
  Node* StartNode(const std::string& name, std::vector<std::string> flags,
                  std::vector<std::string> prefix = {});
  // SIGTERM, then expects a clean exit within the deadline.
  void StopNode(Node* node);
  // SIGKILL (its observer is dropped first), then waits for it to be gone.
  void KillNode(Node* node);

  // Starts airt_transfer_tool pulling `ids` (pipelined on one connection) from `peer`
  // ("host:port") into `local`, inside local's prefix.
  Tool* StartPull(Node* local, const std::string& peer, const std::vector<ObjectId>& ids,
                  int64_t timeout_ms);
  Tool* StartPull(Node* local, const std::string& peer, const ObjectId& id, int64_t timeout_ms) {
    return StartPull(local, peer, std::vector<ObjectId>{id}, timeout_ms);
  }
  // Runs airt_store_client_tool `command` against `node`'s socket, inside node's prefix.
  Tool* StartStoreTool(Node* node, const std::string& command, std::vector<std::string> args);
  // Waits for the tool's exit; its status, or -1 (a failure recorded, the tool killed) past
  // `timeout`.
  int WaitTool(Tool* tool, std::chrono::milliseconds timeout = 60s);
  int Pull(Node* local, const std::string& peer, const ObjectId& id, int64_t timeout_ms = 30000) {
    return WaitTool(StartPull(local, peer, id, timeout_ms));
  }
  int RunStoreTool(Node* node, const std::string& command, std::vector<std::string> args,
                   std::chrono::milliseconds timeout = 60s) {
    return WaitTool(StartStoreTool(node, command, std::move(args)), timeout);
  }
  // Runs `airt_store_client_tool put` on `node` (the pattern of object_pattern.h) and, when it
  // succeeds, waits until the node's observer sees the object. A client's Seal of its own object
  // does not wait for the store (objectstore/client.cc), so others see the object a moment after
  // the writer has exited. The tool's exit status, or -1 (a failure recorded) when the object
  // does not show within the deadline.
  int Put(Node* node, const ObjectId& id, uint64_t size, uint64_t seed);
  // Waits until `node`'s observer sees `id` sealed (see Put).
  bool WaitUntilSealed(Node* node, const ObjectId& id, std::chrono::milliseconds timeout = 10s);
  // Whether the tool printed `text` (waiting until it does, it exits, or `timeout` passes).
  bool WaitForOutput(Tool* tool, std::string_view text, std::chrono::milliseconds timeout = 20s);

  objectstore::StoreStats Stats(Node* node);
  // Polls Stats(node) until `condition` holds or `timeout` passes.
  bool WaitForStats(Node* node,
                    const std::function<bool(const objectstore::StoreStats&)>& condition,
                    std::chrono::milliseconds timeout = 20s);

  // Distinct ids per test (a random job), numbered from 1.
  ObjectId Id(uint32_t i) const { return ObjectId::ForPut(task_, i); }
  const testing::TempDir& dir() const { return dir_; }
  // Owned by the fixture and deleted after every node and tool is gone.
  void AdoptNamespaces(std::unique_ptr<NamespacePair> pair) { namespaces_ = std::move(pair); }
  // Kills every tool and node still running (Node and Tool pointers dangle after), then deletes
  // the namespaces; for a test that checks the cleanup itself.
  void EndProcessesAndNamespaces();

 private:
  Tool* StartTool(const std::string& label, std::vector<std::string> argv,
                  const std::vector<std::string>& prefix);

  testing::TempDir dir_;
  TaskId task_;
  std::unique_ptr<NamespacePair> namespaces_;  // declared before the processes: outlives them
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Tool>> tools_;
  bool logs_printed_ = false;
};

}  // namespace airt::e2e
