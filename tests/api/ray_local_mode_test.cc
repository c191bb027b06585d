// Ray's local mode (RayConfig::local_mode): tasks and actors run on threads of this process, over
// the functions compiled into it; no daemon is started. What Ray's api_test checks in local mode.
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ray/api.h"
#include "tests/e2e/ray_api_functions.h"
#include "tests/testing/test_support.h"

namespace {

using namespace ray_api_test;
using namespace std::chrono_literals;

class RayLocalMode : public ::testing::Test {
 protected:
  void SetUp() override {
    ray::RayConfig config;
    config.local_mode = true;
    config.address = "127.0.0.1:1";  // ignored in local mode: nothing is joined
    config.ray_namespace = "local_ns";
    ray::Init(config);
  }
  void TearDown() override { ray::Shutdown(); }
};

TEST_F(RayLocalMode, TasksRunInThisProcess) {
  EXPECT_TRUE(ray::IsInitialized());
  EXPECT_EQ(*ray::Task(Pid).Remote().Get(), static_cast<uint64_t>(::getpid()));
  ray::ObjectRef<int> one = ray::Task(Return1).Remote();
  ray::ObjectRef<int> two = ray::Task(Plus1).Remote(one);
  EXPECT_EQ(*ray::Get(ray::Task(Plus).Remote(two, ray::Put(40))), 42);
  std::vector<ray::ObjectRef<int>> parts = {one, two};
  EXPECT_EQ(*ray::Task(SumVector).Remote(parts).Get(), 3);
  std::vector<std::shared_ptr<int>> both = ray::Get(parts, 1000);
  EXPECT_EQ(*both[0] + *both[1], 3);
  // A large value goes through Put as well.
  std::vector<int> big(100'000, 1);
  EXPECT_EQ(*ray::Task(SumVector).Remote(big).Get(), 100'000);
}

TEST_F(RayLocalMode, NestedTasksAndVoidTasks) {
  EXPECT_EQ(*ray::Task(GetEnvVarInSubtask).Remote(std::string("NO_SUCH_VARIABLE_HERE")).Get(), "");
  ray::ObjectRef<void> done = ray::Task(NoReturn).Remote(3);
  done.Get(5000);
  ray::WaitResult<void> waited = ray::Wait(std::vector{done}, 1, 5000);
  EXPECT_EQ(waited.ready.size(), 1u);
}

TEST_F(RayLocalMode, ErrorsAndTimeoutsAreRaysExceptions) {
  ray::ObjectRef<int> failed = ray::Task(ThrowTask).Remote(std::string("local failure"));
  try {
    failed.Get();
    FAIL() << "Get did not throw";
  } catch (const ray::internal::RayTaskException& e) {
    EXPECT_NE(std::string(e.what()).find("local failure"), std::string::npos) << e.what();
  }
  // A task taking a failed ref fails with its error.
  EXPECT_THROW(ray::Task(Plus1).Remote(failed).Get(), ray::internal::RayTaskException);
  ray::ObjectRef<int> slow = ray::Task(SleepMs).Remote(2000);
  EXPECT_THROW(slow.Get(20), ray::internal::RayTimeoutException);
  ray::WaitResult<int> waited = ray::Wait(std::vector{slow, ray::Put(1)}, 1, 5000);
  EXPECT_EQ(waited.ready.size(), 1u);
  EXPECT_EQ(waited.unready.size(), 1u);
  EXPECT_EQ(*slow.Get(), 2000);
}

TEST_F(RayLocalMode, ActorCallsRunInOrderAndKillEndsThem) {
  ray::ActorHandle<Counter> actor = ray::Actor(Counter::FactoryCreate).Remote(0);
  std::vector<ray::ObjectRef<int>> calls;
  for (int i = 0; i < 20; ++i) calls.push_back(actor.Task(&Counter::Plus1).Remote());
  std::vector<std::shared_ptr<int>> values = ray::Get(calls);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(*values[i], i + 1);
  EXPECT_EQ(*actor.Task(&Counter::Add).Remote(ray::Task(Return1).Remote()).Get(), 21);
  EXPECT_EQ(*actor.Task(&Counter::GetPid).Remote().Get(), static_cast<uint64_t>(::getpid()));
  actor.Kill();
  EXPECT_THROW(actor.Task(&Counter::Plus1).Remote().Get(), ray::internal::RayActorException);
}

TEST_F(RayLocalMode, AnActorWhoseConstructorThrowsIsDead) {
  ray::ActorHandle<Counter> actor = ray::Actor(Counter::FactoryCreateThrows).Remote();
  try {
    actor.Task(&Counter::Plus1).Remote().Get();
    FAIL() << "the call did not throw";
  } catch (const ray::internal::RayActorException& e) {
    EXPECT_NE(std::string(e.what()).find("creation error"), std::string::npos) << e.what();
  }
}

TEST_F(RayLocalMode, NamedActorsLiveInTheirNamespace) {
  EXPECT_EQ(ray::GetNamespace(), "local_ns");
  ray::ActorHandle<Counter> actor =
      ray::Actor(Counter::FactoryCreate).SetName("counter").Remote(10);
  auto found = ray::GetActor<Counter>("counter");
  ASSERT_TRUE(found);
  EXPECT_EQ(*found->Task(&Counter::Plus1).Remote().Get(), 11);
  EXPECT_TRUE(ray::GetActor<Counter>("counter", "local_ns"));
  EXPECT_FALSE(ray::GetActor<Counter>("counter", "elsewhere"));
  EXPECT_EQ(*actor.Task(&Counter::Namespace).Remote().Get(), "local_ns");
  EXPECT_THROW(ray::Actor(Counter::FactoryCreate).SetName("counter").Remote(0),
               ray::internal::RayException);
  ray::Actor(Counter::FactoryCreate).SetGlobalName("global").Remote(0);
  EXPECT_TRUE(ray::GetActor<Counter>("global"));
  actor.Kill();
  EXPECT_FALSE(ray::GetActor<Counter>("counter"));
}

TEST_F(RayLocalMode, ExitActorEndsTheActorAfterTheCall) {
  ray::ActorHandle<Counter> actor =
      ray::Actor(Counter::FactoryCreate).SetMaxRestarts(2).Remote(0);
  EXPECT_EQ(*actor.Task(&Counter::Plus1).Remote().Get(), 1);
  ray::ObjectRef<int> exit = actor.Task(&Counter::Exit).Remote();
  ray::ObjectRef<int> after = actor.Task(&Counter::Plus1).Remote();
  EXPECT_THROW(exit.Get(), ray::internal::RayActorException);
  try {
    after.Get();
    FAIL() << "a call after ExitActor did not throw";
  } catch (const ray::internal::RayActorException& e) {
    EXPECT_NE(std::string(e.what()).find("ExitActor"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ray::ExitActor(), ray::internal::RayException);  // not in an actor
}

TEST_F(RayLocalMode, KillWithRestartRunsTheFactoryAgain) {
  ray::ActorHandle<Counter> actor =
      ray::Actor(Counter::FactoryCreate).SetMaxRestarts(1).Remote(5);
  EXPECT_EQ(*actor.Task(&Counter::Plus1).Remote().Get(), 6);
  EXPECT_FALSE(*actor.Task(&Counter::CheckRestartInActorTask).Remote().Get());
  actor.Kill(false);
  EXPECT_EQ(*actor.Task(&Counter::Plus1).Remote().Get(), 6);  // a fresh instance
  EXPECT_TRUE(*actor.Task(&Counter::CheckRestartInActorCreationTask).Remote().Get());
  EXPECT_TRUE(*actor.Task(&Counter::CheckRestartInActorTask).Remote().Get());
  actor.Kill(false);  // no restarts left
  EXPECT_THROW(actor.Task(&Counter::Plus1).Remote().Get(), ray::internal::RayActorException);
  EXPECT_FALSE(ray::WasCurrentActorRestarted());
}

TEST_F(RayLocalMode, MaxConcurrencyRunsCallsAtOnce) {
  ray::ActorHandle<Counter> actor =
      ray::Actor(Counter::FactoryCreate).SetMaxConcurrency(2).Remote(0);
  ray::ObjectRef<int> a = actor.Task(&Counter::Rendezvous).Remote(2, 10'000);
  ray::ObjectRef<int> b = actor.Task(&Counter::Rendezvous).Remote(2, 10'000);
  EXPECT_EQ(*a.Get(), 2);
  EXPECT_EQ(*b.Get(), 2);
}

TEST_F(RayLocalMode, WhatLocalModeLacksIsUnimplemented) {
  ray::RuntimeEnv env;
  env.Set("env_vars", std::map<std::string, std::string>{{"A", "b"}});
  EXPECT_THROW(ray::Task(Return1).SetRuntimeEnv(env).Remote(), airt::UnimplementedError);
  EXPECT_THROW(ray::Cancel(ray::Task(Return1).Remote()), airt::UnimplementedError);
}

TEST(RayLocalModeInit, ShutdownThenInitAgain) {
  ray::RayConfig config;
  config.local_mode = true;
  ray::Init(config);
  EXPECT_EQ(ray::GetNamespace().rfind("anonymous-local-", 0), 0u) << ray::GetNamespace();
  ray::ObjectRef<int> slow = ray::Task(SleepMs).Remote(50);
  ray::Shutdown();  // waits for the running task
  EXPECT_FALSE(ray::IsInitialized());
  ray::Init(config);
  EXPECT_EQ(*ray::Task(Return1).Remote().Get(), 1);
  ray::Shutdown();
}

TEST(RayLocalModeInit, CommandLineFlagsOverrideTheConfig) {
  ray::RayConfig config;
  config.local_mode = true;
  config.ray_namespace = "from_config";
  std::string program = "driver", ns = "--ray_job_namespace=from_argv",
              lifetime = "--ray_default_actor_lifetime=sometimes";
  char* bad[] = {program.data(), lifetime.data()};
  EXPECT_THROW(ray::Init(config, 2, bad), ray::internal::RayException);
  EXPECT_FALSE(ray::IsInitialized());
  char* argv[] = {program.data(), ns.data()};
  ray::Init(config, 2, argv);
  EXPECT_EQ(ray::GetNamespace(), "from_argv");
  ray::Shutdown();
}

}  // namespace
