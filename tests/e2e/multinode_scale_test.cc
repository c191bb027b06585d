// Multi-node at scale (label `scale`): a 1 GiB result made by a task on a second node reaches the
// driver intact, pulled through the transfer services into the store of the driver's node.
#include <gtest/gtest.h>

#include "airt/api.h"
#include "common/ids.h"
#include "objectstore/object_store.h"
#include "tests/e2e/multinode_cluster.h"
#include "tests/e2e/object_pattern.h"

std::vector<uint8_t> PatternBytes(int64_t size, int64_t seed);

namespace airt {
namespace {

using objectstore::StoreClient;

// Both stores hold 2 GiB: the default 1 GiB cannot hold 1 GiB and the value's msgpack header.
TEST(MultiNodeScale, OneGibibyteResultIsPulledIntoTheDriversNodeStoreIntact) {
  constexpr int64_t kSize = int64_t{1} << 30;
  constexpr int64_t kSeed = 77;
  // msgpack encodes a std::vector<uint8_t> this long as bin 32: 0xc6, a 4-byte length, the bytes.
  constexpr size_t kHeader = 5;
  e2e::MultiNodeCluster cluster(
      {"--num-cpus=1", "--object-store-memory=2G", "--cluster-view-interval-ms=100"});
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("driver", {}));
  ASSERT_NO_FATAL_FAILURE(cluster.AddNode("remote", {"--resources={\"remote\": 1}"}));
  cluster.Init();
  auto options = StoreClient::Options{.prefault = false};
  auto driver_store = StoreClient::Connect(cluster.StoreSocket("driver"), options);
  auto remote_store = StoreClient::Connect(cluster.StoreSocket("remote"), options);
  ASSERT_TRUE(driver_store.ok()) << driver_store.status().ToString();
  ASSERT_TRUE(remote_store.ok()) << remote_store.status().ToString();

  ObjectRef<std::vector<uint8_t>> ref =
      Task(PatternBytes).SetResource("remote", 1).Remote(kSize, kSeed);
  ASSERT_TRUE(Wait(std::vector{ref}, 1, 600000).unready.empty()) << cluster.Log("remote");
  ASSERT_EQ(ref.ID().size(), ObjectId::kSize);
  ObjectId id = ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(ref.ID().data()));
  // Made on `remote`, so only its store holds it (Wait tells that it is ready; it fetches nothing).
  EXPECT_TRUE((*remote_store)->Contains(id));
  EXPECT_FALSE((*driver_store)->Contains(id));

  std::shared_ptr<std::vector<uint8_t>> got = Get(ref, 600000);
  ASSERT_EQ(got->size(), static_cast<size_t>(kSize));
  EXPECT_EQ(e2e::FirstMismatchSampled(*got, kSeed), std::nullopt);
  EXPECT_EQ(e2e::Checksum(*got), e2e::PatternChecksum(kSize, kSeed));
  got.reset();

  // The bytes came through the transfer service into the driver's node store, where a copy (the
  // value's msgpack encoding) stays; the primary copy stays on `remote`.
  ASSERT_TRUE((*driver_store)->Contains(id));
  Result<objectstore::ObjectPin> pin = (*driver_store)->Get(id, 0);
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  std::span<const uint8_t> stored = pin->data();
  ASSERT_EQ(stored.size(), kHeader + kSize);
  EXPECT_EQ(stored[0], 0xc6);
  EXPECT_EQ(e2e::FirstMismatchSampled(stored.subspan(kHeader), kSeed), std::nullopt);
  EXPECT_TRUE((*remote_store)->Contains(id));
}

}  // namespace
}  // namespace airt
