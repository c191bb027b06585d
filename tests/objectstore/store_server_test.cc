// StoreServer and StoreClient in one process, over the real Unix socket and shared mapping.
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "objectstore/object_store.h"
#include "tests/testing/test_support.h"

namespace airt::objectstore {
namespace {

using airt::testing::TempDir;
using airt::testing::WaitUntil;
using namespace std::chrono_literals;

ObjectId NewId(uint32_t i) { return ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), i); }

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
std::string Text(std::span<const uint8_t> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

class StoreServerTest : public ::testing::Test {
 protected:
  void StartStore(uint64_t capacity = 8 << 20, uint32_t max_clients = 8, bool spill = false) {
    StoreOptions options;
    options.socket_path = dir_.File("store.sock");
    options.capacity_bytes = capacity;
    options.max_objects = 4096;
    options.max_clients = max_clients;
    options.pin_slots_per_client = 1024;
    if (spill) options.spill_dir = dir_.File("spill");
    auto server = StoreServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  std::unique_ptr<StoreClient> Connect() {
    auto client = StoreClient::Connect(server_->socket_path());
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }

  TempDir dir_;
  std::unique_ptr<StoreServer> server_;
};

TEST_F(StoreServerTest, ConnectReturnsUnavailableWhenNoStoreListens) {
  auto client = StoreClient::Connect(dir_.File("nobody.sock"));
  EXPECT_EQ(client.status().code(), Code::kUnavailable);
}

TEST_F(StoreServerTest, PutThenGetReturnsZeroCopyViewOfSameBytes) {
  StartStore();
  auto writer = Connect();
  auto reader = Connect();
  ObjectId id = NewId(1);
  ASSERT_TRUE(writer->Put(id, Bytes("payload"), Bytes("meta")).ok());
  Result<ObjectPin> pin = reader->Get(id, 1000);
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_EQ(Text(pin->data()), "payload");
  EXPECT_EQ(Text(pin->metadata()), "meta");
  auto map = reader->mapping();
  EXPECT_GE(pin->data().data(), map.data());
  EXPECT_LE(pin->data().data() + pin->data().size(), map.data() + map.size());
  EXPECT_TRUE(reader->Contains(id));
  EXPECT_FALSE(reader->Contains(NewId(2)));
}

TEST_F(StoreServerTest, GetWaitsForALaterSealFromAnotherClient) {
  StartStore();
  auto writer = Connect();
  auto reader = Connect();
  ObjectId id = NewId(1);
  std::thread later([&] {
    ASSERT_TRUE(WaitUntil([&] { return server_->Stats().num_clients == 2; }, 5s));
    auto object = writer->Create(id, 5);
    ASSERT_TRUE(object.ok());
    std::memcpy(object->data.data(), "later", 5);
    ASSERT_TRUE(writer->Seal(id).ok());
  });
  Result<ObjectPin> pin = reader->Get(id, 10000);
  later.join();
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_EQ(Text(pin->data()), "later");
}

TEST_F(StoreServerTest, GetTimesOutNamingTheMissingObjectAndKeepsNoPins) {
  StartStore();
  auto client = Connect();
  ObjectId here = NewId(1), missing = NewId(2);
  ASSERT_TRUE(client->Put(here, Bytes("x")).ok());
  std::vector<ObjectId> ids = {here, missing};
  auto pins = client->Get(ids, 50);
  ASSERT_EQ(pins.status().code(), Code::kDeadlineExceeded);
  EXPECT_NE(pins.status().message().find(missing.Hex()), std::string::npos);
  EXPECT_TRUE(client->Pins().empty());
  EXPECT_EQ(client->Get(missing, 0).status().code(), Code::kDeadlineExceeded);
}

TEST_F(StoreServerTest, PinsAreListedUntilReleased) {
  StartStore();
  auto client = Connect();
  ObjectId id = NewId(1);
  ASSERT_TRUE(client->Put(id, Bytes("x")).ok());
  {
    auto a = client->Get(id, 0);
    auto b = client->Get(id, 0);
    ASSERT_TRUE(a.ok() && b.ok());
    auto pins = client->Pins();
    ASSERT_EQ(pins.size(), 1u);
    EXPECT_EQ(pins[0].id, id);
    EXPECT_EQ(pins[0].count, 2u);
    EXPECT_EQ(server_->Stats().num_pinned, 1u);
  }
  EXPECT_TRUE(client->Pins().empty());
  EXPECT_EQ(server_->Stats().num_pinned, 0u);
}

TEST_F(StoreServerTest, SealErrorsReachTheCaller) {
  StartStore();
  auto owner = Connect();
  auto other = Connect();
  ObjectId id = NewId(1);
  ASSERT_TRUE(owner->Create(id, 4).ok());
  EXPECT_EQ(other->Seal(id).code(), Code::kFailedPrecondition);
  EXPECT_EQ(other->Seal(NewId(9)).code(), Code::kNotFound);
  ASSERT_TRUE(owner->Seal(id).ok());
  EXPECT_EQ(owner->Seal(id).code(), Code::kFailedPrecondition);
  EXPECT_EQ(owner->Create(id, 4).status().code(), Code::kAlreadyExists);
}

TEST_F(StoreServerTest, DisconnectAbortsUnsealedCreates) {
  StartStore();
  auto keeper = Connect();
  ObjectId sealed = NewId(1), unsealed = NewId(2);
  ASSERT_TRUE(keeper->Put(sealed, Bytes("x")).ok());
  {
    auto leaver = Connect();
    ASSERT_TRUE(leaver->Create(unsealed, 100).ok());
    auto pin = leaver->Get(sealed, 0);
    ASSERT_TRUE(pin.ok());
    EXPECT_EQ(server_->Stats().num_creating, 1u);
    pin->Release();
  }
  ASSERT_TRUE(WaitUntil([&] { return server_->Stats().num_clients == 1; }, 5s));
  StoreStats stats = server_->Stats();
  EXPECT_EQ(stats.num_creating, 0u);
  EXPECT_EQ(stats.num_pinned, 0u);
  EXPECT_TRUE(keeper->Create(unsealed, 100).ok());
}

TEST_F(StoreServerTest, RefusesClientsBeyondTheMaximumUntilOneLeaves) {
  StartStore(1 << 20, /*max_clients=*/2);
  auto a = Connect();
  auto b = Connect();
  auto c = StoreClient::Connect(server_->socket_path());
  ASSERT_EQ(c.status().code(), Code::kResourceExhausted);
  EXPECT_NE(c.status().message().find("maximum of 2 clients"), std::string::npos);
  a.reset();
  ASSERT_TRUE(WaitUntil([&] { return server_->Stats().num_clients == 1; }, 5s));
  EXPECT_TRUE(StoreClient::Connect(server_->socket_path()).ok());
}

TEST_F(StoreServerTest, DeleteOfPinnedObjectFinishesAtLastRelease) {
  StartStore();
  auto client = Connect();
  ObjectId id = NewId(1);
  ASSERT_TRUE(client->Put(id, Bytes("bytes")).ok());
  Result<ObjectPin> pin = client->Get(id, 0);
  ASSERT_TRUE(pin.ok());
  ASSERT_TRUE(client->Delete(id).ok());
  EXPECT_FALSE(client->Contains(id));
  EXPECT_EQ(Text(pin->data()), "bytes");  // still readable through the pin
  EXPECT_EQ(server_->Stats().num_objects, 1u);
  pin->Release();
  EXPECT_TRUE(WaitUntil([&] { return server_->Stats().num_objects == 0; }, 5s));
  EXPECT_EQ(client->Delete(id).code(), Code::kNotFound);
}

TEST_F(StoreServerTest, DeleteJobDeletesTheJobsObjectsOncePinsAreReleased) {
  StartStore();
  auto writer = Connect();
  auto reader = Connect();
  JobId job = JobId::FromRandom();
  ObjectId put = ObjectId::ForPut(TaskId::ForDriver(job), 1);
  ObjectId returned = ObjectId::ForReturn(TaskId::Of(ActorId::Of(job)), 1);
  ObjectId other = NewId(1);
  for (const ObjectId& id : {put, returned, other}) ASSERT_TRUE(writer->Put(id, Bytes("x")).ok());
  Result<ObjectPin> pin = reader->Get(returned, 1000);
  ASSERT_TRUE(pin.ok());
  Result<uint64_t> deleted = writer->DeleteJob(job);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, 2u);
  EXPECT_FALSE(reader->Contains(put));
  EXPECT_TRUE(reader->Contains(other));
  EXPECT_EQ(Text(pin->data()), "x") << "a pinned object stays readable";
  EXPECT_EQ(server_->Stats().num_objects, 2u);
  pin->Release();
  EXPECT_TRUE(WaitUntil([&] { return server_->Stats().num_objects == 1; }, 5s));
  EXPECT_EQ(*writer->DeleteJob(JobId::FromRandom()), 0u);
}

TEST_F(StoreServerTest, SpilledObjectsComeBackByteForByteOnGet) {
  StartStore(4 << 20, 8, /*spill=*/true);
  auto client = Connect();
  std::vector<ObjectId> ids;
  for (int i = 0; i < 12; ++i) {
    ObjectId id = NewId(i);
    auto object = client->Create(id, 1 << 20);
    ASSERT_TRUE(object.ok()) << object.status().ToString();
    for (size_t b = 0; b < object->data.size(); ++b)
      object->data[b] = static_cast<uint8_t>(b * 7 + i);
    ASSERT_TRUE(client->Seal(id).ok());
    ids.push_back(id);
  }
  EXPECT_GE(server_->Stats().num_spilled, 8u);
  for (int i = 0; i < 12; ++i) {
    auto pin = client->Get(ids[i], 5000);
    ASSERT_TRUE(pin.ok()) << pin.status().ToString();
    for (size_t b = 0; b < pin->data().size(); ++b) {
      ASSERT_EQ(pin->data()[b], static_cast<uint8_t>(b * 7 + i)) << "object " << i << " byte " << b;
    }
  }
  EXPECT_GE(server_->Stats().total_restored, 8u);
}

TEST_F(StoreServerTest, ManyThreadsShareOneClient) {
  StartStore();
  auto client = Connect();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        ObjectId id = NewId(static_cast<uint32_t>(t * 1000 + i));
        std::string value = std::to_string(t) + ":" + std::to_string(i);
        if (!client->Put(id, Bytes(value)).ok()) ++failures;
        auto pin = client->Get(id, 1000);
        if (!pin.ok() || Text(pin->data()) != value) ++failures;
        pin = Result<ObjectPin>(ObjectPin());
        if (!client->Delete(id).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(WaitUntil([&] { return server_->Stats().num_objects == 0; }, 5s));
}

}  // namespace
}  // namespace airt::objectstore

namespace airt::objectstore {
namespace {

TEST_F(StoreServerTest, GetOfMoreIdsThanOneFrameHoldsStillWaits) {
  StartStore(64 << 20);
  auto client = Connect();
  // 150,000 absent ids: more than one Wait frame carries. The Get must time out cleanly, not
  // break the connection.
  std::vector<ObjectId> ids;
  for (uint32_t i = 0; i < 150000; ++i) ids.push_back(NewId(i));
  EXPECT_EQ(client->Get(ids, 10).status().code(), Code::kDeadlineExceeded);
  ObjectId id = NewId(1);
  EXPECT_TRUE(client->Put(id, Bytes("still connected")).ok());
  EXPECT_TRUE(client->Get(id, 0).ok());
}

}  // namespace
}  // namespace airt::objectstore
