// The real airt-worker process running tasks from the test functions library: inline and stored
// returns, object arguments, errors, ordering. Lifecycle (registration, exit, a lost node) is in
// worker_lifecycle_test.cc.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "airt/internal/serialization.h"
#include "objectstore/transfer.h"
#include "tests/api/test_types.h"
#include "tests/api/worker_harness.h"

namespace airt::testing {
namespace {

using internal::Deserialize;
using internal::Serialize;

class WorkerProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(worker_.WaitForRegistration()) << "worker log:\n" << worker_.Log();
  }
  // The value of an inline single return, checking the reply succeeded.
  template <typename T>
  T InlineValue(const PushReply& reply) {
    EXPECT_TRUE(reply.status.ok()) << reply.status.ToString() << "\nworker log:\n" << worker_.Log();
    EXPECT_FALSE(reply.failed) << reply.message;
    EXPECT_EQ(reply.returns.size(), 1u);
    if (reply.returns.size() != 1) return T();
    EXPECT_FALSE(reply.returns[0].in_store);
    return Deserialize<T>(reply.returns[0].bytes);
  }
  ObjectId PutValue(objectstore::StoreClient& store, const std::string& bytes) {
    ObjectId id = ObjectId::ForPut(worker_.NewTaskId(), 1);
    Status put = store.Put(
        id, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    EXPECT_TRUE(put.ok()) << put.ToString();
    return id;
  }

  WorkerHarness worker_;
};

TEST_F(WorkerProcess, AddReturnsInlineValue) {
  EXPECT_EQ(
      InlineValue<int>(worker_.Push("add", {Arg::Inline(Serialize(2)), Arg::Inline(Serialize(3))})),
      5);
}

TEST_F(WorkerProcess, ConcatReturnsInlineString) {
  PushReply reply = worker_.Push(
      "concat", {Arg::Inline(Serialize(std::string("air"))), Arg::Inline(Serialize("t"))});
  EXPECT_EQ(InlineValue<std::string>(reply), "airt");
}

TEST_F(WorkerProcess, RoundTripsMsgpackDefineStruct) {
  Point p{1.5, -2, "p", {"a"}};
  PushReply reply = worker_.Push("scale", {Arg::Inline(Serialize(p)), Arg::Inline(Serialize(2.0))});
  EXPECT_EQ(InlineValue<Point>(reply), (Point{3, -4, "p", {"a", "scaled"}}));
  std::vector<std::string> words{"a", "b", "a"};
  PushReply counts = worker_.Push("count_words", {Arg::Inline(Serialize(words))});
  EXPECT_EQ((InlineValue<std::map<std::string, int>>(counts)),
            (std::map<std::string, int>{{"a", 2}, {"b", 1}}));
}

TEST_F(WorkerProcess, ReportsUserExceptionWhenFunctionThrows) {
  PushReply reply = worker_.Push("boom", {});
  ASSERT_TRUE(reply.status.ok()) << reply.status.ToString();
  EXPECT_TRUE(reply.failed);
  EXPECT_EQ(reply.kind, proto::ErrorKind::USER_EXCEPTION);
  EXPECT_EQ(reply.function_name, "boom");
  EXPECT_EQ(reply.message, "boom");
  EXPECT_EQ(reply.data, "boom");  // the exception in TaskError.data: a C++ one's what()
  EXPECT_TRUE(reply.returns.empty());
  // The worker goes on serving.
  EXPECT_EQ(
      InlineValue<int>(worker_.Push("add", {Arg::Inline(Serialize(1)), Arg::Inline(Serialize(1))})),
      2);
}

TEST_F(WorkerProcess, ReportsFunctionNotFoundNamingFunctionAndCodeSearchPath) {
  PushReply reply = worker_.Push("no_such_function", {});
  ASSERT_TRUE(reply.status.ok()) << reply.status.ToString();
  EXPECT_TRUE(reply.failed);
  EXPECT_EQ(reply.kind, proto::ErrorKind::FUNCTION_NOT_FOUND);
  EXPECT_EQ(reply.function_name, "no_such_function");
  EXPECT_NE(reply.message.find("'no_such_function'"), std::string::npos) << reply.message;
  EXPECT_NE(reply.message.find(AIRT_TEST_FUNCTIONS_DIR), std::string::npos) << reply.message;
}

TEST_F(WorkerProcess, ReportsBadArgumentsNamingFunctionAndIndexWhenTypeDiffers) {
  PushReply reply = worker_.Push("add", {Arg::Inline(Serialize(1)), Arg::Inline(Serialize("x"))});
  ASSERT_TRUE(reply.status.ok()) << reply.status.ToString();
  EXPECT_TRUE(reply.failed);
  EXPECT_EQ(reply.kind, proto::ErrorKind::BAD_ARGUMENTS);
  EXPECT_EQ(reply.message,
            "bad arguments for 'add': argument 1 (0-based, of 2): expected int, got a msgpack str");
  PushReply garbage = worker_.Push("add", {Arg::Inline("\xc1"), Arg::Inline(Serialize(1))});
  EXPECT_EQ(garbage.kind, proto::ErrorKind::BAD_ARGUMENTS);
}

TEST_F(WorkerProcess, VoidFunctionAnswersNilOrNothing) {
  PushReply one = worker_.Push("do_nothing", {}, 1);
  ASSERT_TRUE(one.status.ok()) << one.status.ToString();
  ASSERT_EQ(one.returns.size(), 1u);
  EXPECT_EQ(one.returns[0].bytes, "\xc0");  // msgpack nil
  PushReply none = worker_.Push("do_nothing", {}, 0);
  ASSERT_TRUE(none.status.ok()) << none.status.ToString();
  EXPECT_FALSE(none.failed);
  EXPECT_TRUE(none.returns.empty());
}

TEST_F(WorkerProcess, PutsLargeReturnInNodeStore) {
  TaskId task = worker_.NewTaskId();
  PushReply reply;
  reply = worker_.Wait(worker_.Send(task, "large_bytes", {}));
  ASSERT_TRUE(reply.status.ok()) << reply.status.ToString();
  ASSERT_FALSE(reply.failed) << reply.message;
  ASSERT_EQ(reply.returns.size(), 1u);
  const PushReply::Return& r = reply.returns[0];
  ASSERT_TRUE(r.in_store);
  EXPECT_EQ(r.id, ObjectId::ForReturn(task, 1));
  EXPECT_EQ(r.transfer_address, worker_.transfer_address());

  auto pin = worker_.store().Get(r.id, 0);
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_EQ(pin->data().size(), r.size);
  auto bytes = Deserialize<std::vector<uint8_t>>(
      std::string_view(reinterpret_cast<const char*>(pin->data().data()), pin->data().size()));
  ASSERT_EQ(bytes.size(), kLargeBytes);
  for (size_t i = 0; i < bytes.size(); ++i) {
    ASSERT_EQ(bytes[i], LargePattern(i)) << "at " << i;
  }
}

TEST_F(WorkerProcess, ReadsObjectArgumentAlreadyInStore) {
  std::vector<uint8_t> bytes(300 << 10, 3);
  ObjectId id = PutValue(worker_.store(), Serialize(bytes));
  // The address is not used for an object already here: nobody listens there.
  PushReply reply = worker_.Push("sum_bytes", {Arg::Object(id, "127.0.0.1:1")});
  EXPECT_EQ(InlineValue<uint64_t>(reply), 3u * bytes.size());
}

TEST_F(WorkerProcess, PullsObjectArgumentFromAnotherNode) {
  // Another node: its own store and transfer service.
  objectstore::StoreOptions options;
  options.socket_path = worker_.dir().File("remote.sock");
  options.capacity_bytes = 8 << 20;
  options.prefault = false;
  auto remote = objectstore::StoreServer::Start(options);
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  auto transfer = objectstore::TransferServer::Start({options.socket_path, "127.0.0.1", 0});
  ASSERT_TRUE(transfer.ok()) << transfer.status().ToString();
  auto remote_client = objectstore::StoreClient::Connect(options.socket_path);
  ASSERT_TRUE(remote_client.ok());
  std::vector<uint8_t> bytes(1 << 20, 1);
  ObjectId id = PutValue(**remote_client, Serialize(bytes));
  ASSERT_FALSE(worker_.store().Contains(id));

  std::string address = "127.0.0.1:" + std::to_string((*transfer)->port());
  PushReply reply = worker_.Push("sum_bytes", {Arg::Object(id, address)});
  EXPECT_EQ(InlineValue<uint64_t>(reply), bytes.size());
  EXPECT_TRUE(worker_.store().Contains(id));  // a secondary copy on the worker's node now
}

TEST_F(WorkerProcess, FailsWithObjectLostWhenObjectArgumentCannotBePulled) {
  ObjectId id = ObjectId::ForPut(worker_.NewTaskId(), 1);
  PushReply reply = worker_.Push("sum_bytes", {Arg::Object(id, "127.0.0.1:1")});
  ASSERT_TRUE(reply.status.ok()) << reply.status.ToString();  // answered, not a dead worker
  ASSERT_TRUE(reply.failed);
  EXPECT_EQ(reply.kind, proto::ErrorKind::OBJECT_LOST) << reply.message;
  EXPECT_NE(reply.message.find(id.Hex()), std::string::npos) << reply.message;
  EXPECT_NE(reply.message.find("127.0.0.1:1"), std::string::npos) << reply.message;
}

TEST_F(WorkerProcess, RunsTasksPushedOnOneConnectionInOrder) {
  constexpr int kTasks = 30;
  std::vector<kj::Promise<PushReply>> sent;
  for (int i = 0; i < kTasks; ++i) {
    sent.push_back(worker_.Send(worker_.NewTaskId(), "record_order", {Arg::Inline(Serialize(i))}));
  }
  for (int i = 0; i < kTasks; ++i) {
    std::vector<int> seen = InlineValue<std::vector<int>>(worker_.Wait(kj::mv(sent[i])));
    std::vector<int> expected;
    for (int j = 0; j <= i; ++j) expected.push_back(j);
    EXPECT_EQ(seen, expected);
  }
}

TEST_F(WorkerProcess, CallsArrivingWhileUserCodeRunsAreAnsweredAfterIt) {
  // A task with nothing ahead of it runs on the worker's RPC thread (two thread hand-offs fewer);
  // what arrives meanwhile waits, in order, and is answered once it is done.
  std::string file = worker_.dir().File("go");
  auto waiting = worker_.Send(worker_.NewTaskId(), "wait_for_file", {Arg::Inline(Serialize(file))});
  auto malformed = worker_.Send(worker_.NewTaskId(), "", {});
  auto sum = worker_.Send(worker_.NewTaskId(), "add",
                          {Arg::Inline(Serialize(2)), Arg::Inline(Serialize(3))});
  { std::ofstream(file) << "go"; }
  EXPECT_EQ(InlineValue<bool>(worker_.Wait(kj::mv(waiting))), true);
  PushReply other = worker_.Wait(kj::mv(malformed));
  EXPECT_EQ(other.status.code(), Code::kInvalidArgument) << other.status.ToString();
  EXPECT_EQ(InlineValue<int>(worker_.Wait(kj::mv(sum))), 5);
}

TEST_F(WorkerProcess, RejectsTaskOfAnotherJob) {
  PushReply reply =
      worker_.Wait(worker_.Send(worker_.NewTaskId(), "add", {}, 1, JobId::FromRandom()));
  EXPECT_EQ(reply.status.code(), Code::kFailedPrecondition) << reply.status.ToString();
}

TEST_F(WorkerProcess, UserStdoutAndStderrGoToProcessOutput) {
  PushReply reply = worker_.Push("say_hello", {Arg::Inline(Serialize("airt"))}, 0);
  ASSERT_TRUE(reply.status.ok()) << reply.status.ToString();
  EXPECT_TRUE(WaitUntil(
      [&] {
        std::string log = worker_.Log();
        return log.find("hello, airt (from stdout)") != std::string::npos &&
               log.find("hello, airt (from stderr)") != std::string::npos;
      },
      kDeadline))
      << worker_.Log();
}

}  // namespace
}  // namespace airt::testing
