// Tasks end to end: a real airt-head, an airt-node that starts real airt-worker processes, and
// this test as the driver (airt::Init, Task(f).Remote, Put, Get).
#include <gtest/gtest.h>

#include "airt/api.h"
#include "ray/api.h"
#include "tests/e2e/object_pattern.h"
#include "tests/e2e/task_cluster.h"

int Add(int a, int b);
std::string Greet(std::string name);
std::vector<uint8_t> Bytes(int n, int seed);
int64_t SumBytes(std::vector<uint8_t> bytes);
int64_t SumAll(std::vector<int64_t> values);
int Fail(int code);
std::string VisibleDevices();
int DieOnce(std::string marker);
int AlwaysDie();
int DieTimes(std::string marker, int times);
std::vector<uint8_t> PatternBytes(int64_t size, int64_t seed);

// Registered in this driver only: the workers' library does not have it.
int OnlyInTheDriver(int x) { return x; }
AIRT_REMOTE(OnlyInTheDriver);

namespace airt {
namespace {

class Tasks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new e2e::TaskCluster({"--num-cpus=2", "--num-gpus=4", "--object-store-memory=128M",
                                     "--infeasible-grace-ms=300"});
  }
  static void TearDownTestSuite() { delete cluster_; }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- node log ----\n" << cluster_->NodeLog();
  }

  static e2e::TaskCluster* cluster_;
};

e2e::TaskCluster* Tasks::cluster_ = nullptr;

TEST_F(Tasks, RemoteCallReturnsItsValue) {
  ObjectRef<int> sum = Task(Add).Remote(2, 3);
  EXPECT_EQ(*Get(sum), 5);
  EXPECT_EQ(*Get(Task(Greet).Remote(std::string("airt"))), "hello airt");
}

TEST_F(Tasks, RefsPassedAsArgumentsAreResolvedFirst) {
  ObjectRef<int> a = Task(Add).Remote(1, 2);
  ObjectRef<int> b = Task(Add).Remote(a, a);
  EXPECT_EQ(*Get(b), 6);
  ObjectRef<int> chain = Task(Add).Remote(0, 1);
  for (int i = 0; i < 1000; ++i) chain = Task(Add).Remote(chain, 1);  // each waits for the last
  EXPECT_EQ(*Get(chain, 120000), 1001);
}

TEST_F(Tasks, OneGetReturnsTenThousandObjects) {
  std::vector<ObjectRef<int>> refs;
  for (int i = 0; i < 10000; ++i) refs.push_back(Put(i));
  std::vector<std::shared_ptr<int>> values = Get(refs, 60000);
  ASSERT_EQ(values.size(), 10000u);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(*values[i], i);
}

TEST_F(Tasks, PutValuesServeAsArguments) {
  ObjectRef<int> ten = Put(10);
  EXPECT_EQ(*Get(ten), 10);
  EXPECT_EQ(*Get(Task(Add).Remote(ten, 5)), 15);
}

TEST_F(Tasks, LargeValuesTravelThroughTheObjectStore) {
  ObjectRef<std::vector<uint8_t>> big = Task(Bytes).Remote(1 << 20, 3);  // over the inline limit
  std::shared_ptr<std::vector<uint8_t>> bytes = Get(big);
  ASSERT_EQ(bytes->size(), 1u << 20);
  EXPECT_EQ((*bytes)[12345], static_cast<uint8_t>(12345 * 7 + 3));
  int64_t expect = 0;
  for (uint8_t b : *bytes) expect += b;
  EXPECT_EQ(*Get(Task(SumBytes).Remote(big)), expect);  // a store object as an argument
  ObjectRef<std::vector<uint8_t>> put = Put(*bytes);  // serialized straight into the store
  EXPECT_EQ(*Get(put), *bytes);
  EXPECT_EQ(*Get(Task(SumBytes).Remote(put)), expect);
  ObjectRef<std::string> text = Put(std::string(300 << 10, 'x'));
  EXPECT_EQ(*Get(text), std::string(300 << 10, 'x'));
  // A large value passed by value goes through the store too (not inside the task message).
  std::vector<uint8_t> big_value(64 << 20, 1);
  EXPECT_EQ(*Get(Task(SumBytes).Remote(big_value)), int64_t{64} << 20);
}

// Each return is its task's own pattern (object_pattern.h, seeded with the task's index). 1000 MiB
// pass through the node's 128 MiB store: most returns are spilled to the node's disk and
// restored for the Get.
TEST_F(Tasks, ThousandTasksOfOneMebibyteEachComeBackByteForByte) {
  constexpr int kTasks = 1000;
  constexpr int64_t kSize = 1 << 20;
  std::vector<ObjectRef<std::vector<uint8_t>>> refs;
  for (int i = 0; i < kTasks; ++i) refs.push_back(Task(PatternBytes).Remote(kSize, i));
  std::vector<std::shared_ptr<std::vector<uint8_t>>> values = Get(refs, 300000);
  ASSERT_EQ(values.size(), static_cast<size_t>(kTasks));
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_EQ(values[i]->size(), static_cast<size_t>(kSize)) << "task " << i;
    std::optional<size_t> wrong = e2e::FirstMismatch(*values[i], i);
    ASSERT_FALSE(wrong.has_value()) << "task " << i << ": byte " << *wrong << " differs";
  }
}

TEST_F(Tasks, ExceptionInTaskReachesGetAsTaskError) {
  ObjectRef<int> failed = Task(Fail).Remote(7);
  try {
    Get(failed);
    FAIL() << "Get should throw";
  } catch (const TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("failed on purpose with 7"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Fail"), std::string::npos) << e.what();
  }
  // An argument that failed fails the task that takes it.
  EXPECT_THROW(Get(Task(Add).Remote(failed, 1)), TaskError);
}

TEST_F(Tasks, RefsNestedInAVectorAreResolvedToTheirValues) {
  std::vector<ObjectRef<int64_t>> parts;
  for (int i = 0; i < 50; ++i) parts.push_back(Put(int64_t{i}));
  // Large ones, in the store, too.
  ObjectRef<std::vector<uint8_t>> big = Task(Bytes).Remote(1 << 20, 1);
  ObjectRef<int64_t> big_sum = Task(SumBytes).Remote(big);
  parts.push_back(big_sum);
  int64_t expect = 49 * 50 / 2 + *Get(big_sum);
  EXPECT_EQ(*Get(Task(SumAll).Remote(parts)), expect);
  EXPECT_EQ(*Get(Task(SumAll).Remote(std::vector<ObjectRef<int64_t>>{})), 0);
  // A failed element fails the task, naming it.
  ObjectRef<int> failing = Task(Fail).Remote(3);
  std::vector<ObjectRef<int64_t>> with_failure = {Put(int64_t{1}), ObjectRef<int64_t>(failing.ID())};
  try {
    Get(Task(SumAll).Remote(with_failure));
    FAIL() << "expected a TaskError";
  } catch (const TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("argument 0[1] failed"), std::string::npos) << e.what();
  }
}

TEST_F(Tasks, AFunctionTheWorkersLackFailsWithFunctionNotFound) {
  try {
    Get(Task(OnlyInTheDriver).Remote(1), 20'000);
    FAIL() << "expected a FunctionNotFoundError";
  } catch (const FunctionNotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("OnlyInTheDriver"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("code search path"), std::string::npos) << e.what();
  }
}

TEST_F(Tasks, InfeasibleRequestFailsNamingTheShape) {
  try {
    Get(Task(Add).SetResource("GPU", 8).Remote(1, 2), 30000);
    FAIL() << "Get should throw";
  } catch (const InfeasibleError& e) {
    EXPECT_NE(std::string(e.what()).find("GPU: 8"), std::string::npos) << e.what();
  }
}

TEST_F(Tasks, WorkerSeesTheGpuIdsItWasGranted) {
  std::string devices = *Get(Task(VisibleDevices).SetResource("GPU", 2).Remote());
  EXPECT_EQ(devices.size(), 3u) << devices;  // two ids, e.g. "0,1"
  std::string none = *Get(Task(VisibleDevices).Remote());
  EXPECT_TRUE(none.empty() || none == "<unset>") << none;  // no GPU: nothing visible
}

TEST_F(Tasks, TaskWhoseWorkerDiesIsRetriedOnANewWorker) {
  std::string marker = cluster_->dir().File("died-once");
  EXPECT_EQ(*Get(Task(DieOnce).Remote(marker), 60000), 7);
}

TEST_F(Tasks, TaskFailsWithWorkerCrashedWhenItsRetriesAreSpent) {
  try {
    Get(Task(AlwaysDie).SetMaxRetries(1).Remote(), 60000);
    FAIL() << "Get should throw";
  } catch (const WorkerCrashedError& e) {
    EXPECT_NE(std::string(e.what()).find("AlwaysDie"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2 times"), std::string::npos) << e.what();
  }
}

TEST_F(Tasks, TaskWithMaxRetriesMinusOneSurvivesMoreDeathsThanTheDefault) {
  std::string marker = cluster_->dir().File("dies-five-times");
  EXPECT_EQ(*Get(Task(DieTimes).SetMaxRetries(-1).Remote(marker, 5), 120000), 5);
}

TEST_F(Tasks, WaitSplitsRefsIntoReadyAndUnready) {
  ObjectRef<int> done = Put(1);
  ObjectRef<int> never(std::string(28, '\x43'));
  WaitResult<int> first = Wait(std::vector<ObjectRef<int>>{done, never}, 1, 5000);
  ASSERT_EQ(first.ready.size(), 1u);
  EXPECT_EQ(first.ready[0].ID(), done.ID());
  ASSERT_EQ(first.unready.size(), 1u);
  WaitResult<int> timed_out = Wait(std::vector<ObjectRef<int>>{done, never}, 2, 50);
  EXPECT_EQ(timed_out.ready.size(), 1u);  // the timeout passed with one of two ready
  std::vector<ObjectRef<int>> many;
  for (int i = 0; i < 100; ++i) many.push_back(Task(Add).Remote(i, 1));
  WaitResult<int> all = Wait(many, 100, 60000);
  EXPECT_EQ(all.ready.size(), 100u);
  WaitResult<int> three = Wait(many, 3, 0);  // all 100 are ready: Ray returns exactly 3
  EXPECT_EQ(three.ready.size(), 3u);
  EXPECT_EQ(three.unready.size(), 97u);
  EXPECT_THROW(Wait(many, 101, 0), Exception);
}

TEST_F(Tasks, RayCompatibleNamesRunTheSameTasks) {
  ray::ObjectRef<int> sum = ray::Task(Add).Remote(20, 22);
  EXPECT_EQ(*ray::Get(sum), 42);
  ray::WaitResult<int> waited = ray::Wait(std::vector<ray::ObjectRef<int>>{sum}, 1, 1000);
  EXPECT_EQ(waited.ready.size(), 1u);
  EXPECT_THROW(ray::Get(ray::Task(Fail).Remote(1)), ray::internal::RayTaskException);
  EXPECT_TRUE(ray::IsInitialized());
}

TEST_F(Tasks, GetTimesOutOnAnObjectThatNeverComes) {
  ObjectRef<int> never(std::string(28, '\x42'));
  EXPECT_THROW(Get(never, 50), TimeoutError);
}

}  // namespace
}  // namespace airt
