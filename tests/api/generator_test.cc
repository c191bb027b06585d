// Streaming generators over the real RPC stack, in one process: a WorkerService served over a
// socket pair runs generator tasks whose items (its executor's fallback emits them through
// ThisThreadsGenerator) reach an owner's GeneratorStream through the GeneratorSink the pushed
// TaskSpec carries. The owner side is the core worker's own stream and memory store; the
// consumer takes items on a thread of its own while the test's thread runs the loop.
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <capnp/rpc-twoparty.h>
#include <gtest/gtest.h>
#include <kj/async-io.h>

#include "airt/driver.h"
#include "airt/internal/invoker.h"
#include "api/core_worker/generator_stream.h"
#include "api/core_worker/memory_store.h"
#include "api/internal/task_executor.h"
#include "api/internal/worker_service.h"
#include "common/inbox.h"
#include "common/rpc_status.h"
#include "tests/api/local_store_test.h"
#include "tests/testing/test_support.h"

namespace airt::internal {
namespace {

using namespace std::chrono_literals;
using core_worker::GeneratorStream;
using core_worker::ObjectEntry;

capnp::Data::Reader AsData(const std::string& s) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

// The executor's fallback: "count" emits items "0", "1", ... up to `items` (item `large_index`
// as 200 KiB, above the inline threshold), counting them in `made`; "fail" emits two, then
// raises; "endless" emits until Emit throws, recording what it threw.
struct Generators {
  int items = 3;
  int large_index = -1;
  std::atomic<int> made{0};
  std::atomic<bool> saw_cancelled{false};

  internal::InvokeOutcome Call(const std::string& function) {
    std::shared_ptr<internal::GeneratorEmitter> emitter = internal::ThisThreadsGenerator();
    if (!emitter) return internal::UserException("not a streaming task");
    try {
      if (function == "count") {
        for (int i = 0; i < items; ++i) {
          ++made;
          emitter->Emit(i == large_index ? std::string(200 << 10, 'x') : std::to_string(i));
        }
      } else if (function == "fail") {
        emitter->Emit("0");
        emitter->Emit("1");
        return internal::UserException("failed after 2 items");
      } else if (function == "endless") {
        for (int i = 0;; ++i) {
          ++made;
          emitter->Emit(std::to_string(i));
        }
      }
    } catch (const TaskCancelledError& e) {
      saw_cancelled = true;
      return internal::UserException(std::string("cancelled: ") + e.what());
    } catch (const std::exception& e) {
      return internal::UserException(e.what());
    }
    return internal::InvokeOutcome{};
  }
};

class GeneratorStreamTest : public testing::LocalStoreTest {
 protected:
  ~GeneratorStreamTest() noexcept override {}  // kj members' destructors may throw; none does
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartStore(8 << 20));
    TaskExecutor::Options options;
    options.fallback = [this](TaskKind, const std::string& function, void*,
                              std::span<const std::string_view>) {
      return generators_.Call(function);
    };
    executor_ = std::make_unique<TaskExecutor>(registry_, client_.get(), options);
    auto pipe = io_.provider->newTwoWayPipe();
    server_end_ = kj::mv(pipe.ends[1]);
    client_end_ = kj::mv(pipe.ends[0]);
    auto exit = kj::newPromiseAndFulfiller<void>();
    server_rpc_ = kj::heap<capnp::TwoPartyClient>(
        *server_end_,
        kj::heap<WorkerService>(*executor_, JobId(), ReturnsAt{"127.0.0.1:1", "127.0.0.1:2"},
                                kj::mv(exit.fulfiller)),
        capnp::rpc::twoparty::Side::SERVER);
    client_rpc_ = kj::heap<capnp::TwoPartyClient>(*client_end_);
    worker_ = client_rpc_->bootstrap().castAs<proto::Worker>();
  }
  void TearDown() override {
    worker_ = nullptr;
    client_rpc_ = nullptr;
    server_rpc_ = nullptr;
    inbox_.Close();
    executor_.reset();
  }

  std::shared_ptr<GeneratorStream> Stream(const TaskId& task, int64_t backpressure) {
    core_worker::StreamHooks hooks;
    hooks.free = [this](const ObjectId& id) { freed_.push_back(id); };
    hooks.free_at = [this](const std::string&, const ObjectId& id) { freed_at_.push_back(id); };
    hooks.post = [this](std::function<void()> fn) { inbox_.Post([fn = std::move(fn)] { fn(); }); };
    return std::make_shared<GeneratorStream>(task, "gen", backpressure, memory_, std::move(hooks));
  }

  // Pushes `function` as task `task` with a sink over `stream`; the reply's promise.
  kj::Promise<bool> Push(const TaskId& task, const std::string& function,
                         std::shared_ptr<GeneratorStream> stream) {
    auto request = worker_.pushTaskRequest();
    auto spec = request.initTask();
    spec.setTaskId(AsData(task.Binary()));
    spec.setJobId(AsData(task.Job().Binary()));
    spec.setFunctionName(function);
    spec.setNumReturns(1);
    spec.setGeneratorSink(core_worker::MakeGeneratorSink(stream));
    return request.send().then([](auto reply) { return reply.getFailed(); });
  }

  // The values of the items Take gives, until the end (a consumer thread); errors as "error:".
  std::future<std::vector<std::string>> Consume(std::shared_ptr<GeneratorStream> stream,
                                                std::function<void(int taken)> after = nullptr) {
    return std::async(std::launch::async, [this, stream, after] {
      std::vector<std::string> values;
      for (int taken = 1;; ++taken) {
        Result<std::optional<ObjectId>> next = stream->Take(20'000);
        if (!next.ok()) {
          values.push_back("take failed: " + next.status().ToString());
          break;
        }
        if (!*next) break;
        Result<std::vector<ObjectEntry>> entry =
            memory_.Wait(std::span<const ObjectId>(&**next, 1), 20'000);
        if (!entry.ok()) {
          values.push_back("missing " + (*next)->Hex());
          break;
        }
        const ObjectEntry& got = (*entry)[0];
        if (got.error) {
          values.push_back("error: " + got.error->message);
        } else if (got.location) {
          values.push_back("stored " + std::to_string(got.location->size));
        } else {
          values.push_back(*got.value);
        }
        if (after) after(taken);
      }
      return values;
    });
  }

  TaskId NewTask() const { return TaskId::Of(ActorId::NilFor(job_)); }
  // Records the task's completion as the core worker does from its reply.
  void Complete(const TaskId& task, std::optional<core_worker::ObjectError> error) {
    ObjectEntry done;
    if (error) {
      done.error = std::move(error);
    } else {
      done.value = std::make_shared<const std::string>("\xc0");
    }
    memory_.Put(ObjectId::ForReturn(task, 1), std::move(done));
  }
  template <typename T>
  T Wait(kj::Promise<T> promise) {
    return io_.provider->getTimer()
        .timeoutAfter(20 * kj::SECONDS, kj::mv(promise))
        .wait(io_.waitScope);
  }
  // Runs the loop until `ready` (a consumer's future) is.
  template <typename T>
  T WaitFor(std::future<T>& ready) {
    auto deadline = std::chrono::steady_clock::now() + 20s;
    while (ready.wait_for(0ms) != std::future_status::ready &&
           std::chrono::steady_clock::now() < deadline) {
      io_.provider->getTimer().afterDelay(1 * kj::MILLISECONDS).wait(io_.waitScope);
    }
    return ready.get();
  }

  kj::AsyncIoContext io_ = kj::setupAsyncIo();
  Inbox inbox_;
  kj::Promise<void> serving_ = inbox_.Serve().eagerlyEvaluate(nullptr);
  core_worker::MemoryStore memory_;
  Generators generators_;
  std::unique_ptr<TaskExecutor> executor_;
  kj::Own<kj::AsyncIoStream> server_end_, client_end_;
  kj::Own<capnp::TwoPartyClient> server_rpc_, client_rpc_;
  proto::Worker::Client worker_ = nullptr;
  JobId job_ = JobId::FromRaw(reinterpret_cast<const uint8_t*>("\x07\x00\x00\x00"));
  std::vector<ObjectId> freed_, freed_at_;
};

TEST_F(GeneratorStreamTest, ItemsReachTheOwnerInOrderLargeOnesInTheStore) {
  generators_.items = 4;
  generators_.large_index = 2;
  TaskId task = NewTask();
  auto stream = Stream(task, core_worker::kNoGeneratorBackpressure);
  EXPECT_FALSE(Wait(Push(task, "count", stream)));
  Complete(task, std::nullopt);
  auto values = Consume(stream);
  EXPECT_EQ(WaitFor(values),
            (std::vector<std::string>{"0", "1", "stored " + std::to_string(200 << 10), "3"}));
  EXPECT_TRUE(client_->Contains(GeneratorStream::ItemId(task, 2)));
}

TEST_F(GeneratorStreamTest, TheConsumerTakesItem0BeforeTheLastIsMade) {
  generators_.items = 3;
  TaskId task = NewTask();
  auto stream = Stream(task, /*backpressure=*/1);
  kj::Promise<bool> reply = Push(task, "count", stream).eagerlyEvaluate(nullptr);
  std::atomic<int> made_at_first{-1};
  auto values = Consume(stream, [&](int taken) {
    if (taken == 1) made_at_first = generators_.made.load();
  });
  // The worker is held back after item 1 until the consumer took item 0; it answers once done.
  EXPECT_FALSE(Wait(kj::mv(reply)));
  Complete(task, std::nullopt);
  EXPECT_EQ(WaitFor(values), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_LE(made_at_first.load(), 2);
}

TEST_F(GeneratorStreamTest, BackpressureHoldsTheGeneratorNItemsAhead) {
  generators_.items = 10;
  constexpr int kAhead = 3;
  TaskId task = NewTask();
  auto stream = Stream(task, kAhead);
  kj::Promise<bool> reply = Push(task, "count", stream).eagerlyEvaluate(nullptr);
  std::atomic<int> worst{0};
  std::atomic<bool> reached{true};
  auto values = Consume(stream, [&](int taken) {
    if (taken + kAhead <= generators_.items &&
        !testing::WaitUntil([&] { return generators_.made >= taken + kAhead; }, 10s)) {
      reached = false;
    }
    worst = std::max(worst.load(), generators_.made.load() - taken);
  });
  EXPECT_FALSE(Wait(kj::mv(reply)));
  Complete(task, std::nullopt);
  EXPECT_EQ(WaitFor(values).size(), 10u);
  EXPECT_TRUE(reached.load());
  EXPECT_LE(worst.load(), kAhead);
}

TEST_F(GeneratorStreamTest, AnErrorAfterKItemsIsTheNextItem) {
  TaskId task = NewTask();
  auto stream = Stream(task, core_worker::kNoGeneratorBackpressure);
  EXPECT_TRUE(Wait(Push(task, "fail", stream)));  // the pushTask answers the error
  Complete(task, core_worker::ObjectError{core_worker::ErrorKind::USER_EXCEPTION, "gen",
                                          "failed after 2"});
  auto values = Consume(stream);
  EXPECT_EQ(WaitFor(values), (std::vector<std::string>{"0", "1", "error: failed after 2"}));
}

TEST_F(GeneratorStreamTest, ARerunsItemsTheOwnerHasAreDroppedNotDelivered) {
  TaskId task = NewTask();
  auto stream = Stream(task, core_worker::kNoGeneratorBackpressure);
  generators_.items = 2;
  generators_.large_index = 1;
  EXPECT_FALSE(Wait(Push(task, "count", stream)));  // a first run that got 2 items out
  generators_.items = 4;
  EXPECT_FALSE(Wait(Push(task, "count", stream)));  // the retry makes all 4
  Complete(task, std::nullopt);
  auto values = Consume(stream);
  EXPECT_EQ(WaitFor(values),
            (std::vector<std::string>{"0", "stored " + std::to_string(200 << 10), "2", "3"}));
  // The retry's copy of item 1 is the same object in the same store: it stays.
  EXPECT_TRUE(freed_at_.empty());
  EXPECT_TRUE(client_->Contains(GeneratorStream::ItemId(task, 1)));
}

TEST_F(GeneratorStreamTest, CancellingFailsTheHeldItemAndStopsTheGenerator) {
  TaskId task = NewTask();
  auto stream = Stream(task, /*backpressure=*/1);
  kj::Promise<bool> reply = Push(task, "endless", stream).eagerlyEvaluate(nullptr);
  // Nobody consumes: the worker is held at item 0 (making item 1 would put it 2 ahead).
  while (generators_.made < 1) {
    io_.provider->getTimer().afterDelay(1 * kj::MILLISECONDS).wait(io_.waitScope);
  }
  Complete(task, core_worker::ObjectError{core_worker::ErrorKind::CANCELLED, "gen", "cancelled"});
  EXPECT_TRUE(Wait(kj::mv(reply)));
  EXPECT_TRUE(generators_.saw_cancelled.load());
  EXPECT_LE(generators_.made.load(), 2);
  auto values = Consume(stream);
  std::vector<std::string> got = WaitFor(values);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), "error: cancelled");
}

TEST_F(GeneratorStreamTest, AbandoningFreesTheUntakenItemsAndReleasesTheGenerator) {
  generators_.items = 5;
  TaskId task = NewTask();
  auto stream = Stream(task, /*backpressure=*/1);
  kj::Promise<bool> reply = Push(task, "count", stream).eagerlyEvaluate(nullptr);
  ObjectId first = GeneratorStream::ItemId(task, 0);
  while (!memory_.Ready(std::span<const ObjectId>(&first, 1))[0]) {  // item 0 reached the owner
    io_.provider->getTimer().afterDelay(1 * kj::MILLISECONDS).wait(io_.waitScope);
  }
  stream->Abandon();
  EXPECT_FALSE(Wait(kj::mv(reply)));  // no longer held back: it ran to its end
  EXPECT_EQ(generators_.made.load(), 5);
  ASSERT_FALSE(freed_.empty());
  EXPECT_EQ(freed_[0], GeneratorStream::ItemId(task, 0));
}

TEST_F(GeneratorStreamTest, SinkRejectsAnItemPastTheNextOne) {
  TaskId task = NewTask();
  auto stream = Stream(task, core_worker::kNoGeneratorBackpressure);
  proto::GeneratorSink::Client sink = core_worker::MakeGeneratorSink(stream);
  auto request = sink.itemRequest();
  request.setIndex(5);
  request.initValue().setInline(AsData(std::string("x")));
  Status sent = CatchKj([&] { Wait(request.send().ignoreResult()); });
  EXPECT_EQ(sent.code(), Code::kInvalidArgument) << sent.ToString();
  auto wrong = sink.itemRequest();
  wrong.setIndex(0);
  auto object = wrong.initValue().initObject();
  object.setObjectId(AsData(std::string("short")));
  sent = CatchKj([&] { Wait(wrong.send().ignoreResult()); });
  EXPECT_EQ(sent.code(), Code::kInvalidArgument) << sent.ToString();
}

}  // namespace
}  // namespace airt::internal
