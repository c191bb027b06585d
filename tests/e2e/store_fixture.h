// A GoogleTest fixture for the object store's multi-process tests: each test gets its own temp
// folder, its own airt-store daemon and its own client processes (airt_store_client_tool), all
// killed by pid when the test ends, pass or fail. On failure the daemon's and the tools' output is
// printed. Waiting is always for a condition with a deadline.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "common/ids.h"
#include "objectstore/object_store.h"
#include "tests/testing/test_support.h"

namespace airt::e2e {

using namespace std::chrono_literals;

// Exit status of airt_store_client_tool for a failed store call with `code`.
inline int ToolExitFor(Code code) { return 10 + static_cast<int>(code); }

class StoreFixture : public ::testing::Test {
 protected:
  struct Tool {
    std::string name;
    std::string log;
    std::unique_ptr<testing::ChildProcess> process;
  };

  StoreFixture();
  ~StoreFixture() override;
  void TearDown() override;

  // Starts airt-store on socket() with `flags` (e.g. {"--capacity", "8M"}), waits for its "ready"
  // line and connects observer(). Use under ASSERT_NO_FATAL_FAILURE.
  void StartStore(std::vector<std::string> flags);
  // SIGTERM, then expects a clean exit within the deadline.
  void StopStore();
  bool StoreRunning() { return store_ && store_->Running(); }

  // Starts `airt_store_client_tool <command> <socket> <args...>`, its output in its own log.
  Tool* StartTool(const std::string& command, std::vector<std::string> args);
  // Runs the tool to its end; its exit status, or -1 (and it is killed) past `timeout`.
  int RunTool(const std::string& command, std::vector<std::string> args,
              std::chrono::milliseconds timeout = 60s);
  // Whether the tool printed `text` (waiting until it does, it exits, or `timeout` passes).
  bool WaitForOutput(Tool* tool, std::string_view text, std::chrono::milliseconds timeout = 20s);

  // The test process's own client: for Stats, Contains, Delete and calls whose Status a test
  // inspects. Connected by StartStore.
  objectstore::StoreClient& observer() { return *observer_; }
  objectstore::StoreStats Stats();
  // Polls Stats() until `condition` holds or `timeout` passes.
  bool WaitForStats(const std::function<bool(const objectstore::StoreStats&)>& condition,
                    std::chrono::milliseconds timeout = 20s);

  // Distinct ids per test (a random job), numbered from 1.
  ObjectId Id(uint32_t i) const { return ObjectId::ForPut(task_, i); }
  const std::string& socket() const { return socket_; }
  const testing::TempDir& dir() const { return dir_; }

 private:
  testing::TempDir dir_;
  std::string socket_;
  TaskId task_;
  std::string store_log_;
  std::unique_ptr<testing::ChildProcess> store_;
  std::unique_ptr<objectstore::StoreClient> observer_;
  std::vector<std::unique_ptr<Tool>> tools_;
};

}  // namespace airt::e2e
