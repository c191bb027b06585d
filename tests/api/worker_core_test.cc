// airt-worker's parts in one process: loading libraries, validating pushed tasks, and the task
// executor over a real in-process store.
#include <dlfcn.h>

#include <chrono>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <gtest/gtest.h>

#include "airt/api.h"
#include "api/internal/code_loader.h"
#include "api/internal/task_executor.h"
#include "api/internal/worker_options.h"
#include "api/internal/worker_service.h"
#include "objectstore/object_store.h"
#include "tests/api/local_store_test.h"
#include "tests/testing/test_support.h"

namespace airt::internal {
namespace {

using internal::Deserialize;
using internal::Serialize;

int Twice(int x) { return 2 * x; }
std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}
void Nothing() {}

TEST(CodeLoader, LoadsLibrariesAndSkipsOnesThatFailToLoad) {
  testing::TempDir dir;
  { std::ofstream(dir.File("broken.so")) << "not an ELF file"; }
  { std::ofstream(dir.File("notes.txt")) << "not a library"; }
  std::string path =
      std::string(AIRT_TEST_FUNCTIONS_PATH) + ":" + dir.path() + ":" + dir.File("missing-dir");
  std::vector<LoadedLibrary> loaded = LoadCodeSearchPath(path);
  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_EQ(loaded[0].path, AIRT_TEST_FUNCTIONS_PATH);
  EXPECT_EQ(loaded[0].error, "");
  EXPECT_EQ(loaded[1].path, dir.File("broken.so"));
  EXPECT_NE(loaded[1].error.find("broken.so"), std::string::npos) << loaded[1].error;
  EXPECT_NE(loaded[2].error, "");
  // The library's AIRT_REMOTE functions registered in this process's registry.
  EXPECT_NE(internal::FunctionRegistry::Global().Find("concat"), nullptr);
}

TEST(WorkerOptions, ParsesFlagsAndRejectsMissingOrMalformedOnes) {
  WorkerId id = WorkerId::FromRandom();
  std::vector<std::string> args{"airt-worker",
                                "--node-address=127.0.0.1",
                                "--node-port=7000",
                                "--worker-id=" + id.Hex(),
                                "--store-socket=/tmp/s.sock",
                                "--transfer-address=127.0.0.1:7001",
                                "--inline-threshold=1K"};
  auto parse = [](std::vector<std::string> a) {
    std::vector<char*> argv;
    for (auto& s : a) argv.push_back(s.data());
    return ParseWorkerOptions(static_cast<int>(argv.size()), argv.data());
  };
  Result<WorkerOptions> options = parse(args);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->worker_id, id);
  EXPECT_EQ(options->node_port, 7000);
  EXPECT_TRUE(options->job_id.IsNil());
  EXPECT_EQ(options->inline_threshold, 1024u);

  auto without = [&](const std::string& prefix) {
    std::vector<std::string> a;
    for (const auto& s : args) {
      if (s.rfind(prefix, 0) != 0) a.push_back(s);
    }
    return parse(a).status();
  };
  EXPECT_EQ(without("--worker-id").code(), Code::kInvalidArgument);
  EXPECT_EQ(without("--store-socket").code(), Code::kInvalidArgument);
  EXPECT_EQ(without("--transfer-address").code(), Code::kInvalidArgument);
  args.push_back("--node-port=70000");
  EXPECT_EQ(parse(args).status().code(), Code::kInvalidArgument);
  args.back() = "--job-id=123";
  EXPECT_EQ(parse(args).status().code(), Code::kInvalidArgument);
}

// A TaskSpec built in a message, with setters for the fields the edge checks.
struct SpecBuilder {
  capnp::MallocMessageBuilder message;
  proto::TaskSpec::Builder spec = message.initRoot<proto::TaskSpec>();
  SpecBuilder(const TaskId& task, const std::string& function) {
    spec.setTaskId(capnp::Data::Reader(task.data(), TaskId::kSize));
    spec.setJobId(capnp::Data::Reader(task.Job().data(), JobId::kSize));
    spec.setFunctionName(function);
    spec.setNumReturns(1);
  }
};

TEST(ParseTaskSpec, ReadsInlineAndObjectArguments) {
  TaskId task = TaskId::Of(ActorId::NilFor(JobId::FromRandom()));
  SpecBuilder b(task, "add");
  auto args = b.spec.initArgs(2);
  std::string bytes = Serialize(5);
  args[0].setInline(
      capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size()));
  ObjectId object = ObjectId::ForReturn(task, 1);
  args[1].initObject().setObjectId(capnp::Data::Reader(object.data(), ObjectId::kSize));
  args[1].getObject().setTransferAddress("10.0.0.1:9");
  Result<TaskToRun> parsed = ParseTaskSpec(b.spec.asReader(), task.Job());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->task_id, task);
  EXPECT_EQ(parsed->function_name, "add");
  ASSERT_EQ(parsed->args.size(), 2u);
  EXPECT_EQ(parsed->args[0].inline_bytes, bytes);
  EXPECT_TRUE(parsed->args[1].is_object);
  EXPECT_EQ(parsed->args[1].object_id, object);
  EXPECT_EQ(parsed->args[1].transfer_address, "10.0.0.1:9");
}

TEST(ParseTaskSpec, ReadsTheResourcesTheTaskHoldsAndTheActorsRestarts) {
  TaskId task = TaskId::Of(ActorId::NilFor(JobId::FromRandom()));
  SpecBuilder b(task, "add");
  auto resources = b.spec.initResources(2);
  resources[0].setName("CPU");
  resources[0].setAmount(0.5);
  resources[1].setName("GPU");
  resources[1].setAmount(1);
  b.spec.setActorRestarts(3);
  Result<TaskToRun> parsed = ParseTaskSpec(b.spec.asReader(), task.Job());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->resources, (std::map<std::string, double>{{"CPU", 0.5}, {"GPU", 1}}));
  EXPECT_EQ(parsed->actor_restarts, 3u);
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN()}) {
    resources[1].setAmount(bad);
    Status s = ParseTaskSpec(b.spec.asReader(), task.Job()).status();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("resources"), std::string::npos) << s.message();
  }
}

TEST(ParseTaskSpec, RejectsMalformedSpecNamingTheField) {
  TaskId task = TaskId::Of(ActorId::NilFor(JobId::FromRandom()));
  {
    SpecBuilder b(task, "add");
    b.spec.setTaskId(capnp::Data::Reader(task.data(), 5));
    Status s = ParseTaskSpec(b.spec.asReader(), JobId::Nil()).status();
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("taskId"), std::string::npos) << s.message();
  }
  {
    SpecBuilder b(task, "");
    EXPECT_EQ(ParseTaskSpec(b.spec.asReader(), JobId::Nil()).status().code(),
              Code::kInvalidArgument);
  }
  {
    SpecBuilder b(task, "add");
    b.spec.setNumReturns(kMaxTaskReturns + 1);
    EXPECT_EQ(ParseTaskSpec(b.spec.asReader(), JobId::Nil()).status().code(),
              Code::kInvalidArgument);
  }
  {
    SpecBuilder b(task, "add");
    b.spec.initArgs(1)[0].initObject().setObjectId(capnp::Data::Reader(task.data(), 24));
    Status s = ParseTaskSpec(b.spec.asReader(), JobId::Nil()).status();
    EXPECT_NE(s.message().find("args[0].objectId"), std::string::npos) << s.message();
  }
  {
    SpecBuilder b(task, "add");
    Status s = ParseTaskSpec(b.spec.asReader(), JobId::FromRandom()).status();
    EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  }
}

// A TaskExecutor over a real store, with its own registry.
class TaskExecutorTest : public testing::LocalStoreTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartStore(16 << 20));
    ASSERT_TRUE(internal::RegisterRemoteFunctions(registry_, "Twice, Repeat, Nothing", Twice,
                                                  Repeat, Nothing));
    TaskExecutor::Options executor_options;
    executor_options.inline_threshold = 64;
    executor_options.fetch_timeout_ms = 200;
    executor_options.code_search_path = "/opt/code";
    executor_ = std::make_unique<TaskExecutor>(registry_, client_.get(), executor_options);
  }
  TaskToRun Task(const std::string& function, std::vector<std::string> inline_args,
                 uint32_t num_returns = 1) {
    TaskToRun task;
    task.task_id = TaskId::Of(ActorId::NilFor(JobId::FromRandom()));
    task.function_name = function;
    for (auto& a : inline_args) task.args.push_back(TaskArgument{false, std::move(a), {}, ""});
    task.num_returns = num_returns;
    return task;
  }

  std::unique_ptr<TaskExecutor> executor_;
};

TEST_F(TaskExecutorTest, ReturnsInlineValueAtOrBelowThresholdAndStoresLargerOne) {
  TaskOutcome small = executor_->Run(Task("Twice", {Serialize(21)}));
  ASSERT_TRUE(small.status.ok()) << small.status.ToString();
  ASSERT_FALSE(small.failure);
  ASSERT_EQ(small.returns.size(), 1u);
  EXPECT_FALSE(small.returns[0].in_store);
  EXPECT_EQ(Deserialize<int>(small.returns[0].inline_bytes), 42);

  TaskToRun task = Task("Repeat", {Serialize(std::string("abc")), Serialize(100)});
  TaskOutcome large = executor_->Run(task);
  ASSERT_TRUE(large.status.ok()) << large.status.ToString();
  ASSERT_EQ(large.returns.size(), 1u);
  ASSERT_TRUE(large.returns[0].in_store);
  EXPECT_EQ(large.returns[0].object_id, ObjectId::ForReturn(task.task_id, 1));
  auto pin = client_->Get(large.returns[0].object_id, 0);
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  std::string_view data(reinterpret_cast<const char*>(pin->data().data()), pin->data().size());
  EXPECT_EQ(large.returns[0].size, data.size());
  EXPECT_EQ(Deserialize<std::string>(data).size(), 300u);

  // A re-run finds its return there already.
  TaskOutcome again = executor_->Run(task);
  EXPECT_TRUE(again.status.ok()) << again.status.ToString();
}

TEST_F(TaskExecutorTest, ReturnsNilForVoidFunctionWhenOneReturnIsAsked) {
  TaskOutcome one = executor_->Run(Task("Nothing", {}, 1));
  ASSERT_TRUE(one.status.ok());
  ASSERT_EQ(one.returns.size(), 1u);
  EXPECT_EQ(one.returns[0].inline_bytes, "\xc0");
  TaskOutcome none = executor_->Run(Task("Nothing", {}, 0));
  EXPECT_TRUE(none.returns.empty());
  TaskOutcome dropped = executor_->Run(Task("Twice", {Serialize(1)}, 0));
  EXPECT_TRUE(dropped.returns.empty());
}

TEST_F(TaskExecutorTest, FailsWithBadArgumentsWhenReturnCountDiffers) {
  TaskOutcome out = executor_->Run(Task("Twice", {Serialize(1)}, 3));
  ASSERT_TRUE(out.failure);
  EXPECT_EQ(out.failure->kind, proto::ErrorKind::BAD_ARGUMENTS);
}

TEST_F(TaskExecutorTest, FailsWithFunctionNotFoundNamingFunctionAndSearchPath) {
  TaskOutcome out = executor_->Run(Task("Missing", {}));
  ASSERT_TRUE(out.failure);
  EXPECT_EQ(out.failure->kind, proto::ErrorKind::FUNCTION_NOT_FOUND);
  EXPECT_NE(out.failure->message.find("'Missing'"), std::string::npos) << out.failure->message;
  EXPECT_NE(out.failure->message.find("/opt/code"), std::string::npos) << out.failure->message;
  EXPECT_NE(out.failure->message.find("Repeat, Twice"), std::string::npos) << out.failure->message;
}

TEST_F(TaskExecutorTest, ReadsObjectArgumentFromStore) {
  TaskToRun task = Task("Twice", {});
  ObjectId id = ObjectId::ForPut(task.task_id, 1);
  std::string bytes = Serialize(8);
  ASSERT_TRUE(client_
                  ->Put(id, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                     bytes.size()))
                  .ok());
  task.args.push_back({true, "", id, "127.0.0.1:1"});  // local: the address is not used
  TaskOutcome out = executor_->Run(task);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(Deserialize<int>(out.returns.at(0).inline_bytes), 16);
  EXPECT_TRUE(client_->Pins().empty());
}

TEST_F(TaskExecutorTest, FailsWithObjectLostWhenObjectArgumentCannotBeFetched) {
  TaskToRun task = Task("Twice", {});
  ObjectId id = ObjectId::ForPut(task.task_id, 1);
  task.args.push_back({true, "", id, ""});  // not here, nowhere to pull from
  TaskOutcome waited = executor_->Run(task);
  ASSERT_TRUE(waited.failure);
  EXPECT_EQ(waited.failure->kind, proto::ErrorKind::OBJECT_LOST) << waited.failure->message;
  EXPECT_NE(waited.failure->message.find(id.Hex()), std::string::npos);
  EXPECT_NE(waited.failure->message.find("kDeadlineExceeded"), std::string::npos);
  task.args[0].transfer_address = "127.0.0.1:1";  // nobody listens there
  TaskOutcome pulled = executor_->Run(task);
  ASSERT_TRUE(pulled.failure);
  EXPECT_EQ(pulled.failure->kind, proto::ErrorKind::OBJECT_LOST) << pulled.failure->message;
  EXPECT_NE(pulled.failure->message.find("127.0.0.1:1"), std::string::npos);
}

TEST_F(TaskExecutorTest, RunsSubmittedTasksInOrderOnItsThreadThenMarkers) {
  std::vector<std::promise<TaskOutcome>> results(5);
  std::promise<void> marker;
  for (int i = 0; i < 5; ++i) {
    executor_->Submit(Task("Twice", {Serialize(i)}),
                      [&results, i](TaskOutcome o) { results[i].set_value(std::move(o)); });
  }
  executor_->AfterQueued([&] { marker.set_value(); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  ASSERT_EQ(marker.get_future().wait_until(deadline), std::future_status::ready);
  for (int i = 0; i < 5; ++i) {
    auto f = results[i].get_future();
    ASSERT_EQ(f.wait_until(deadline), std::future_status::ready);
    EXPECT_EQ(Deserialize<int>(f.get().returns.at(0).inline_bytes), 2 * i);
  }
}

}  // namespace
}  // namespace airt::internal
