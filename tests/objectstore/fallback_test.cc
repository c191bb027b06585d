// Memory pressure: fallback memory (a file per object in the store's fallback folder) for what
// the arena cannot hold, its limit and a full disk, and working sets several times the store.
// A real StoreServer and StoreClients over the real Unix socket, shared mapping and files.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <tuple>

#include <gtest/gtest.h>
#include <sys/mount.h>

#include "objectstore/object_store.h"
#include "objectstore/transfer.h"
#include "tests/testing/test_support.h"

namespace airt::objectstore {
namespace {

namespace fs = std::filesystem;
using airt::testing::TempDir;
using airt::testing::WaitUntil;
using namespace std::chrono_literals;

constexpr uint64_t kMiB = 1 << 20;

ObjectId NewId(uint32_t i) { return ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), i); }

uint8_t PatternByte(uint64_t b, uint32_t seed) {
  return static_cast<uint8_t>((b * 2654435761u >> 13) + seed * 131);
}
std::vector<uint8_t> Pattern(uint64_t size, uint32_t seed) {
  std::vector<uint8_t> v(size);
  for (uint64_t b = 0; b < size; ++b) v[b] = PatternByte(b, seed);
  return v;
}
// Empty when `got` holds Pattern(size, seed), else where it first differs.
std::string Mismatch(std::span<const uint8_t> got, uint64_t size, uint32_t seed) {
  if (got.size() != size) return "size " + std::to_string(got.size());
  for (uint64_t b = 0; b < size; ++b) {
    if (got[b] != PatternByte(b, seed)) return "byte " + std::to_string(b);
  }
  return "";
}

size_t FilesIn(const std::string& dir) {
  std::error_code ec;
  size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir, ec)) n += entry.is_regular_file();
  return n;
}

class FallbackTest : public ::testing::Test {
 protected:
  struct Setup {
    uint64_t capacity = 8 * kMiB;
    bool spill = true;
    bool fallback = true;
    uint64_t fallback_limit = ~uint64_t{0};
    std::string fallback_dir;  // empty: fallback/ in the test's folder
  };
  void StartStore(Setup setup) {
    StoreOptions options;
    options.socket_path = dir_.File("store.sock");
    options.capacity_bytes = setup.capacity;
    options.max_objects = 4096;
    options.pin_slots_per_client = 1024;
    options.prefault = false;
    if (setup.spill) options.spill_dir = spill_dir_;
    fallback_dir_ = setup.fallback_dir.empty() ? dir_.File("fallback") : setup.fallback_dir;
    if (setup.fallback) options.fallback_dir = fallback_dir_;
    options.fallback_limit_bytes = setup.fallback_limit;
    auto server = StoreServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  std::unique_ptr<StoreClient> Connect() {
    auto client =
        StoreClient::Connect(server_->socket_path(), StoreClient::Options{.prefault = false});
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }
  Status PutPattern(StoreClient& client, const ObjectId& id, uint64_t size, uint32_t seed) {
    std::vector<uint8_t> bytes = Pattern(size, seed);
    return client.Put(id, bytes);
  }

  TempDir dir_;
  std::string spill_dir_ = dir_.File("spill");
  std::string fallback_dir_;
  std::unique_ptr<StoreServer> server_;
};

TEST_F(FallbackTest, PutLargerThanTheStoreGoesToFallbackAndReadsBackByteExact) {
  ASSERT_NO_FATAL_FAILURE(StartStore({}));
  auto writer = Connect();
  auto reader = Connect();
  ObjectId small = NewId(1), big = NewId(2);
  ASSERT_TRUE(PutPattern(*writer, small, kMiB, 1).ok());
  Status put = PutPattern(*writer, big, 12 * kMiB, 2);  // 1.5 times the store
  ASSERT_TRUE(put.ok()) << put.ToString();

  StoreStats stats = server_->Stats();
  EXPECT_EQ(stats.num_fallback, 1u);
  EXPECT_EQ(stats.fallback_bytes, 12 * kMiB);
  EXPECT_EQ(stats.total_fallback, 1u);
  EXPECT_EQ(stats.used_bytes, kMiB);  // the arena holds the small one only
  EXPECT_EQ(stats.num_spilled, 0u);   // nothing had to make room for a file
  EXPECT_EQ(FilesIn(fallback_dir_), 1u);

  Result<ObjectPin> pin = reader->Get(big, 1000);
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_EQ(Mismatch(pin->data(), 12 * kMiB, 2), "");
  auto arena = reader->mapping();
  EXPECT_TRUE(pin->data().data() >= arena.data() + arena.size() ||
              pin->data().data() + pin->data().size() <= arena.data())
      << "a fallback object lies outside the arena";
  EXPECT_TRUE(reader->Contains(big));
  Result<ObjectPin> small_pin = reader->Get(small, 1000);
  ASSERT_TRUE(small_pin.ok());
  EXPECT_EQ(Mismatch(small_pin->data(), kMiB, 1), "");
}

TEST_F(FallbackTest, DeleteRemovesTheFallbackFileOnceTheLastPinGoes) {
  ASSERT_NO_FATAL_FAILURE(StartStore({}));
  auto writer = Connect();
  auto reader = Connect();
  ObjectId big = NewId(1);
  ASSERT_TRUE(PutPattern(*writer, big, 10 * kMiB, 3).ok());
  Result<ObjectPin> pin = reader->Get(big, 1000);
  ASSERT_TRUE(pin.ok());
  ASSERT_TRUE(writer->Delete(big).ok());
  // Pinned: the file stays, and the reader's view with it.
  EXPECT_EQ(FilesIn(fallback_dir_), 1u);
  EXPECT_EQ(Mismatch(pin->data(), 10 * kMiB, 3), "");
  pin->Release();
  EXPECT_TRUE(WaitUntil([&] { return server_->Stats().num_objects == 0; }, 5s));
  StoreStats stats = server_->Stats();
  EXPECT_EQ(stats.num_fallback, 0u);
  EXPECT_EQ(stats.fallback_bytes, 0u);
  EXPECT_EQ(FilesIn(fallback_dir_), 0u);

  // Unpinned, Delete removes it at once; an aborted one goes too.
  ObjectId again = NewId(2);
  ASSERT_TRUE(PutPattern(*writer, again, 9 * kMiB, 4).ok());
  EXPECT_EQ(FilesIn(fallback_dir_), 1u);
  ASSERT_TRUE(writer->Delete(again).ok());
  EXPECT_EQ(FilesIn(fallback_dir_), 0u);
  ObjectId aborted = NewId(3);
  ASSERT_TRUE(writer->Create(aborted, 9 * kMiB).ok());
  EXPECT_EQ(FilesIn(fallback_dir_), 1u);
  ASSERT_TRUE(writer->Abort(aborted).ok());
  EXPECT_EQ(FilesIn(fallback_dir_), 0u);
  EXPECT_EQ(server_->Stats().num_objects, 0u);
}

TEST_F(FallbackTest, ObjectsBeingCreatedInFallbackGoWhenTheirCreatorDisconnects) {
  ASSERT_NO_FATAL_FAILURE(StartStore({}));
  auto creator = Connect();
  ASSERT_TRUE(creator->Create(NewId(1), 9 * kMiB).ok());
  EXPECT_EQ(server_->Stats().num_fallback, 1u);
  creator.reset();
  EXPECT_TRUE(WaitUntil([&] { return server_->Stats().num_objects == 0; }, 5s));
  EXPECT_EQ(FilesIn(fallback_dir_), 0u);
  EXPECT_EQ(server_->Stats().fallback_bytes, 0u);
}

TEST_F(FallbackTest, PutPastTheFallbackLimitIsResourceExhaustedNamingSizesAndFolder) {
  ASSERT_NO_FATAL_FAILURE(StartStore({.fallback_limit = 16 * kMiB}));
  auto client = Connect();
  ObjectId kept = NewId(1), first = NewId(2), refused = NewId(3);
  ASSERT_TRUE(PutPattern(*client, kept, 2 * kMiB, 5).ok());
  ASSERT_TRUE(PutPattern(*client, first, 12 * kMiB, 6).ok());
  Status full = PutPattern(*client, refused, 12 * kMiB, 7);
  ASSERT_EQ(full.code(), Code::kResourceExhausted) << full.ToString();
  const std::string& m = full.message();
  EXPECT_NE(m.find(refused.Hex()), std::string::npos) << m;
  EXPECT_NE(m.find(std::to_string(12 * kMiB) + " bytes"), std::string::npos) << m;  // the size
  EXPECT_NE(m.find(std::to_string(8 * kMiB) + " bytes"), std::string::npos) << m;   // capacity
  EXPECT_NE(m.find(std::to_string(2 * kMiB) + " bytes in use"), std::string::npos) << m;
  EXPECT_NE(m.find(fs::path(fallback_dir_).lexically_normal().string()), std::string::npos) << m;
  EXPECT_NE(m.find("limit"), std::string::npos) << m;
  // Nothing already stored is lost, and the refused object left no file behind.
  EXPECT_FALSE(client->Contains(refused));
  EXPECT_EQ(FilesIn(fallback_dir_), 1u);
  for (auto [id, size, seed] : {std::tuple{kept, 2 * kMiB, 5u}, std::tuple{first, 12 * kMiB, 6u}}) {
    Result<ObjectPin> pin = client->Get(id, 1000);
    ASSERT_TRUE(pin.ok()) << pin.status().ToString();
    EXPECT_EQ(Mismatch(pin->data(), size, seed), "");
  }
  // Room made, the same put succeeds.
  ASSERT_TRUE(client->Delete(first).ok());
  EXPECT_TRUE(PutPattern(*client, refused, 12 * kMiB, 7).ok());
}

TEST_F(FallbackTest, PutIsResourceExhaustedNamingTheFolderWhenItsDiskIsFull) {
  // A 4 MiB tmpfs as the whole disk of the fallback folder (and of the spill folder). Mounting
  // needs root (CAP_SYS_ADMIN).
  std::string disk = dir_.File("tiny");
  fs::create_directories(disk);
  if (::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=4m") != 0) {
    GTEST_SKIP() << "skipped: cannot mount a tmpfs here (" << std::strerror(errno) << ")";
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{disk};
  spill_dir_ = disk + "/spill";
  ASSERT_NO_FATAL_FAILURE(StartStore({.fallback_dir = disk + "/fallback"}));
  auto client = Connect();
  ObjectId kept = NewId(1), huge = NewId(2);
  ASSERT_TRUE(PutPattern(*client, kept, 3 * kMiB, 8).ok());
  Status full = PutPattern(*client, huge, 12 * kMiB, 9);
  ASSERT_EQ(full.code(), Code::kResourceExhausted) << full.ToString();
  EXPECT_NE(full.message().find("full"), std::string::npos) << full.ToString();
  EXPECT_NE(full.message().find(disk + "/fallback"), std::string::npos) << full.ToString();
  EXPECT_NE(full.message().find(std::to_string(12 * kMiB)), std::string::npos) << full.ToString();
  EXPECT_EQ(FilesIn(disk + "/fallback"), 0u);
  Result<ObjectPin> pin = client->Get(kept, 1000);
  ASSERT_TRUE(pin.ok());
  EXPECT_EQ(Mismatch(pin->data(), 3 * kMiB, 8), "");
}

TEST_F(FallbackTest, WorkingSetFourTimesTheStoreReadsBackInOrderAndInRandomOrder) {
  ASSERT_NO_FATAL_FAILURE(StartStore({}));
  auto client = Connect();
  constexpr uint32_t kCount = 32;  // of 1 MiB each, into an 8 MiB store
  std::vector<ObjectId> ids;
  for (uint32_t i = 0; i < kCount; ++i) {
    ids.push_back(NewId(i));
    Status put = PutPattern(*client, ids.back(), kMiB + i * 4096, i);
    ASSERT_TRUE(put.ok()) << "object " << i << ": " << put.ToString();
  }
  StoreStats written = server_->Stats();
  EXPECT_EQ(written.num_objects, kCount);
  EXPECT_GE(written.num_spilled, kCount - 8);
  EXPECT_EQ(written.num_fallback, 0u) << "objects that fit after spilling stay out of fallback";
  auto check = [&](uint32_t i) {
    Result<ObjectPin> pin = client->Get(ids[i], 5000);
    ASSERT_TRUE(pin.ok()) << "object " << i << ": " << pin.status().ToString();
    EXPECT_EQ(Mismatch(pin->data(), kMiB + i * 4096, i), "") << "object " << i;
  };
  for (uint32_t i = 0; i < kCount; ++i) ASSERT_NO_FATAL_FAILURE(check(i));
  std::vector<uint32_t> order(kCount);
  for (uint32_t i = 0; i < kCount; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  for (uint32_t i : order) ASSERT_NO_FATAL_FAILURE(check(i));
  EXPECT_GT(server_->Stats().total_restored, kCount);

  // One Get of the whole working set at once: what the arena cannot hold is restored into
  // fallback memory rather than spilled again (which would never let the Get finish).
  Result<std::vector<ObjectPin>> all = client->Get(ids, 10000);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  for (uint32_t i = 0; i < kCount; ++i) {
    EXPECT_EQ(Mismatch((*all)[i].data(), kMiB + i * 4096, i), "") << "object " << i;
  }
  EXPECT_GT(server_->Stats().num_fallback, 0u);
  all->clear();
  EXPECT_EQ(server_->Stats().num_pinned, 0u);
  EXPECT_EQ(server_->Stats().num_objects, kCount);
}

TEST_F(FallbackTest, SpilledObjectIsRestoredIntoFallbackWhenTheArenaIsPinnedFull) {
  ASSERT_NO_FATAL_FAILURE(StartStore({}));
  auto client = Connect();
  ObjectId a = NewId(1), b = NewId(2);
  ASSERT_TRUE(PutPattern(*client, a, 5 * kMiB, 11).ok());
  ASSERT_TRUE(PutPattern(*client, b, 5 * kMiB, 12).ok());  // spills a
  ASSERT_EQ(server_->Stats().num_spilled, 1u);
  Result<ObjectPin> pin_b = client->Get(b, 1000);
  ASSERT_TRUE(pin_b.ok());
  Result<ObjectPin> pin_a = client->Get(a, 1000);
  ASSERT_TRUE(pin_a.ok()) << pin_a.status().ToString();
  EXPECT_EQ(Mismatch(pin_a->data(), 5 * kMiB, 11), "");
  StoreStats stats = server_->Stats();
  EXPECT_EQ(stats.num_spilled, 0u);
  EXPECT_EQ(stats.num_fallback, 1u);
  EXPECT_EQ(FilesIn(spill_dir_), 0u);
}

TEST_F(FallbackTest, SecondaryCopiesInFallbackAreEvictedToMakeRoomThere) {
  ASSERT_NO_FATAL_FAILURE(StartStore({.fallback_limit = 16 * kMiB}));
  auto client = Connect();
  ObjectId copy = NewId(1), primary = NewId(2);
  auto object = client->Create(copy, 12 * kMiB, 0, /*secondary=*/true);
  ASSERT_TRUE(object.ok()) << object.status().ToString();
  ASSERT_TRUE(client->Seal(copy).ok());
  ASSERT_EQ(server_->Stats().num_fallback, 1u);
  ASSERT_TRUE(PutPattern(*client, primary, 12 * kMiB, 13).ok());
  StoreStats stats = server_->Stats();
  EXPECT_EQ(stats.total_evicted, 1u);
  EXPECT_FALSE(client->Contains(copy));
  EXPECT_EQ(stats.num_fallback, 1u);
  // A primary copy in fallback is never dropped: the next one is refused instead.
  EXPECT_EQ(PutPattern(*client, NewId(3), 12 * kMiB, 14).code(), Code::kResourceExhausted);
  EXPECT_TRUE(client->Contains(primary));
}

TEST_F(FallbackTest, WithoutAFallbackFolderAPutLargerThanTheStoreIsRefused) {
  ASSERT_NO_FATAL_FAILURE(StartStore({.fallback = false}));
  auto client = Connect();
  Status put = PutPattern(*client, NewId(1), 12 * kMiB, 15);
  EXPECT_EQ(put.code(), Code::kResourceExhausted) << put.ToString();
  EXPECT_EQ(server_->Stats().num_objects, 0u);
}

TEST_F(FallbackTest, PulledObjectLargerThanTheReceivingStoreLandsInItsFallback) {
  ASSERT_NO_FATAL_FAILURE(StartStore({}));  // the receiver, 8 MiB
  StoreOptions sender_options;
  sender_options.socket_path = dir_.File("sender.sock");
  sender_options.capacity_bytes = 4 * kMiB;  // the sender holds it in fallback too
  sender_options.fallback_dir = dir_.File("sender-fallback");
  sender_options.prefault = false;
  auto sender = StoreServer::Start(sender_options);
  ASSERT_TRUE(sender.ok()) << sender.status().ToString();
  auto transfer = TransferServer::Start({(*sender)->socket_path(), "127.0.0.1", 0});
  ASSERT_TRUE(transfer.ok()) << transfer.status().ToString();
  auto source = StoreClient::Connect((*sender)->socket_path());
  ASSERT_TRUE(source.ok());
  ObjectId id = NewId(1);
  ASSERT_TRUE(PutPattern(**source, id, 12 * kMiB, 16).ok());
  ASSERT_EQ((*sender)->Stats().num_fallback, 1u);

  auto local = Connect();
  {
    ObjectPuller puller(local.get());
    Status pulled = puller.Pull("127.0.0.1:" + std::to_string((*transfer)->port()), id, 20000);
    ASSERT_TRUE(pulled.ok()) << pulled.ToString();
  }
  StoreStats stats = server_->Stats();
  EXPECT_EQ(stats.num_fallback, 1u);
  EXPECT_EQ(stats.used_bytes, 0u);
  Result<ObjectPin> pin = local->Get(id, 1000);
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_EQ(Mismatch(pin->data(), 12 * kMiB, 16), "");
  pin->Release();
  // A secondary copy: the receiver's next object that needs fallback room may evict it.
  EXPECT_TRUE(WaitUntil([&] { return (*sender)->Stats().num_pinned == 0; }, 5s));
  transfer->reset();
}

}  // namespace
}  // namespace airt::objectstore
