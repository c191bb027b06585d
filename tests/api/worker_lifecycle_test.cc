// The airt-worker process's life: registration with its node, loading code, exit, and losing the
// node. Every process is stopped by pid (ChildProcess); every wait has a deadline.
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "airt/internal/serialization.h"
#include "api/internal/worker_process.h"
#include "tests/api/worker_harness.h"

namespace airt::testing {
namespace {

using internal::Deserialize;
using internal::Serialize;

TEST(WorkerLifecycle, RegistersWithNodeGivingItsIdAddressAndPid) {
  WorkerHarness worker;
  ASSERT_TRUE(worker.WaitForRegistration()) << worker.Log();
  RegisteredWorker r = *worker.registration();
  EXPECT_EQ(r.worker_id, worker.worker_id());
  EXPECT_EQ(r.host, "127.0.0.1");
  EXPECT_NE(r.port, 0);
  EXPECT_EQ(r.pid, worker.process().pid());
}

TEST(WorkerLifecycle, ExitsZeroAfterAnsweringExit) {
  WorkerHarness worker;
  ASSERT_TRUE(worker.WaitForRegistration()) << worker.Log();
  PushReply reply = worker.Push("add", {Arg::Inline(Serialize(1)), Arg::Inline(Serialize(2))});
  ASSERT_TRUE(reply.status.ok()) << reply.status.ToString();
  Status exited = worker.CallExit();
  EXPECT_TRUE(exited.ok()) << exited.ToString();
  worker.Disconnect();
  EXPECT_EQ(worker.process().Wait(kDeadline), internal::kExitOk) << worker.Log();
}

TEST(WorkerLifecycle, ExitFinishesTasksPushedBeforeIt) {
  WorkerHarness worker;
  ASSERT_TRUE(worker.WaitForRegistration()) << worker.Log();
  std::string file = worker.dir().File("go");
  auto running = worker.Send(worker.NewTaskId(), "wait_for_file", {Arg::Inline(Serialize(file))});
  auto queued = worker.Send(worker.NewTaskId(), "add",
                            {Arg::Inline(Serialize(20)), Arg::Inline(Serialize(22))});
  // exit's answer waits for both; release the first task once exit is on its way.
  auto exit = worker.SendExit();
  { std::ofstream(file) << "go"; }
  EXPECT_TRUE(CatchKj([&] { worker.Wait(kj::mv(exit)); }).ok());
  PushReply first = worker.Wait(kj::mv(running));
  PushReply second = worker.Wait(kj::mv(queued));
  ASSERT_TRUE(first.status.ok()) << first.status.ToString();
  ASSERT_TRUE(second.status.ok()) << second.status.ToString();
  EXPECT_EQ(Deserialize<int>(second.returns.at(0).bytes), 42);
  // Tasks pushed after exit are refused.
  PushReply late = worker.Push("add", {Arg::Inline(Serialize(1)), Arg::Inline(Serialize(1))});
  EXPECT_EQ(late.status.code(), Code::kUnavailable) << late.status.ToString();
  worker.Disconnect();
  EXPECT_EQ(worker.process().Wait(kDeadline), internal::kExitOk) << worker.Log();
}

TEST(WorkerLifecycle, ExitsWhenNodeConnectionDrops) {
  WorkerHarness worker;
  ASSERT_TRUE(worker.WaitForRegistration()) << worker.Log();
  worker.StopNode();
  EXPECT_EQ(worker.process().Wait(kDeadline), internal::kExitNodeLost) << worker.Log();
  EXPECT_NE(worker.Log().find("the node's connection dropped"), std::string::npos);
}

TEST(WorkerLifecycle, ExitsOneWhenStoreIsNotThere) {
  TempDir dir;
  ChildProcess process(
      {AIRT_WORKER_BIN, "--node-address=127.0.0.1", "--node-port=1",
       "--worker-id=" + WorkerId::FromRandom().Hex(), "--store-socket=" + dir.File("none.sock"),
       "--transfer-address=127.0.0.1:2"},
      dir.File("worker.log"));
  EXPECT_EQ(process.Wait(kDeadline), internal::kExitStartFailed);
  EXPECT_NE(ReadFile(dir.File("worker.log")).find("cannot connect to the object store"),
            std::string::npos)
      << ReadFile(dir.File("worker.log"));
}

TEST(WorkerLifecycle, ExitsOneWhenNodeIsNotThere) {
  TempDir dir;
  objectstore::StoreOptions options;
  options.socket_path = dir.File("store.sock");
  options.capacity_bytes = 4 << 20;
  options.prefault = false;
  auto store = objectstore::StoreServer::Start(options);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  uint16_t closed_port = FakeNodeThread(std::make_shared<FakeNodeState>()).port();  // free again
  ChildProcess process(
      {AIRT_WORKER_BIN, "--node-address=127.0.0.1", "--node-port=" + std::to_string(closed_port),
       "--worker-id=" + WorkerId::FromRandom().Hex(), "--store-socket=" + options.socket_path,
       "--transfer-address=127.0.0.1:2"},
      dir.File("worker.log"));
  EXPECT_EQ(process.Wait(kDeadline), internal::kExitStartFailed);
  EXPECT_NE(ReadFile(dir.File("worker.log")).find("cannot register with the node"),
            std::string::npos)
      << ReadFile(dir.File("worker.log"));
}

TEST(WorkerLifecycle, ExitsTwoOnBadFlags) {
  TempDir dir;
  ChildProcess process({AIRT_WORKER_BIN, "--node-address=127.0.0.1", "--bogus"},
                       dir.File("worker.log"));
  EXPECT_EQ(process.Wait(kDeadline), internal::kExitBadFlags);
  EXPECT_NE(ReadFile(dir.File("worker.log")).find("--bogus"), std::string::npos);
}

TEST(WorkerLifecycle, LogsAndSkipsLibraryThatFailsToLoad) {
  TempDir code;
  { std::ofstream(code.File("libbroken.so")) << "not an ELF file"; }
  WorkerHarness::Options options;
  options.code_search_path = code.path() + ":" + AIRT_TEST_FUNCTIONS_DIR;
  WorkerHarness worker(options);
  ASSERT_TRUE(worker.WaitForRegistration()) << worker.Log();
  PushReply reply = worker.Push("add", {Arg::Inline(Serialize(2)), Arg::Inline(Serialize(2))});
  ASSERT_TRUE(reply.status.ok()) << reply.status.ToString();
  EXPECT_EQ(Deserialize<int>(reply.returns.at(0).bytes), 4);
  std::string log = worker.Log();
  EXPECT_NE(log.find("cannot load " + code.File("libbroken.so")), std::string::npos) << log;
}

TEST(WorkerLifecycle, ServesWithoutCodeSearchPathAnsweringFunctionNotFound) {
  WorkerHarness::Options options;
  options.code_search_path = "";
  WorkerHarness worker(options);
  ASSERT_TRUE(worker.WaitForRegistration()) << worker.Log();
  PushReply reply = worker.Push("add", {});
  ASSERT_TRUE(reply.status.ok()) << reply.status.ToString();
  EXPECT_EQ(reply.kind, proto::ErrorKind::FUNCTION_NOT_FOUND);
  EXPECT_NE(reply.message.find("code search path: none"), std::string::npos) << reply.message;
}

}  // namespace
}  // namespace airt::testing
