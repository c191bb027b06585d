#include "objectstore/internal/shared_index.h"

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "objectstore/internal/arena_mapping.h"

namespace airt::objectstore::internal {
namespace {

ObjectId NewId(uint32_t i) { return ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), i); }

class SharedIndexTest : public ::testing::Test {
 protected:
  SharedIndexTest()
      : arena_(*ArenaMapping::Create(Layout::Compute(1 << 20, 64, 2, 64))),
        index_(arena_.header(), arena_.slots(), arena_.header()->index_slots) {}

  uint32_t InsertSealed(const ObjectId& id, uint64_t offset = 4096) {
    uint32_t slot = index_.Insert(id, offset, 10, 2);
    EXPECT_TRUE(index_.TryTransition(slot, SlotState::kCreating, SlotState::kSealed));
    return slot;
  }

  ArenaMapping arena_;
  SharedIndex index_;
};

TEST_F(SharedIndexTest, PinsOnlySealedObjects) {
  ObjectId id = NewId(1);
  SlotView view;
  EXPECT_EQ(index_.TryPin(id, &view), SharedIndex::PinOutcome::kAbsent);
  uint32_t slot = index_.Insert(id, 8192, 10, 2);
  EXPECT_EQ(index_.TryPin(id, &view), SharedIndex::PinOutcome::kNotReady);
  ASSERT_TRUE(index_.TryTransition(slot, SlotState::kCreating, SlotState::kSealed));
  ASSERT_EQ(index_.TryPin(id, &view), SharedIndex::PinOutcome::kPinned);
  EXPECT_EQ(view.slot, slot);
  EXPECT_EQ(view.offset, 8192u);
  EXPECT_EQ(view.data_size, 10u);
  EXPECT_EQ(view.metadata_size, 2u);
  EXPECT_EQ(SlotWord::Pins(index_.WordAt(slot)), 1u);
  EXPECT_EQ(SlotWord::Pins(index_.Unpin(slot)), 0u);
}

TEST_F(SharedIndexTest, StoreCannotMoveAPinnedSlot) {
  ObjectId id = NewId(1);
  uint32_t slot = InsertSealed(id);
  SlotView view;
  ASSERT_EQ(index_.TryPin(id, &view), SharedIndex::PinOutcome::kPinned);
  EXPECT_FALSE(index_.TryTransition(slot, SlotState::kSealed, SlotState::kBusy));
  index_.Unpin(slot);
  EXPECT_TRUE(index_.TryTransition(slot, SlotState::kSealed, SlotState::kBusy));
  EXPECT_EQ(index_.TryPin(id, &view), SharedIndex::PinOutcome::kNotReady);
}

TEST_F(SharedIndexTest, DeletePendingBlocksNewPinsButKeepsOldOnes) {
  ObjectId id = NewId(1);
  uint32_t slot = InsertSealed(id);
  SlotView view;
  ASSERT_EQ(index_.TryPin(id, &view), SharedIndex::PinOutcome::kPinned);
  ASSERT_TRUE(index_.MarkDeletePending(slot));
  EXPECT_EQ(index_.TryPin(id, &view), SharedIndex::PinOutcome::kNotReady);
  uint64_t after = index_.Unpin(slot);
  EXPECT_EQ(SlotWord::Pins(after), 0u);
  EXPECT_TRUE(SlotWord::DeletePending(after));
  EXPECT_FALSE(index_.MarkDeletePending(slot));  // unpinned: the store removes it directly
}

TEST_F(SharedIndexTest, RandomInsertRemoveKeepsEveryLiveIdFindable) {
  std::map<ObjectId, uint32_t> live;
  std::mt19937 rng(3);
  for (int step = 0; step < 5000; ++step) {
    if (live.size() < 64 && (live.empty() || rng() % 2 == 0)) {
      ObjectId id = NewId(step);
      live[id] = InsertSealed(id);
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE(index_.TryTransition(it->second, SlotState::kSealed, SlotState::kBusy));
      index_.Remove(it->second);
      EXPECT_FALSE(index_.StateOf(it->first).has_value());
      live.erase(it);
    }
    for (const auto& [id, slot] : live) {
      SlotView view;
      ASSERT_EQ(index_.TryPin(id, &view), SharedIndex::PinOutcome::kPinned) << "step " << step;
      ASSERT_EQ(view.slot, slot);
      index_.Unpin(slot);
    }
  }
}

TEST_F(SharedIndexTest, ConcurrentPinnersNeverPinAMovedSlot) {
  ObjectId id = NewId(1);
  uint32_t slot = InsertSealed(id);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> pinned{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        SlotView view;
        if (index_.TryPin(id, &view) == SharedIndex::PinOutcome::kPinned) {
          // While pinned, the store may not have the slot busy.
          EXPECT_EQ(SlotWord::State(index_.WordAt(view.slot)), SlotState::kSealed);
          ++pinned;
          index_.Unpin(view.slot);
        }
      }
    });
  }
  // Run until both sides made progress (on 2 cores the readers may start late), within a bound.
  int moves = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((moves < 1000 || pinned.load() < 1000) && std::chrono::steady_clock::now() < deadline) {
    if (index_.TryTransition(slot, SlotState::kSealed, SlotState::kBusy)) {
      ++moves;
      ASSERT_TRUE(index_.TryTransition(slot, SlotState::kBusy, SlotState::kSealed));
    }
    if (moves % 64 == 0) std::this_thread::yield();
  }
  stop = true;
  for (auto& r : readers) r.join();
  EXPECT_GT(moves, 0);
  EXPECT_GT(pinned.load(), 0u);
  EXPECT_EQ(SlotWord::Pins(index_.WordAt(slot)), 0u);
}

TEST(PinTable, CountsPerSlotAndRemovesWithBackwardShift) {
  std::vector<uint64_t> entries(64, 0);
  PinTable table(entries.data(), entries.size());
  std::map<uint32_t, uint32_t> model;
  std::mt19937 rng(5);
  for (int step = 0; step < 20000; ++step) {
    uint32_t slot = rng() % 40;
    if (model[slot] == 0 || rng() % 2 == 0) {
      ASSERT_TRUE(table.Add(slot));
      ++model[slot];
    } else {
      ASSERT_EQ(table.Remove(slot), --model[slot]);
    }
  }
  std::map<uint32_t, uint32_t> seen;
  table.ForEach([&](uint32_t slot, uint32_t count) { seen[slot] = count; });
  for (auto it = model.begin(); it != model.end();)
    it = it->second == 0 ? model.erase(it) : std::next(it);
  EXPECT_EQ(seen, model);
}

TEST(PinTable, AddFailsWhenFull) {
  std::vector<uint64_t> entries(4, 0);
  PinTable table(entries.data(), entries.size());
  for (uint32_t s = 0; s < 4; ++s) ASSERT_TRUE(table.Add(s));
  EXPECT_TRUE(table.Add(2));  // an existing slot only counts up
  EXPECT_FALSE(table.Add(9));
}

}  // namespace
}  // namespace airt::objectstore::internal
