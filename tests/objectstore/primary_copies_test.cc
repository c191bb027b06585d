// Primary copies and their owners (StoreClient::ListPrimaries, MakePrimary, the owner named at
// Create): what a leaving node reads to evacuate its objects, and what the receiving node does
// with a pulled copy. Two in-process stores, the real socket protocol and a real pull over TCP.
#include <string>

#include <gtest/gtest.h>

#include "objectstore/object_store.h"
#include "objectstore/transfer.h"
#include "tests/testing/test_support.h"

namespace airt::objectstore {
namespace {

using airt::testing::TempDir;

ObjectId NewId(uint32_t i) { return ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), i); }

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

class PrimaryCopiesTest : public ::testing::Test {
 protected:
  std::unique_ptr<StoreServer> StartStore(const std::string& name, uint64_t capacity,
                                          bool spill = false) {
    StoreOptions options;
    options.socket_path = dir_.File(name + ".sock");
    options.capacity_bytes = capacity;
    options.max_objects = 4096;
    options.prefault = false;
    if (spill) options.spill_dir = dir_.File(name + "-spill");
    auto server = StoreServer::Start(options);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return std::move(*server);
  }
  std::unique_ptr<StoreClient> Connect(const StoreServer& server) {
    auto client = StoreClient::Connect(server.socket_path());
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return std::move(*client);
  }
  static std::map<ObjectId, PrimaryCopy> ByIdOf(const std::vector<PrimaryCopy>& copies) {
    std::map<ObjectId, PrimaryCopy> out;
    for (const PrimaryCopy& c : copies) out.emplace(c.id, c);
    return out;
  }

  TempDir dir_;
};

TEST_F(PrimaryCopiesTest, ListPrimariesNamesEachPrimaryWithItsOwnerAndSkipsTheRest) {
  auto server = StartStore("a", 8 << 20);
  auto client = Connect(*server);
  ObjectId owned = NewId(1), anonymous = NewId(2), secondary = NewId(3), unsealed = NewId(4),
           deleted = NewId(5);
  ASSERT_TRUE(client->Put(owned, Bytes("value"), Bytes("m"), "10.0.0.1:4000").ok());
  ASSERT_TRUE(client->Put(anonymous, Bytes("value")).ok());
  ASSERT_TRUE(client->Create(secondary, 3, 0, /*secondary=*/true, "ignored:1").ok());
  ASSERT_TRUE(client->Seal(secondary).ok());
  ASSERT_TRUE(client->Create(unsealed, 3, 0, false, "10.0.0.1:4000").ok());
  ASSERT_TRUE(client->Put(deleted, Bytes("gone"), {}, "10.0.0.1:4000").ok());
  ASSERT_TRUE(client->Delete(deleted).ok());

  bool more = true;
  Result<std::vector<PrimaryCopy>> listed = client->ListPrimaries(&more);
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_FALSE(more);
  auto by_id = ByIdOf(*listed);
  ASSERT_EQ(by_id.size(), 2u);
  EXPECT_EQ(by_id.at(owned).owner, "10.0.0.1:4000");
  EXPECT_EQ(by_id.at(owned).size, 6u);  // data and metadata
  EXPECT_EQ(by_id.at(anonymous).owner, "");
  Result<StoreStats> stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->num_primary, 2u);
}

TEST_F(PrimaryCopiesTest, ListPrimariesIncludesSpilledPrimaries) {
  auto server = StartStore("a", 1 << 20, /*spill=*/true);
  auto client = Connect(*server);
  std::string big(400 << 10, 'x');
  std::vector<ObjectId> ids;
  for (uint32_t i = 0; i < 4; ++i) {  // 1.6 MiB into 1 MiB: some are spilled
    ids.push_back(NewId(10 + i));
    ASSERT_TRUE(client->Put(ids.back(), Bytes(big), {}, "owner:" + std::to_string(i)).ok());
  }
  Result<StoreStats> stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  ASSERT_GT(stats->num_spilled, 0u);
  Result<std::vector<PrimaryCopy>> listed = client->ListPrimaries();
  ASSERT_TRUE(listed.ok());
  auto by_id = ByIdOf(*listed);
  ASSERT_EQ(by_id.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(by_id.at(ids[i]).owner, "owner:" + std::to_string(i));
}

TEST_F(PrimaryCopiesTest, PulledCopyBecomesThePrimaryAfterMakePrimary) {
  auto a = StartStore("a", 8 << 20);
  auto b = StartStore("b", 8 << 20);
  auto client_a = Connect(*a);
  auto client_b = Connect(*b);
  auto transfer = TransferServer::Start({a->socket_path(), "127.0.0.1", 0});
  ASSERT_TRUE(transfer.ok()) << transfer.status().ToString();
  ObjectId id = NewId(20);
  ASSERT_TRUE(client_a->Put(id, Bytes(std::string(70000, 'p')), {}, "127.0.0.1:5000").ok());

  ObjectPuller puller(client_b.get());
  ASSERT_TRUE(puller.Pull("127.0.0.1:" + std::to_string((*transfer)->port()), id, 30000).ok());
  Result<std::vector<PrimaryCopy>> before = client_b->ListPrimaries();
  ASSERT_TRUE(before.ok());
  EXPECT_TRUE(before->empty());  // a pulled copy is secondary

  ASSERT_TRUE(client_b->MakePrimary(id, "127.0.0.1:5000").ok());
  Result<std::vector<PrimaryCopy>> after = client_b->ListPrimaries();
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].id, id);
  EXPECT_EQ((*after)[0].owner, "127.0.0.1:5000");
  EXPECT_EQ((*after)[0].size, 70000u);
}

TEST_F(PrimaryCopiesTest, MakePrimaryFailsForAnObjectNotSealedHereAndForALongOwner) {
  auto server = StartStore("a", 8 << 20);
  auto client = Connect(*server);
  EXPECT_EQ(client->MakePrimary(NewId(30), "x:1").code(), Code::kNotFound);
  ObjectId creating = NewId(31);
  ASSERT_TRUE(client->Create(creating, 8).ok());
  EXPECT_EQ(client->MakePrimary(creating, "x:1").code(), Code::kNotFound);
  std::string long_owner(kMaxOwnerBytes + 1, 'o');
  EXPECT_EQ(client->MakePrimary(creating, long_owner).code(), Code::kInvalidArgument);
  EXPECT_EQ(client->Create(NewId(32), 8, 0, false, long_owner).status().code(),
            Code::kInvalidArgument);
  // Nothing stored was touched: the object being created is still there to seal.
  EXPECT_TRUE(client->Seal(creating).ok());
}

}  // namespace
}  // namespace airt::objectstore
