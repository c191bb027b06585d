// The object store at scale, across real processes: a million small objects in one daemon, and
// one object of 3 GiB written by one process and checked by others. Labelled "scale".
#include <chrono>
#include <iostream>

#include "tests/e2e/object_pattern.h"
#include "tests/e2e/store_fixture.h"

namespace airt::e2e {
namespace {

using objectstore::StoreStats;

class ObjectStoreScale : public StoreFixture {};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

TEST_F(ObjectStoreScale, HoldsAndServesAMillionSmallObjectsWhenOneClientPutsThem) {
  constexpr uint32_t kCount = 1'000'000;
  ASSERT_NO_FATAL_FAILURE(
      StartStore({"--capacity", "128M", "--max-objects", "1100000", "--no-prefault"}));
  const std::string base = Id(1).Hex();

  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(RunTool("put-many", {base, std::to_string(kCount), "64", "41"}, 120s), 0);
  std::cerr << "put " << kCount << " objects in " << Seconds(start) << " s\n";
  StoreStats stats = Stats();
  EXPECT_EQ(stats.num_objects, kCount);
  EXPECT_EQ(stats.num_sealed, kCount);
  EXPECT_EQ(stats.num_creating, 0u);
  EXPECT_EQ(stats.used_bytes, uint64_t{kCount} * 64);

  // Every object from another process, and three through this one's own mapping.
  start = std::chrono::steady_clock::now();
  EXPECT_EQ(RunTool("verify-many", {base, std::to_string(kCount), "64", "41"}, 60s), 0);
  std::cerr << "verified every object in " << Seconds(start) << " s\n";
  for (uint32_t i : {0u, kCount / 2, kCount - 1}) {
    ObjectId id = BatchId(Id(1), i);
    EXPECT_TRUE(observer().Contains(id)) << i;
    auto pin = observer().Get(id, 0);
    ASSERT_TRUE(pin.ok()) << i << ": " << pin.status().ToString();
    EXPECT_EQ(FirstMismatch(pin->data(), BatchSeed(41, i)), std::nullopt) << i;
  }
  EXPECT_FALSE(observer().Contains(BatchId(Id(1), kCount)));
  EXPECT_EQ(Stats().num_pinned, 0u);
  StopStore();
}

TEST_F(ObjectStoreScale, ServesAThreeGibObjectToOtherProcessesWhenOneProcessWroteIt) {
  constexpr uint64_t kSize = 3ull << 30;
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "3100M", "--max-objects", "16"}));
  const std::string id = Id(1).Hex();

  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(RunTool("put", {id, std::to_string(kSize), "51"}, 120s), 0);
  std::cerr << "created, filled and sealed 3 GiB in " << Seconds(start) << " s\n";
  StoreStats stats = Stats();
  EXPECT_EQ(stats.num_sealed, 1u);
  EXPECT_GE(stats.used_bytes, kSize);

  // Every byte, in another process.
  start = std::chrono::steady_clock::now();
  EXPECT_EQ(RunTool("read-verify", {id, std::to_string(kSize), "51"}, 120s), 0);
  std::cerr << "verified 3 GiB in another process in " << Seconds(start) << " s\n";
  // And one word per page here, through this process's own mapping.
  auto pin = observer().Get(Id(1), 0);
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_EQ(pin->data().size(), kSize);
  EXPECT_EQ(FirstMismatchSampled(pin->data(), 51), std::nullopt);
  pin->Release();
  EXPECT_EQ(Stats().num_pinned, 0u);
  StopStore();
}

}  // namespace
}  // namespace airt::e2e
