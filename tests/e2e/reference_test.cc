// Reference counting end to end: an object leaves the node's store once the last ObjectRef to it
// is gone and no unfinished task takes it as an argument. The test reads the node's store
// through a client of its own.
#include <filesystem>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "objectstore/object_store.h"
#include "tests/e2e/task_cluster.h"
#include "tests/testing/test_support.h"

std::vector<uint8_t> Bytes(int n, int seed);
int64_t SumBytes(std::vector<uint8_t> bytes);
int SleepMs(int ms);

namespace airt {
namespace {

using airt::testing::WaitUntil;
using namespace std::chrono_literals;

ObjectId IdOf(const std::string& binary) {
  return ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(binary.data()));
}

class References : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new e2e::TaskCluster({"--num-cpus=2", "--object-store-memory=128M"});
    if (::testing::Test::HasFatalFailure()) return;
    for (const auto& entry : std::filesystem::directory_iterator(cluster_->dir().path())) {
      auto socket = entry.path() / "store.sock";
      if (std::filesystem::exists(socket)) {
        auto client = objectstore::StoreClient::Connect(
            socket.string(), objectstore::StoreClient::Options{.prefault = false});
        if (client.ok()) store_ = client->release();
      }
    }
  }
  static void TearDownTestSuite() {
    delete store_;
    delete cluster_;
  }
  void SetUp() override { ASSERT_NE(store_, nullptr) << "cannot reach the node's store"; }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- node log ----\n" << cluster_->NodeLog();
  }

  static bool InStore(const std::string& id) { return store_->Contains(IdOf(id)); }

  static e2e::TaskCluster* cluster_;
  static objectstore::StoreClient* store_;
};

e2e::TaskCluster* References::cluster_ = nullptr;
objectstore::StoreClient* References::store_ = nullptr;

TEST_F(References, APutLeavesTheStoreWithItsLastRef) {
  std::string id;
  {
    ObjectRef<std::vector<uint8_t>> put = Put(std::vector<uint8_t>(1 << 20, 7));
    id = put.ID();
    ASSERT_TRUE(InStore(id));
    ObjectRef<std::vector<uint8_t>> copy = put;
    { ObjectRef<std::vector<uint8_t>> gone = put; }
    EXPECT_EQ(Get(copy)->size(), 1u << 20);
    EXPECT_TRUE(InStore(id)) << "freed while a copy of its ref lives";
  }
  EXPECT_TRUE(WaitUntil([&] { return !InStore(id); }, 10s)) << "still in the store";
}

TEST_F(References, ATaskReturnLeavesTheStoreWithItsLastRef) {
  std::string id;
  {
    ObjectRef<std::vector<uint8_t>> big = Task(Bytes).Remote(1 << 20, 5);
    id = big.ID();
    EXPECT_EQ(Get(big)->size(), 1u << 20);
    EXPECT_TRUE(InStore(id));
  }
  EXPECT_TRUE(WaitUntil([&] { return !InStore(id); }, 10s)) << "still in the store";
}

TEST_F(References, AReturnDroppedBeforeItsTaskEndsIsFreedWhenItArrives) {
  std::string id;
  {
    // Bytes waits behind a task that sleeps, so the ref goes before the return exists.
    ObjectRef<int> wait = Task(SleepMs).Remote(300);
    ObjectRef<std::vector<uint8_t>> big = Task(Bytes).Remote(1 << 20, 9);
    id = big.ID();
    Get(wait);
  }
  // It arrives, and goes.
  EXPECT_TRUE(WaitUntil([&] { return !InStore(id); }, 10s)) << "still in the store";
}

TEST_F(References, AnArgumentOutlivesItsRefUntilItsTaskHasRun) {
  std::vector<uint8_t> bytes(1 << 20, 3);
  ObjectRef<int> wait = Task(SleepMs).Remote(300);
  ObjectRef<int64_t> sum;
  std::string id;
  {
    ObjectRef<std::vector<uint8_t>> put = Put(bytes);
    id = put.ID();
    // Runs after the sleep (on the second CPU the sleep leaves free, or after it): the ref is
    // gone by then, the task's hold is not.
    sum = Task(SumBytes).Remote(put);
  }
  EXPECT_EQ(*Get(sum), int64_t{3} << 20);
  Get(wait);
  EXPECT_TRUE(WaitUntil([&] { return !InStore(id); }, 10s)) << "still in the store";
}

TEST_F(References, ManyPutsAndDropsLeaveNothingBehind) {
  // 300 MiB through a 128 MiB store: without freeing, this would spill.
  std::string last;
  for (int i = 0; i < 300; ++i) {
    ObjectRef<std::vector<uint8_t>> put =
        Put(std::vector<uint8_t>(1 << 20, static_cast<uint8_t>(i)));
    last = put.ID();
  }
  EXPECT_TRUE(WaitUntil([&] { return !InStore(last); }, 10s));
  auto stats = store_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->total_spilled, 0u) << "puts that were dropped should never spill";
}

}  // namespace
}  // namespace airt
