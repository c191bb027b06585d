#include "objectstore/internal/allocator.h"

#include <map>
#include <random>

#include <gtest/gtest.h>

#include "objectstore/internal/layout.h"

namespace airt::objectstore::internal {
namespace {

TEST(ArenaAllocator, AllocatesAlignedBlocksUntilFull) {
  ArenaAllocator a(4096, 1024);
  auto x = a.Allocate(1);
  auto y = a.Allocate(100);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(*x % kObjectAlignment, 0u);
  EXPECT_EQ(*y % kObjectAlignment, 0u);
  EXPECT_EQ(a.used(), 64u + 128u);
  EXPECT_FALSE(a.Allocate(1024 - 191).has_value());
  EXPECT_TRUE(a.Allocate(1024 - 192).has_value());
  EXPECT_EQ(a.free_bytes(), 0u);
  EXPECT_FALSE(a.Allocate(0).has_value());
}

TEST(ArenaAllocator, CoalescesNeighboursOnFree) {
  ArenaAllocator a(0, 64 * 4);
  auto b0 = *a.Allocate(64), b1 = *a.Allocate(64), b2 = *a.Allocate(64), b3 = *a.Allocate(64);
  a.Free(b1, 64);
  a.Free(b3, 64);
  EXPECT_EQ(a.free_block_count(), 2u);
  EXPECT_FALSE(a.Allocate(128).has_value());  // fragmented
  a.Free(b2, 64);                             // joins b1..b3
  EXPECT_EQ(a.free_block_count(), 1u);
  EXPECT_EQ(a.largest_free_block(), 192u);
  a.Free(b0, 64);
  EXPECT_EQ(a.largest_free_block(), 256u);
  EXPECT_EQ(a.used(), 0u);
}

TEST(ArenaAllocator, PicksBestFitBlock) {
  ArenaAllocator a(0, 64 * 10);
  auto b0 = *a.Allocate(64 * 3), b1 = *a.Allocate(64), b2 = *a.Allocate(64),
       b3 = *a.Allocate(64 * 5);
  (void)b1;
  (void)b3;
  a.Free(b0, 64 * 3);
  a.Free(b2, 64);
  EXPECT_EQ(*a.Allocate(64), b2);  // the exact fit, not the bigger hole first in memory
}

TEST(ArenaAllocator, FootprintSaturatesInsteadOfWrapping) {
  EXPECT_EQ(ArenaAllocator::Footprint(~uint64_t{0}), ~uint64_t{0});
  EXPECT_EQ(ArenaAllocator::Footprint(~uint64_t{0} - 62), ~uint64_t{0});
  EXPECT_EQ(ArenaAllocator::Footprint(0), kObjectAlignment);
  EXPECT_EQ(ArenaAllocator::Footprint(65), 128u);
}

TEST(ArenaAllocator, RejectsAbsurdSizesWithoutOverflow) {
  ArenaAllocator a(0, 1 << 20);
  EXPECT_FALSE(a.Allocate(~uint64_t{0}).has_value());
  EXPECT_FALSE(a.Allocate(~uint64_t{0} - 10).has_value());
  EXPECT_EQ(a.used(), 0u);
}

TEST(ArenaAllocator, RandomWorkloadNeverOverlapsAndFreesBackToOneBlock) {
  constexpr uint64_t kCapacity = 1 << 20;
  ArenaAllocator a(0, kCapacity);
  std::map<uint64_t, uint64_t> live;  // offset -> footprint
  std::mt19937 rng(7);
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      uint64_t size = 1 + rng() % 8192;
      auto off = a.Allocate(size);
      if (!off) continue;
      uint64_t fp = ArenaAllocator::Footprint(size);
      auto next = live.lower_bound(*off);
      ASSERT_TRUE(next == live.end() || next->first >= *off + fp);
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second, *off);
      }
      live[*off] = fp;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      a.Free(it->first, it->second);
      live.erase(it);
    }
  }
  for (auto [off, fp] : live) a.Free(off, fp);
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.free_block_count(), 1u);
  EXPECT_EQ(a.largest_free_block(), kCapacity);
}

}  // namespace
}  // namespace airt::objectstore::internal
