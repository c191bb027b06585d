#include "objectstore/internal/object_table.h"

#include <cstring>

#include <gtest/gtest.h>

#include "tests/objectstore/spill_doubles.h"

namespace airt::objectstore::internal {
namespace {

using objectstore::testing::FaultInjectingSpillStorage;
using objectstore::testing::MemorySpillStorage;
using objectstore::testing::SharedSpillStorage;

constexpr uint64_t kObject = 4096;
constexpr uint64_t kCapacity = 16 * kObject;
constexpr uint32_t kClient = 0;
constexpr uint32_t kOtherClient = 1;

ObjectId NewId(uint32_t i) { return ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), i); }

class ObjectTableTest : public ::testing::Test {
 protected:
  explicit ObjectTableTest(bool spill = true)
      : arena_(*ArenaMapping::Create(Layout::Compute(kCapacity, 64, 4, 256))),
        index_(arena_.header(), arena_.slots(), arena_.header()->index_slots),
        memory_(std::make_shared<MemorySpillStorage>()),
        faults_(std::make_shared<FaultInjectingSpillStorage>(memory_)),
        table_(&arena_, spill ? std::make_unique<SharedSpillStorage>(faults_) : nullptr, 64) {}

  // Creates, fills with `fill`, and seals an object of `size` bytes.
  ObjectId Put(uint8_t fill, bool secondary = false, uint64_t size = kObject) {
    ObjectId id = NewId(fill);
    Result<uint64_t> offset = table_.Create(id, size, 0, secondary, kClient);
    EXPECT_TRUE(offset.ok()) << offset.status().ToString();
    if (!offset.ok()) return id;
    std::memset(arena_.base() + *offset, fill, size);
    EXPECT_TRUE(table_.Seal(id, kClient).ok());
    return id;
  }

  // Pins like a client does: the shared index plus the client's pin table.
  uint32_t Pin(const ObjectId& id, uint32_t client = kClient) {
    SlotView view;
    EXPECT_EQ(index_.TryPin(id, &view), SharedIndex::PinOutcome::kPinned);
    PinTable(arena_.PinTableOf(client), arena_.header()->pin_slots_per_client).Add(view.slot);
    return view.slot;
  }
  void Unpin(uint32_t slot, uint32_t client = kClient) {
    PinTable(arena_.PinTableOf(client), arena_.header()->pin_slots_per_client).Remove(slot);
    index_.Unpin(slot);
  }

  // Reads `id` back (restoring it if needed) and checks every byte is `fill`.
  void ExpectBytes(const ObjectId& id, uint8_t fill, uint64_t size = kObject) {
    ASSERT_TRUE(table_.MakeReadable(id).ok());
    SlotView view;
    ASSERT_EQ(index_.TryPin(id, &view), SharedIndex::PinOutcome::kPinned);
    ASSERT_EQ(view.data_size, size);
    for (uint64_t i = 0; i < size; ++i) {
      ASSERT_EQ(arena_.base()[view.offset + i], fill) << "byte " << i << " of " << id.Hex();
    }
    index_.Unpin(view.slot);
  }

  ArenaMapping arena_;
  SharedIndex index_;
  std::shared_ptr<MemorySpillStorage> memory_;
  std::shared_ptr<FaultInjectingSpillStorage> faults_;
  ObjectTable table_;
};

class ObjectTableWithoutSpillTest : public ObjectTableTest {
 protected:
  ObjectTableWithoutSpillTest() : ObjectTableTest(false) {}
};

TEST_F(ObjectTableTest, LifeCycleErrorsNameTheObjectAndState) {
  ObjectId id = NewId(1);
  ASSERT_TRUE(table_.Create(id, 100, 10, false, kClient).ok());
  EXPECT_EQ(table_.MakeReadable(id).code(), Code::kNotFound);  // still being created
  EXPECT_EQ(table_.Create(id, 100, 0, false, kClient).status().code(), Code::kAlreadyExists);
  EXPECT_EQ(table_.Seal(id, kOtherClient).code(), Code::kFailedPrecondition);
  EXPECT_EQ(table_.Delete(id).code(), Code::kFailedPrecondition);
  ASSERT_TRUE(table_.Seal(id, kClient).ok());
  Status again = table_.Seal(id, kClient);
  EXPECT_EQ(again.code(), Code::kFailedPrecondition);
  EXPECT_NE(again.message().find(id.Hex()), std::string::npos);
  EXPECT_EQ(table_.Abort(id, kClient).code(), Code::kFailedPrecondition);
  EXPECT_EQ(table_.Seal(NewId(2), kClient).code(), Code::kNotFound);
  EXPECT_TRUE(table_.MakeReadable(id).ok());
  EXPECT_TRUE(table_.Delete(id).ok());
  EXPECT_EQ(table_.Delete(id).code(), Code::kNotFound);
  EXPECT_EQ(table_.Stats().num_objects, 0u);
  EXPECT_EQ(table_.Stats().used_bytes, 0u);
}

TEST_F(ObjectTableTest, AbortFreesTheSpaceAndTheId) {
  ObjectId id = NewId(1);
  ASSERT_TRUE(table_.Create(id, kCapacity, 0, false, kClient).ok());
  EXPECT_TRUE(table_.Abort(id, kClient).ok());
  EXPECT_TRUE(table_.Create(id, kCapacity, 0, false, kClient).ok());
}

TEST_F(ObjectTableTest, RejectsObjectLargerThanCapacityNamingBoth) {
  Result<uint64_t> r = table_.Create(NewId(1), kCapacity + 1, 0, false, kClient);
  ASSERT_EQ(r.status().code(), Code::kResourceExhausted);
  EXPECT_NE(r.status().message().find(std::to_string(kCapacity + 1)), std::string::npos);
  EXPECT_NE(r.status().message().find(std::to_string(kCapacity)), std::string::npos);
}

TEST_F(ObjectTableTest, RejectsOversizedMetadataAndOverflow) {
  EXPECT_EQ(table_.Create(NewId(1), 1, 1ull << 33, false, kClient).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(table_.Create(NewId(2), ~uint64_t{0}, 10, false, kClient).status().code(),
            Code::kInvalidArgument);
}

TEST_F(ObjectTableTest, EvictsSecondaryCopiesLeastRecentlyUsedFirst) {
  std::vector<ObjectId> copies;
  for (int i = 0; i < 16; ++i) copies.push_back(Put(static_cast<uint8_t>(i), /*secondary=*/true));
  // Read the two oldest: now the least recently used are copies 2 and 3.
  Unpin(Pin(copies[0]));
  Unpin(Pin(copies[1]));
  ObjectId fresh = Put(100, /*secondary=*/false, 2 * kObject);
  StoreStats stats = table_.Stats();
  EXPECT_EQ(stats.total_evicted, 2u);
  EXPECT_EQ(stats.total_spilled, 0u);  // secondary copies go before any spilling
  EXPECT_EQ(index_.StateOf(copies[2]), std::nullopt);
  EXPECT_EQ(index_.StateOf(copies[3]), std::nullopt);
  for (int i : {0, 1, 4, 15}) ExpectBytes(copies[i], static_cast<uint8_t>(i));
  ExpectBytes(fresh, 100, 2 * kObject);
}

TEST_F(ObjectTableTest, SpillsPrimariesInLruOrderAndRestoresEveryByte) {
  std::vector<ObjectId> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(Put(static_cast<uint8_t>(i + 1)));
  StoreStats stats = table_.Stats();
  EXPECT_EQ(stats.num_objects, 40u);
  EXPECT_EQ(stats.num_spilled, 24u);
  EXPECT_EQ(index_.StateOf(ids[0]), SlotState::kSpilled);
  EXPECT_EQ(index_.StateOf(ids[39]), SlotState::kSealed);
  for (int i = 0; i < 40; ++i) ExpectBytes(ids[i], static_cast<uint8_t>(i + 1));
  EXPECT_GE(table_.Stats().total_restored, 24u);
  EXPECT_EQ(table_.Stats().num_objects, 40u);
}

TEST_F(ObjectTableTest, NeverSpillsOrEvictsPinnedObjects) {
  std::vector<uint32_t> slots;
  for (int i = 0; i < 16; ++i) slots.push_back(Pin(Put(static_cast<uint8_t>(i))));
  Result<uint64_t> r = table_.Create(NewId(99), kObject, 0, false, kClient);
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(table_.Stats().total_spilled, 0u);
  EXPECT_EQ(faults_->writes.load(), 0);  // checked before anything was written
  Unpin(slots[5]);
  EXPECT_TRUE(table_.Create(NewId(99), kObject, 0, false, kClient).ok());
  EXPECT_EQ(table_.Stats().total_spilled, 1u);
}

TEST_F(ObjectTableWithoutSpillTest, FullStoreRefusesPrimaryAndLosesNothing) {
  std::vector<ObjectId> ids;
  for (int i = 0; i < 16; ++i) ids.push_back(Put(static_cast<uint8_t>(i)));
  Result<uint64_t> r = table_.Create(NewId(99), kObject, 0, false, kClient);
  ASSERT_EQ(r.status().code(), Code::kResourceExhausted);
  EXPECT_NE(r.status().message().find("capacity " + std::to_string(kCapacity)), std::string::npos);
  EXPECT_NE(r.status().message().find(std::to_string(kObject) + " bytes"), std::string::npos);
  for (int i = 0; i < 16; ++i) ExpectBytes(ids[i], static_cast<uint8_t>(i));
}

TEST_F(ObjectTableTest, DiskFullWhileSpillingKeepsObjectsInMemory) {
  std::vector<ObjectId> ids;
  for (int i = 0; i < 16; ++i) ids.push_back(Put(static_cast<uint8_t>(i)));
  faults_->fail_writes_after = 0;
  Result<uint64_t> r = table_.Create(NewId(99), kObject, 0, false, kClient);
  ASSERT_EQ(r.status().code(), Code::kResourceExhausted);
  EXPECT_NE(r.status().message().find("spilling failed"), std::string::npos);
  EXPECT_EQ(table_.Stats().num_spilled, 0u);
  for (int i = 0; i < 16; ++i) ExpectBytes(ids[i], static_cast<uint8_t>(i));
  faults_->fail_writes_after = -1;
  EXPECT_TRUE(table_.Create(NewId(99), kObject, 0, false, kClient).ok());
}

TEST_F(ObjectTableTest, FailedRestoreLeavesObjectSpilledForALaterTry) {
  std::vector<ObjectId> ids;
  for (int i = 0; i < 17; ++i) ids.push_back(Put(static_cast<uint8_t>(i + 1)));
  ASSERT_EQ(index_.StateOf(ids[0]), SlotState::kSpilled);
  faults_->fail_reads = true;
  Status s = table_.MakeReadable(ids[0]);
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find(ids[0].Hex()), std::string::npos);
  EXPECT_EQ(index_.StateOf(ids[0]), SlotState::kSpilled);
  faults_->fail_reads = false;
  ExpectBytes(ids[0], 1);
}

TEST_F(ObjectTableTest, DeletingAPinnedObjectWaitsForItsLastRelease) {
  ObjectId id = Put(7);
  uint32_t slot = Pin(id);
  ASSERT_TRUE(table_.Delete(id).ok());
  EXPECT_EQ(table_.Stats().num_objects, 1u);  // still pinned
  EXPECT_EQ(table_.MakeReadable(id).code(), Code::kNotFound);
  Unpin(slot);
  table_.OnReleased(id);
  EXPECT_EQ(table_.Stats().num_objects, 0u);
  EXPECT_EQ(table_.Stats().used_bytes, 0u);
}

TEST_F(ObjectTableTest, DepartedClientLosesItsPinsAndUnsealedObjects) {
  ObjectId sealed = Put(1);
  Pin(sealed, kOtherClient);
  Pin(sealed, kOtherClient);
  ObjectId unsealed = NewId(2);
  ASSERT_TRUE(table_.Create(unsealed, kObject, 0, false, kOtherClient).ok());
  ASSERT_TRUE(table_.Delete(sealed).ok());  // pending on the pins
  EXPECT_EQ(table_.Stats().num_pinned, 1u);

  table_.OnClientGone(kOtherClient);
  StoreStats stats = table_.Stats();
  EXPECT_EQ(stats.num_pinned, 0u);
  EXPECT_EQ(stats.num_creating, 0u);
  EXPECT_EQ(stats.num_objects, 0u);  // the pending delete finished too
  EXPECT_TRUE(table_.Create(unsealed, kObject, 0, false, kClient).ok());
}

TEST_F(ObjectTableTest, DeleteJobDeletesEveryObjectOfTheJobAndNoOther) {
  JobId job = JobId::FromRandom();
  auto put = [&](const ObjectId& id, bool secondary) {
    ASSERT_TRUE(table_.Create(id, kObject, 0, secondary, kClient).ok());
    ASSERT_TRUE(table_.Seal(id, kClient).ok());
  };
  // The job's 4 bytes sit at the end of the ActorId inside the TaskId of every id it makes:
  // a driver's puts, an actor's returns, a normal task's returns.
  ObjectId spilled = ObjectId::ForPut(TaskId::ForDriver(job), 1);
  ObjectId actor_return = ObjectId::ForReturn(TaskId::Of(ActorId::Of(job)), 1);
  ObjectId pinned = ObjectId::ForReturn(TaskId::Of(ActorId::NilFor(job)), 1);
  ObjectId copy = ObjectId::ForPut(TaskId::ForDriver(job), 2);
  ObjectId creating = ObjectId::ForPut(TaskId::ForDriver(job), 3);
  ASSERT_NO_FATAL_FAILURE(put(spilled, false));
  std::vector<ObjectId> others;
  for (int i = 0; i < 16; ++i) others.push_back(Put(static_cast<uint8_t>(i + 1)));  // spills it
  ASSERT_EQ(index_.StateOf(spilled), SlotState::kSpilled);
  ASSERT_NO_FATAL_FAILURE(put(actor_return, false));
  ASSERT_NO_FATAL_FAILURE(put(pinned, false));
  uint32_t slot = Pin(pinned);
  ASSERT_TRUE(table_.Create(creating, kObject, 0, false, kClient).ok());
  ASSERT_NO_FATAL_FAILURE(put(copy, /*secondary=*/true));  // last: it would be evicted first
  uint64_t objects = table_.Stats().num_objects;
  size_t files = memory_->size();

  EXPECT_EQ(table_.DeleteJob(job), 4u);
  EXPECT_EQ(table_.Stats().num_objects, objects - 3) << "the pinned one waits for its release";
  EXPECT_EQ(memory_->size(), files - 1) << "the spilled copy is gone from disk";
  for (const ObjectId& id : {spilled, actor_return, copy}) {
    EXPECT_FALSE(index_.StateOf(id).has_value()) << id.Hex();
  }
  EXPECT_EQ(table_.MakeReadable(pinned).code(), Code::kNotFound);
  EXPECT_EQ(index_.StateOf(creating), SlotState::kCreating) << "left to its creator";
  for (const ObjectId& id : others) EXPECT_TRUE(index_.StateOf(id).has_value()) << id.Hex();
  EXPECT_EQ(table_.DeleteJob(job), 0u) << "nothing left to delete";
  Unpin(slot);
  table_.OnReleased(pinned);
  EXPECT_EQ(table_.Stats().num_objects, objects - 4);
}

TEST_F(ObjectTableTest, RefusesMoreThanMaxObjects) {
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(table_.Create(NewId(i), 0, 0, false, kClient).ok());
  Result<uint64_t> r = table_.Create(NewId(64), 0, 0, false, kClient);
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
  EXPECT_NE(r.status().message().find("64 objects"), std::string::npos);
}

}  // namespace
}  // namespace airt::objectstore::internal

namespace airt::objectstore::internal {
namespace {

TEST_F(ObjectTableTest, HugeSizeIsRefusedWithoutEvictingAnything) {
  ObjectId kept = Put(3, /*secondary=*/true);
  Result<uint64_t> r = table_.Create(NewId(1), ~uint64_t{0} - 8, 0, false, kClient);
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(table_.Stats().total_evicted, 0u);
  ExpectBytes(kept, 3);
}

}  // namespace
}  // namespace airt::objectstore::internal
