// The error map end to end, from a C++ driver: a real head and a node with a small object store
// (16 MiB), real airt-worker processes. Each failure reaches Get or Put as its own type with a
// message naming the object, task or node.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "objectstore/object_store.h"
#include "tests/e2e/task_cluster.h"

std::vector<uint8_t> Bytes(int n, int seed);
int Fail(int code);
int AlwaysDie();
int SleepMs(int ms);

// Registered in this driver only: the workers' library does not have it.
int OnlyHereInTheErrorsDriver(int x) { return x; }
AIRT_REMOTE(OnlyHereInTheErrorsDriver);

namespace airt {
namespace {

constexpr int kStoreMiB = 16;

std::string Contains(const std::string& text, const std::string& part) {
  return text.find(part) == std::string::npos ? "'" + part + "' missing from: " + text : "";
}

class Errors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    usage_dir_ = new testing::TempDir();
    // The node reads its memory use from this file (none yet: it stops nothing).
    cluster_ = new e2e::TaskCluster(
        {"--num-cpus=2", "--object-store-memory=" + std::to_string(kStoreMiB) + "M",
         "--object-store-fallback-limit=0", "--memory-monitor-interval-ms=50",
         "--memory-usage-file=" + usage_dir_->File("usage")});
    if (::testing::Test::HasFatalFailure()) return;
    for (const auto& entry : std::filesystem::directory_iterator(cluster_->dir().path())) {
      auto socket = entry.path() / "store.sock";
      if (!std::filesystem::exists(socket)) continue;
      auto client = objectstore::StoreClient::Connect(
          socket.string(), objectstore::StoreClient::Options{.prefault = false});
      if (client.ok()) store_ = client->release();
    }
  }
  static void TearDownTestSuite() {
    delete store_;
    delete cluster_;
    delete usage_dir_;
  }
  // What the node reads as its memory use from now on.
  static void SetMemoryUsage(uint64_t used, uint64_t total) {
    std::string path = usage_dir_->File("usage");
    std::ofstream(path + ".new") << used << " " << total << "\n";
    std::filesystem::rename(path + ".new", path);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- node log ----\n" << cluster_->NodeLog();
  }

  static e2e::TaskCluster* cluster_;
  static objectstore::StoreClient* store_;
  static testing::TempDir* usage_dir_;
};

e2e::TaskCluster* Errors::cluster_ = nullptr;
testing::TempDir* Errors::usage_dir_ = nullptr;
objectstore::StoreClient* Errors::store_ = nullptr;

TEST_F(Errors, APutLargerThanTheStoreThrowsObjectStoreFullAndTheStoreKeepsWhatItHad) {
  std::vector<uint8_t> kept_bytes(4 << 20);
  for (size_t i = 0; i < kept_bytes.size(); ++i) kept_bytes[i] = static_cast<uint8_t>(i * 7);
  ObjectRef<std::vector<uint8_t>> kept = Put(kept_bytes);
  try {
    Put(std::vector<uint8_t>((kStoreMiB + 4) << 20, 1));
    FAIL() << "a put larger than the store should throw";
  } catch (const ObjectStoreFullError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kObjectStoreFull);
    EXPECT_EQ(Contains(e.what(), "capacity"), "");
  }
  EXPECT_EQ(*Get(kept), kept_bytes);
  // And the store takes new objects that fit.
  EXPECT_EQ(Get(Put(std::vector<uint8_t>(1 << 20, 3)))->size(), 1u << 20);
}

TEST_F(Errors, AReturnLargerThanTheStoreThrowsObjectStoreFull) {
  ObjectRef<std::vector<uint8_t>> huge = Task(Bytes).Remote((kStoreMiB + 4) << 20, 1);
  try {
    Get(huge, 60'000);
    FAIL() << "a return larger than the store should throw";
  } catch (const ObjectStoreFullError& e) {
    EXPECT_EQ(Contains(e.what(), "return 0"), "");
  }
  // Not taken for a dead worker: the node's workers go on.
  EXPECT_EQ(Get(Task(Bytes).Remote(16, 2))->size(), 16u);
}

TEST_F(Errors, AnUnregisteredFunctionThrowsFunctionNotFoundNamingIt) {
  try {
    Get(Task(OnlyHereInTheErrorsDriver).Remote(1), 30'000);
    FAIL() << "expected FunctionNotFoundError";
  } catch (const FunctionNotFoundError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFunctionNotFound);
    EXPECT_EQ(Contains(e.what(), "'OnlyHereInTheErrorsDriver'"), "");
    EXPECT_EQ(Contains(e.what(), "AIRT_REMOTE(OnlyHereInTheErrorsDriver)"), "");
  }
}

TEST_F(Errors, AWorkerThatDiesThrowsWorkerCrashedNamingTheTask) {
  ObjectRef<int> dies = Task(AlwaysDie).SetMaxRetries(0).Remote();
  ObjectId id = ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(dies.ID().data()));
  std::string task = id.Task().Hex();
  try {
    Get(dies, 60'000);
    FAIL() << "expected WorkerCrashedError";
  } catch (const WorkerCrashedError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kWorkerCrashed);
    EXPECT_EQ(Contains(e.what(), "task " + task), "");
    EXPECT_EQ(Contains(e.what(), "AlwaysDie"), "");
    EXPECT_EQ(Contains(e.what(), "max_retries"), "");
  }
}

TEST_F(Errors, AUserExceptionIsATaskErrorCarryingItsWhat) {
  ObjectRef<int> failed = Task(Fail).Remote(7);
  try {
    Get(failed);
    FAIL() << "expected TaskError";
  } catch (const TaskError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUserException);
    EXPECT_EQ(e.data(), "failed on purpose with 7");
    EXPECT_EQ(Contains(e.what(), "Fail: failed on purpose with 7"), "");
  }
}

TEST_F(Errors, AGetOfAnObjectItsStoreLostThrowsObjectLostNamingObjectAndNode) {
  ASSERT_NE(store_, nullptr) << "cannot reach the node's store";
  ObjectRef<std::vector<uint8_t>> ref = Put(std::vector<uint8_t>(1 << 20, 5));  // in the store
  ObjectId id = ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(ref.ID().data()));
  ASSERT_TRUE(store_->Contains(id));
  ASSERT_TRUE(store_->Delete(id).ok());  // the node's store loses it behind its owner's back
  try {
    Get(ref, 30'000);
    FAIL() << "expected ObjectLostError";
  } catch (const ObjectLostError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kObjectLost);
    EXPECT_EQ(Contains(e.what(), id.Hex()), "");
    EXPECT_EQ(Contains(e.what(), "node 127.0.0.1:"), "");
  }
}

// Ray's memory monitor: the node's memory use (injected through its usage file) above its
// threshold stops the task's worker, and the task without retries fails with OutOfMemoryError.
TEST_F(Errors, ANodeAboveItsMemoryThresholdStopsTheTaskAndGetThrowsOutOfMemory) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  SetMemoryUsage(99 * kGiB, 100 * kGiB);
  ObjectRef<int> sleeper = Task(SleepMs).SetMaxRetries(0).Remote(60'000);
  ObjectId id = ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(sleeper.ID().data()));
  try {
    Get(sleeper, 60'000);
    SetMemoryUsage(0, 100 * kGiB);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    SetMemoryUsage(0, 100 * kGiB);
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    EXPECT_EQ(Contains(e.what(), "task " + id.Task().Hex()), "");
    EXPECT_EQ(Contains(e.what(), "SleepMs"), "");
    EXPECT_EQ(Contains(e.what(), "99.00 GiB of 100.00 GiB in use (0.990)"), "");
    EXPECT_EQ(Contains(e.what(), "threshold 0.950"), "");
    EXPECT_EQ(Contains(e.what(), "node "), "");
  }
}

// A task with retries left is run again after the kill, and finishes once memory is back.
TEST_F(Errors, ATaskStoppedForMemoryIsRetriedWhileItHasRetries) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  auto kills = [] {
    std::string log = cluster_->NodeLog();
    size_t n = 0;
    for (size_t at = log.find("ran low on memory"); at != std::string::npos;
         at = log.find("ran low on memory", at + 1)) {
      ++n;
    }
    return n;
  };
  size_t before = kills();
  SetMemoryUsage(99 * kGiB, 100 * kGiB);
  ObjectRef<int> sleeper = Task(SleepMs).SetMaxRetries(-1).Remote(1'500);
  bool killed = testing::WaitUntil([&] { return kills() > before; }, std::chrono::seconds(30));
  SetMemoryUsage(0, 100 * kGiB);
  ASSERT_TRUE(killed) << "the node never stopped a worker for memory";
  EXPECT_EQ(*Get(sleeper, 60'000), 1'500);
}

}  // namespace
}  // namespace airt
