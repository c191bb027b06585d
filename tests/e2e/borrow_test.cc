// References inside values end to end (docs/ownership.md): a head, two airt-node processes on
// this machine (each with its own store and transfer service), and this test as the driver on the
// first. Refs passed to tasks and actors on the second node, and returned from them, travel as
// references: the test reads both nodes' stores to see where objects are and when they go.
#include <signal.h>

#include <chrono>
#include <memory>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "objectstore/object_store.h"
#include "tests/e2e/borrow_functions.h"
#include "tests/e2e/multinode_cluster.h"
#include "tests/testing/test_support.h"

namespace airt {
namespace {

using airt::testing::WaitUntil;
using namespace std::chrono_literals;

constexpr int kMiB = 1 << 20;

ObjectId IdOf(const std::string& binary) {
  return ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(binary.data()));
}

class Borrowing : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(cluster_.AddNode("driver", {}));
    ASSERT_NO_FATAL_FAILURE(cluster_.AddNode("other", {"--resources={\"other\": 4}"}));
    cluster_.Init();
    for (const char* name : {"driver", "other"}) {
      auto client = objectstore::StoreClient::Connect(
          cluster_.StoreSocket(name), objectstore::StoreClient::Options{.prefault = false});
      ASSERT_TRUE(client.ok()) << name << ": " << client.status().ToString();
      (std::string(name) == "driver" ? driver_store_ : other_store_) = std::move(*client);
    }
  }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "---- driver's node ----\n" << cluster_.Log("driver");
      std::cerr << "---- other node ----\n" << cluster_.Log("other");
    }
  }

  // `n` objects of 1 MiB put by the driver (in its node's store).
  static BlockRefs PutMany(int n) {
    BlockRefs refs;
    for (int i = 0; i < n; ++i) refs.push_back(Put(std::vector<uint8_t>(kMiB, uint8_t(i))));
    return refs;
  }
  bool InDriverStore(const std::string& id) { return driver_store_->Contains(IdOf(id)); }
  static objectstore::StoreStats StatsOf(objectstore::StoreClient& store) {
    auto stats = store.Stats();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return stats.ok() ? *stats : objectstore::StoreStats{};
  }
  uint64_t OtherStoreObjects() { return StatsOf(*other_store_).num_objects; }

  e2e::MultiNodeCluster cluster_{
      {"--num-cpus=2", "--object-store-memory=256M", "--cluster-view-interval-ms=100"}};
  std::unique_ptr<objectstore::StoreClient> driver_store_, other_store_;
};

TEST_F(Borrowing, ATaskGivenRefsItDoesNotReadMovesNoObjectBytes) {
  BlockRefs refs = PutMany(100);
  ASSERT_EQ(OtherStoreObjects(), 0u);
  EXPECT_EQ(*Get(Task(CountRefs).SetResource("other", 1).Remote(refs), 60'000), 100);
  // A pull would have copied the objects into the other node's store: nothing came, and neither
  // transfer service sent a byte (the driver's node's is the one the pull would have read).
  objectstore::StoreStats other = StatsOf(*other_store_);
  objectstore::StoreStats driver = StatsOf(*driver_store_);
  EXPECT_EQ(other.num_objects, 0u) << "the task's node pulled objects it never read";
  EXPECT_EQ(other.used_bytes, 0u);
  EXPECT_EQ(other.total_sealed_bytes, 0u);
  EXPECT_EQ(other.total_pulled_bytes, 0u);
  EXPECT_EQ(other.transfer_bytes_served, 0u);
  EXPECT_EQ(driver.transfer_objects_served, 0u);
  EXPECT_EQ(driver.transfer_bytes_served, 0u) << "the driver's node sent object bytes";
  for (const auto& ref : refs) ASSERT_TRUE(InDriverStore(ref.ID()));
}

// The control of the test above: the counters it reads do count a pull, and only what was read.
TEST_F(Borrowing, ATaskReadingOneOfItsRefsMovesThatObjectOnly) {
  BlockRefs refs = PutMany(100);
  EXPECT_EQ(*Get(Task(SizeOfFirst).SetResource("other", 1).Remote(refs), 60'000), kMiB);
  objectstore::StoreStats other = StatsOf(*other_store_);
  objectstore::StoreStats driver = StatsOf(*driver_store_);
  EXPECT_GE(other.total_pulled_bytes, uint64_t{kMiB});
  EXPECT_LT(other.total_pulled_bytes, uint64_t{2 * kMiB});
  EXPECT_GE(other.total_sealed_bytes, other.total_pulled_bytes);
  EXPECT_EQ(driver.transfer_objects_served, 1u);
  EXPECT_GE(driver.transfer_bytes_served, uint64_t{kMiB});
  EXPECT_LT(driver.transfer_bytes_served, uint64_t{2 * kMiB});
  EXPECT_EQ(driver.total_pulled_bytes, 0u);
}

TEST_F(Borrowing, ABorrowedObjectIsReadableAfterItsOwnerDroppedItsRef) {
  std::string id;
  ObjectRef<int64_t> sum;
  {
    BlockRefs refs = PutMany(1);
    id = refs[0].ID();
    sum = Task(SumRefsAfter).SetResource("other", 1).Remote(refs, 500);
  }  // the driver's own ref is gone while the task waits
  EXPECT_EQ(*Get(sum, 60'000), kMiB);
  EXPECT_TRUE(WaitUntil([&] { return !InDriverStore(id); }, 20s)) << "kept after the borrow";
}

TEST_F(Borrowing, ARefPassedThroughTwoTasksIsFreedOnlyAtTheEnd) {
  std::string id;
  ObjectRef<int64_t> sum;
  {
    BlockRefs refs = PutMany(1);
    id = refs[0].ID();
    sum = Task(PassOnAfter).SetResource("other", 1).Remote(refs, 300);
  }
  EXPECT_TRUE(InDriverStore(id)) << "freed while the first task holds it";
  EXPECT_EQ(*Get(sum, 60'000), kMiB);  // the second task read it after the first let go
  EXPECT_TRUE(WaitUntil([&] { return !InDriverStore(id); }, 20s)) << "kept after the last task";
}

TEST_F(Borrowing, KillingABorrowerFreesWhatItBorrowed) {
  auto keeper = Actor(RefKeeper::Create).SetResource("other", 1).Remote();
  std::string id;
  int pid = 0;
  {
    BlockRefs refs = PutMany(1);
    id = refs[0].ID();
    pid = *Get(keeper.Task(&RefKeeper::Keep).Remote(refs), 60'000);
  }
  EXPECT_EQ(*Get(keeper.Task(&RefKeeper::SumKept).Remote(), 60'000), kMiB);
  EXPECT_TRUE(InDriverStore(id)) << "freed while the actor borrows it";
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  EXPECT_TRUE(WaitUntil([&] { return !InDriverStore(id); }, 20s))
      << "a killed borrower's borrow kept the object";
}

TEST_F(Borrowing, RefsReturnedFromATaskOutliveItAndFailWithOwnerDiedWhenTheirOwnerDies) {
  // The task's worker owns what it put; the refs it returned keep the objects for the driver.
  BlockRefs from_task = *Get(Task(PutBlocks).SetResource("other", 1).Remote(2, kMiB), 60'000);
  ASSERT_EQ(from_task.size(), 2u);
  EXPECT_EQ(Get(from_task[0], 60'000)->size(), static_cast<size_t>(kMiB));

  auto maker = Actor(RefKeeper::Create).SetResource("other", 1).Remote();
  int pid = *Get(maker.Task(&RefKeeper::Pid).Remote(), 60'000);
  BlockRefs made = *Get(maker.Task(&RefKeeper::Make).Remote(2, kMiB), 60'000);
  ASSERT_EQ(made.size(), 2u);
  EXPECT_EQ(Get(made[0], 60'000)->size(), static_cast<size_t>(kMiB));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // Never read: its Get asks the dead owner.
  try {
    Get(made[1], 60'000);
    ADD_FAILURE() << "Get of an object whose owner died returned";
  } catch (const OwnerDiedError& e) {
    EXPECT_NE(std::string(e.what()).find(IdOf(made[1].ID()).Hex()), std::string::npos) << e.what();
  }
  // Read before: it fails too once this process sees its connection to the owner end.
  EXPECT_TRUE(WaitUntil(
      [&] {
        try {
          Get(made[0], 60'000);
          return false;
        } catch (const OwnerDiedError&) {
          return true;
        }
      },
      20s));
}

}  // namespace
}  // namespace airt
