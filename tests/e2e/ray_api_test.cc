// Ray's C++ API (ray/api.h) in cluster mode, as Ray's own cluster-mode tests check it: this test
// is the driver; ray::Init starts a real airt-head and airt-node (shaped by head_args) whose
// airt-worker processes load airt_ray_api_functions, written with Ray's names.
#include <signal.h>

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

constexpr const char* kNamespace = "ray_api_test";

ray::RayConfig SuiteConfig() {
  ray::RayConfig config;
  config.code_search_path = {AIRT_RAY_API_FUNCTIONS};
  config.head_args = {"--num-cpus=2", "--resources='{\"x\": 1}'"};
  config.ray_namespace = kNamespace;
  ray::RuntimeEnv env;
  env.Set("env_vars", std::map<std::string, std::string>{{"RAY_API_JOB_VAR", "job"}});
  config.runtime_env = env;
  config.redis_password_ = "5241590000000000";  // accepted, as Ray's
  return config;
}

class RayApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ::unsetenv("AIRT_ADDRESS");  // Init starts the cluster from head_args
    ray::RayConfig config = SuiteConfig();
    ray::Init(config);
  }
  static void TearDownTestSuite() { ray::Shutdown(); }
};

TEST_F(RayApi, InitStartsANodeShapedByTheHeadArgs) {
  EXPECT_TRUE(ray::IsInitialized());
  EXPECT_EQ(ray::GetNamespace(), kNamespace);
  std::vector<airt::internal::NodeInfo> nodes = airt::internal::ClusterNodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].total.at("CPU"), 2);
  EXPECT_EQ(nodes[0].total.at("x"), 1);
}

TEST_F(RayApi, PutAndGetWithAndWithoutATimeout) {
  ray::ObjectRef<int> ref = ray::Put(42);
  EXPECT_EQ(*ray::Get(ref), 42);
  EXPECT_EQ(*ray::Get(ref, 1000), 42);
  EXPECT_EQ(*ref.Get(), 42);
  EXPECT_EQ(*ref.Get(1000), 42);
  EXPECT_EQ(ref.ID().size(), 28u);
  std::vector<ray::ObjectRef<std::string>> refs = {ray::Put(std::string("a")),
                                                   ray::Put(std::string("b"))};
  std::vector<std::shared_ptr<std::string>> values = ray::Get(refs);
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(*values[0] + *values[1], "ab");
  EXPECT_EQ(ray::Get(refs, 1000).size(), 2u);
}

TEST_F(RayApi, TasksTakeValuesAndRefs) {
  ray::ObjectRef<int> one = ray::Task(Return1).Remote();
  ray::ObjectRef<int> two = ray::Task(Plus1).Remote(one);
  ray::ObjectRef<int> five = ray::Task(Plus).SetName("plus").Remote(two, 3);
  EXPECT_EQ(*five.Get(), 5);
  std::vector<ray::ObjectRef<int>> parts = {one, two, five};
  EXPECT_EQ(*ray::Task(SumVector).Remote(parts).Get(), 8);
  ray::ObjectRef<int> on_x = ray::Task(Plus1).SetResource("x", 1).SetResources({{"CPU", 1}}).Remote(1);
  EXPECT_EQ(*on_x.Get(), 2);
  EXPECT_EQ(*ray::Task(Plus1).SetMaxRetries(0).Remote(9).Get(), 10);
}

TEST_F(RayApi, AVoidTaskRefGetsAndWaitsOnceItFinished) {
  ray::ObjectRef<void> done = ray::Task(NoReturn).Remote(1);
  done.Get();
  ray::Get(done, 10'000);
  std::vector<ray::ObjectRef<void>> refs = {done, ray::Task(NoReturn).Remote(2)};
  ray::WaitResult<void> waited = ray::Wait(refs, 2, 30'000);
  EXPECT_EQ(waited.ready.size(), 2u);
  EXPECT_TRUE(waited.unready.empty());
}

TEST_F(RayApi, WaitAndGetTimeOutOnASlowTask) {
  ray::ObjectRef<int> slow = ray::Task(SleepMs).Remote(60'000);
  // Another resource shape: airt pipelines tasks of one shape to a leased worker, so a task of
  // the slow one's shape could wait behind it.
  ray::ObjectRef<int> fast = ray::Task(Return1).SetResource("x", 1).Remote();
  ray::WaitResult<int> waited = ray::Wait(std::vector{slow, fast}, 1, 30'000);
  ASSERT_EQ(waited.ready.size(), 1u);
  EXPECT_EQ(waited.ready[0].ID(), fast.ID());
  ASSERT_EQ(waited.unready.size(), 1u);
  EXPECT_EQ(waited.unready[0].ID(), slow.ID());
  EXPECT_THROW(ray::Get(slow, 50), ray::internal::RayTimeoutException);
  EXPECT_THROW(slow.Get(50), ray::internal::RayException);
  waited = ray::Wait(std::vector{slow}, 1, 50);
  EXPECT_TRUE(waited.ready.empty());
}

TEST_F(RayApi, ATaskThatThrowsIsARayTaskException) {
  ray::ObjectRef<int> failed = ray::Task(ThrowTask).Remote(std::string("no luck"));
  try {
    failed.Get();
    FAIL() << "Get did not throw";
  } catch (const ray::internal::RayTaskException& e) {
    EXPECT_NE(std::string(e.what()).find("no luck"), std::string::npos) << e.what();
  }
}

TEST_F(RayApi, ActorCallsRunInOrderAndKillEndsIt) {
  ray::ActorHandle<Counter> actor = ray::Actor(Counter::FactoryCreate).Remote(1);
  EXPECT_EQ(actor.ID().size(), 16u);
  std::vector<ray::ObjectRef<int>> calls;
  for (int i = 0; i < 5; ++i) calls.push_back(actor.Task(&Counter::Plus1).Remote());
  std::vector<std::shared_ptr<int>> values = ray::Get(calls);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(*values[i], i + 2);
  EXPECT_EQ(*actor.Task(&Counter::Add).SetName("add").Remote(ray::Put(10)).Get(), 16);
  actor.Kill();
  EXPECT_THROW(actor.Task(&Counter::Plus1).Remote().Get(), ray::internal::RayActorException);
}

TEST_F(RayApi, NamedActorsAreFoundInTheirNamespace) {
  ray::ActorHandle<Counter> actor =
      ray::Actor(Counter::FactoryCreate).SetName("named").SetMaxConcurrency(1).Remote(5);
  EXPECT_EQ(*actor.Task(&Counter::Plus1).Remote().Get(), 6);
  auto found = ray::GetActor<Counter>("named");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->ID(), actor.ID());
  EXPECT_EQ(*found->Task(&Counter::Plus1).Remote().Get(), 7);
  ASSERT_TRUE(ray::GetActor<Counter>("named", kNamespace));
  EXPECT_FALSE(ray::GetActor<Counter>("named", "another namespace"));
  EXPECT_FALSE(ray::GetActor<Counter>("nobody"));
  ray::ActorHandle<Counter> elsewhere =
      ray::Actor(Counter::FactoryCreate).SetName("named", "another namespace").Remote(0);
  auto there = ray::GetActor<Counter>("named", "another namespace");
  ASSERT_TRUE(there);
  EXPECT_EQ(there->ID(), elsewhere.ID());
  EXPECT_THROW(ray::Actor(Counter::FactoryCreate).SetName("named").Remote(0),
               ray::internal::RayException);
  actor.Kill(true);
  EXPECT_TRUE(airt::testing::WaitUntil([] { return !ray::GetActor<Counter>("named"); }, 10s));
}

TEST_F(RayApi, AnActorWhoseConstructorThrowsIsDead) {
  ray::ActorHandle<Counter> actor = ray::Actor(Counter::FactoryCreateThrows).Remote();
  try {
    actor.Task(&Counter::Plus1).Remote().Get();
    FAIL() << "the call did not throw";
  } catch (const ray::internal::RayActorException& e) {
    EXPECT_NE(std::string(e.what()).find("creation error"), std::string::npos) << e.what();
  }
}

TEST_F(RayApi, ExitActorEndsTheActorAndItsProcessForGood) {
  ray::ActorHandle<Counter> actor =
      ray::Actor(Counter::FactoryCreate).SetMaxRestarts(3).Remote(0);
  pid_t pid = static_cast<pid_t>(*actor.Task(&Counter::GetPid).Remote().Get());
  EXPECT_EQ(*actor.Task(&Counter::Plus1).Remote().Get(), 1);
  EXPECT_THROW(actor.Task(&Counter::Exit).Remote().Get(), ray::internal::RayActorException);
  EXPECT_TRUE(airt::testing::WaitUntil([pid] { return !airt::testing::ProcessRunning(pid); }, 20s));
  // Not restarted, whatever SetMaxRestarts allows.
  try {
    actor.Task(&Counter::Plus1).Remote().Get();
    FAIL() << "a call after ExitActor did not throw";
  } catch (const ray::internal::RayActorException& e) {
    EXPECT_NE(std::string(e.what()).find("ExitActor"), std::string::npos) << e.what();
  }
}

TEST_F(RayApi, ExitActorOutsideAnActorThrows) {
  EXPECT_THROW(ray::ExitActor(), ray::internal::RayException);
  EXPECT_FALSE(ray::WasCurrentActorRestarted());
}

TEST_F(RayApi, WasCurrentActorRestartedIsTrueAfterARestart) {
  ray::ActorHandle<Counter> actor =
      ray::Actor(Counter::FactoryCreate).SetMaxRestarts(1).Remote(0);
  EXPECT_FALSE(*actor.Task(&Counter::CheckRestartInActorCreationTask).Remote().Get());
  EXPECT_FALSE(*actor.Task(&Counter::CheckRestartInActorTask).Remote().Get());
  uint64_t pid = *actor.Task(&Counter::GetPid).Remote().Get();
  actor.Kill(false);
  // Calls made after the kill wait for the restart.
  ASSERT_TRUE(airt::testing::WaitUntil(
      [&] {
        try {
          return *actor.Task(&Counter::GetPid).Remote().Get() != pid;
        } catch (const ray::internal::RayActorException&) {
          return false;  // a call that met the dying process
        }
      },
      30s));
  EXPECT_TRUE(*actor.Task(&Counter::CheckRestartInActorCreationTask).Remote().Get());
  EXPECT_TRUE(*actor.Task(&Counter::CheckRestartInActorTask).Remote().Get());
}

TEST_F(RayApi, RuntimeEnvEnvVarsReachTasksActorsAndSubtasks) {
  ray::RuntimeEnv env;
  env.Set("env_vars", std::map<std::string, std::string>{{"RAY_API_TASK_VAR", "task"}});
  EXPECT_EQ(*ray::Task(GetEnvVar).SetRuntimeEnv(env).Remote(std::string("RAY_API_TASK_VAR")).Get(),
            "task");
  // The job's runtime_env applies to every task.
  EXPECT_EQ(*ray::Task(GetEnvVar).Remote(std::string("RAY_API_JOB_VAR")).Get(), "job");
  EXPECT_EQ(*ray::Task(GetEnvVar).SetRuntimeEnv(env).Remote(std::string("RAY_API_JOB_VAR")).Get(),
            "job");
  // A task's own env_vars are gone after it (the worker may be reused).
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(*ray::Task(GetEnvVar).Remote(std::string("RAY_API_TASK_VAR")).Get(), "");
  }
  // Inherited by the tasks a task submits.
  EXPECT_EQ(*ray::Task(GetEnvVarInSubtask)
                 .SetRuntimeEnv(env)
                 .Remote(std::string("RAY_API_TASK_VAR"))
                 .Get(),
            "task");
  ray::RuntimeEnv actor_env;
  actor_env.SetJsonStr("env_vars", R"({"RAY_API_ACTOR_VAR": "actor"})");
  ray::ActorHandle<Counter> actor =
      ray::Actor(Counter::FactoryCreate).SetRuntimeEnv(actor_env).Remote(0);
  EXPECT_EQ(*actor.Task(&Counter::GetEnv).Remote(std::string("RAY_API_ACTOR_VAR")).Get(), "actor");
  EXPECT_EQ(*actor.Task(&Counter::GetEnv).Remote(std::string("RAY_API_JOB_VAR")).Get(), "job");
}

TEST_F(RayApi, RuntimeEnvFieldsACppWorkerCannotHonourAreUnimplemented) {
  ray::RuntimeEnv env;
  env.Set("working_dir", std::string("/somewhere"));
  try {
    ray::Task(Return1).SetRuntimeEnv(env);
    FAIL() << "SetRuntimeEnv took working_dir";
  } catch (const airt::UnimplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("working_dir"), std::string::npos) << e.what();
  }
  ray::RuntimeEnv bad;
  bad.SetJsonStr("env_vars", R"({"N": 1})");
  EXPECT_THROW(ray::Actor(Counter::FactoryCreate).SetRuntimeEnv(bad),
               ray::internal::RayRuntimeEnvException);
}

// No suite Init: each of these calls Init itself.
TEST(RayApiConfig, BadHeadArgsMakeInitThrowNamingTheFlag) {
  ::unsetenv("AIRT_ADDRESS");
  ray::RayConfig config;
  config.head_args = {"--num-cpus=two"};
  try {
    ray::Init(config);
    FAIL() << "Init took --num-cpus=two";
  } catch (const ray::internal::RayException& e) {
    EXPECT_NE(std::string(e.what()).find("--num-cpus"), std::string::npos) << e.what();
  }
  config.head_args = {"--dashboard-port=1"};
  EXPECT_THROW(ray::Init(config), ray::internal::RayException);
  EXPECT_FALSE(ray::IsInitialized());
}

}  // namespace
