// Cancelling tasks inside airt-worker, in one process: the TaskExecutor drops a queued task,
// interrupts a running one through its hook (or lets C++ code run on), runs tasks on the
// caller's thread when asked; the WorkerService validates cancelTask and recurses only for a
// task that runs. Functions are the executor's fallback, steered by name.
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <capnp/capability.h>
#include <gtest/gtest.h>
#include <kj/async-io.h>

#include "api/internal/task_executor.h"
#include "api/internal/worker_service.h"
#include "common/rpc_status.h"
#include "objectstore/object_store.h"
#include "tests/api/local_store_test.h"
#include "tests/testing/test_support.h"

namespace airt::internal {
namespace {

using namespace std::chrono_literals;

// The executor's fallback: "spin" runs until released or interrupted, "where" answers nothing but
// records its thread and ExecutingTaskId(), anything else returns at once.
struct Functions {
  std::atomic<bool> release{false};
  std::atomic<bool> spinning{false};
  std::atomic<int> spins{0};  // "spin" calls started
  std::thread::id where_thread;
  TaskId where_task;

  internal::InvokeOutcome Call(const std::string& function) {
    if (function == "spin") {
      spinning = true;
      ++spins;
      while (!release) std::this_thread::sleep_for(1ms);
    } else if (function == "where") {
      where_thread = std::this_thread::get_id();
      where_task = ExecutingTaskId();
    }
    return internal::InvokeOutcome{};
  }
};

class TaskCancel : public testing::LocalStoreTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartStore(1 << 20)); }
  // An executor whose fallback is functions_; with `interruptible`, cancelling a running task
  // records its id in interrupted_ and releases it.
  std::unique_ptr<TaskExecutor> Executor(bool interruptible, bool on_caller_thread = false) {
    TaskExecutor::Options options;
    options.fallback = [this](TaskKind kind, const std::string& function, void*,
                              std::span<const std::string_view>) {
      internal::InvokeOutcome outcome = functions_.Call(function);
      if (kind == TaskKind::kActorCreation) outcome.instance = std::make_shared<int>(0);
      return outcome;
    };
    if (interruptible) {
      options.interrupt = [this](const TaskId& task) {
        interrupted_.push_back(task);
        functions_.release = true;
      };
    }
    options.on_caller_thread = on_caller_thread;
    return std::make_unique<TaskExecutor>(registry_, client_.get(), options);
  }
  static TaskToRun Task(const std::string& function) {
    TaskToRun task;
    task.task_id = TaskId::Of(
        ActorId::NilFor(JobId::FromRaw(reinterpret_cast<const uint8_t*>("\x01\x00\x00\x00"))));
    task.function_name = function;
    task.num_returns = 1;
    return task;
  }
  // A task of `kind` on the actor `actor`.
  static TaskToRun ActorTask(const ActorId& actor, TaskKind kind, const std::string& function) {
    TaskToRun task = Task(function);
    task.task_id = TaskId::Of(actor);
    task.kind = kind;
    task.actor_id = actor;
    return task;
  }
  // Submits `task`; its outcome arrives in the returned future.
  static std::future<TaskOutcome> Submit(TaskExecutor& executor, TaskToRun task) {
    auto done = std::make_shared<std::promise<TaskOutcome>>();
    std::future<TaskOutcome> outcome = done->get_future();
    executor.Submit(std::move(task), [done](TaskOutcome o) { done->set_value(std::move(o)); });
    return outcome;
  }

  Functions functions_;
  std::vector<TaskId> interrupted_;
};

TEST_F(TaskCancel, ExecutorDropsAQueuedTaskAndLetsARunningCppTaskRunOn) {
  auto executor = Executor(/*interruptible=*/false);
  TaskToRun running = Task("spin"), queued = Task("quick");
  std::future<TaskOutcome> first = Submit(*executor, running);
  std::future<TaskOutcome> second = Submit(*executor, queued);
  ASSERT_TRUE(testing::WaitUntil([&] { return executor->IsRunning(running.task_id); }, 10s));

  EXPECT_EQ(executor->Cancel(queued.task_id), TaskExecutor::CancelOutcome::kDropped);
  ASSERT_EQ(second.wait_for(0s), std::future_status::ready) << "answered on the cancelling thread";
  TaskOutcome dropped = second.get();
  ASSERT_TRUE(dropped.failure);
  EXPECT_EQ(dropped.failure->kind, proto::ErrorKind::CANCELLED);

  EXPECT_EQ(executor->Cancel(running.task_id), TaskExecutor::CancelOutcome::kRunsOn);
  EXPECT_TRUE(executor->CanRunInline(Task("quick")) == false);  // something runs
  functions_.release = true;
  TaskOutcome finished = first.get();
  EXPECT_FALSE(finished.failure);
  EXPECT_TRUE(testing::WaitUntil([&] { return !executor->IsRunning(running.task_id); }, 10s));
  EXPECT_EQ(executor->Cancel(running.task_id), TaskExecutor::CancelOutcome::kNotHere);
  EXPECT_TRUE(interrupted_.empty());
}

TEST_F(TaskCancel, ExecutorInterruptsARunningTaskThroughItsHook) {
  auto executor = Executor(/*interruptible=*/true);
  EXPECT_FALSE(executor->CanRunInline(Task("quick"))) << "the loop must stay free for cancels";
  TaskToRun running = Task("spin");
  std::future<TaskOutcome> outcome = Submit(*executor, running);
  ASSERT_TRUE(testing::WaitUntil([&] { return functions_.spinning.load(); }, 10s));
  EXPECT_EQ(executor->Cancel(running.task_id), TaskExecutor::CancelOutcome::kInterrupted);
  ASSERT_EQ(outcome.wait_for(10s), std::future_status::ready) << "the hook did not stop it";
  ASSERT_EQ(interrupted_.size(), 1u);
  EXPECT_EQ(interrupted_[0], running.task_id);
}

TEST_F(TaskCancel, ExecutorRunsTasksOnTheCallersThreadUntilStopped) {
  auto executor = Executor(/*interruptible=*/true, /*on_caller_thread=*/true);
  std::thread::id caller;
  std::thread runner([&] {
    caller = std::this_thread::get_id();
    executor->RunQueued();
  });
  TaskToRun task = Task("where");
  std::future<TaskOutcome> outcome = Submit(*executor, task);
  ASSERT_EQ(outcome.wait_for(10s), std::future_status::ready);
  executor->Stop();
  runner.join();
  EXPECT_EQ(functions_.where_thread, caller);
  EXPECT_EQ(functions_.where_task, task.task_id);
  EXPECT_TRUE(ExecutingTaskId().IsNil()) << "set only while a task runs";
}

TEST_F(TaskCancel, ServiceValidatesCancelTaskAndRecursesOnlyForARunningTask) {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  auto executor = Executor(/*interruptible=*/true);
  std::vector<bool> children;  // each cancel_children call's force
  auto exit = kj::newPromiseAndFulfiller<void>();
  proto::Worker::Client worker =
      kj::heap<WorkerService>(*executor, JobId(), ReturnsAt{}, kj::mv(exit.fulfiller),
                              [&](bool force) { children.push_back(force); });
  auto cancel = [&](const std::string& id, bool force, bool recursive) {
    auto request = worker.cancelTaskRequest();
    request.setTaskId(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(id.data()), id.size()));
    request.setForce(force);
    request.setRecursive(recursive);
    return CatchKj([&] { request.send().wait(io.waitScope); });
  };

  Status malformed = cancel("short", false, true);
  EXPECT_EQ(malformed.code(), Code::kInvalidArgument) << malformed.ToString();
  EXPECT_NE(malformed.message().find("taskId"), std::string::npos) << malformed.ToString();

  EXPECT_TRUE(cancel(Task("x").task_id.Binary(), false, true).ok());  // not here: no recursion
  EXPECT_TRUE(children.empty());

  TaskToRun running = Task("spin");
  std::future<TaskOutcome> outcome = Submit(*executor, running);
  ASSERT_TRUE(testing::WaitUntil([&] { return functions_.spinning.load(); }, 10s));
  // Force: the caller kills the worker next; the task is left alone, its children cancelled.
  EXPECT_TRUE(cancel(running.task_id.Binary(), true, true).ok());
  EXPECT_EQ(children, std::vector<bool>{true});
  EXPECT_TRUE(interrupted_.empty());
  // Without force: interrupted, and its children cancelled without force.
  EXPECT_TRUE(cancel(running.task_id.Binary(), false, true).ok());
  EXPECT_EQ(children, (std::vector<bool>{true, false}));
  ASSERT_EQ(interrupted_.size(), 1u);
  EXPECT_EQ(outcome.wait_for(10s), std::future_status::ready);
}

TEST_F(TaskCancel, ServiceRecursesForAnActorCallOnlyWhileItRunsAlone) {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  auto executor = Executor(/*interruptible=*/true);
  std::vector<bool> children;
  auto exit = kj::newPromiseAndFulfiller<void>();
  proto::Worker::Client worker =
      kj::heap<WorkerService>(*executor, JobId(), ReturnsAt{}, kj::mv(exit.fulfiller),
                              [&](bool force) { children.push_back(force); });
  auto cancel = [&](const TaskId& id) {
    auto request = worker.cancelTaskRequest();
    std::string binary = id.Binary();
    request.setTaskId(
        capnp::Data::Reader(reinterpret_cast<const kj::byte*>(binary.data()), binary.size()));
    request.setRecursive(true);
    return CatchKj([&] { request.send().wait(io.waitScope); });
  };
  ActorId actor = ActorId::Of(JobId::FromRaw(reinterpret_cast<const uint8_t*>("\x02\x00\x00\x00")));
  TaskToRun creation = ActorTask(actor, TaskKind::kActorCreation, "make");
  creation.max_concurrency = 2;
  ASSERT_FALSE(Submit(*executor, creation).get().failure);

  // Two calls run side by side: the tasks this process submitted may be either's, none is
  // cancelled.
  TaskToRun first = ActorTask(actor, TaskKind::kActorMethod, "spin");
  TaskToRun second = ActorTask(actor, TaskKind::kActorMethod, "spin");
  std::future<TaskOutcome> first_done = Submit(*executor, first);
  std::future<TaskOutcome> second_done = Submit(*executor, second);
  ASSERT_TRUE(testing::WaitUntil([&] { return functions_.spins == 2; }, 10s));
  EXPECT_TRUE(cancel(first.task_id).ok());
  EXPECT_EQ(interrupted_, std::vector<TaskId>{first.task_id});
  EXPECT_TRUE(children.empty()) << "another call runs: its tasks are not the cancelled one's";
  ASSERT_EQ(first_done.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(second_done.wait_for(10s), std::future_status::ready);

  // One call alone: what the process submitted is its.
  functions_.release = false;
  TaskToRun alone = ActorTask(actor, TaskKind::kActorMethod, "spin");
  std::future<TaskOutcome> alone_done = Submit(*executor, alone);
  ASSERT_TRUE(testing::WaitUntil([&] { return executor->RunsAlone(alone.task_id); }, 10s));
  EXPECT_TRUE(cancel(alone.task_id).ok());
  EXPECT_EQ(children, std::vector<bool>{false});
  EXPECT_EQ(alone_done.wait_for(10s), std::future_status::ready);
}

}  // namespace
}  // namespace airt::internal
