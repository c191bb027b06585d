// Fallback memory end to end, from a C++ driver: a real head and a node whose object store has
// 64 MiB, real airt-worker processes. A put and a task's return larger than the whole store are
// held in fallback files in the node's folder and read back byte for byte.
#include <filesystem>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "objectstore/object_store.h"
#include "tests/e2e/task_cluster.h"

std::vector<uint8_t> Bytes(int n, int seed);

namespace airt {
namespace {

namespace fs = std::filesystem;
constexpr int kStoreMiB = 64;
constexpr int kObjectMiB = 96;

class StoreFallback : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new e2e::TaskCluster(
        {"--num-cpus=2", "--object-store-memory=" + std::to_string(kStoreMiB) + "M"});
    if (::testing::Test::HasFatalFailure()) return;
    for (const auto& entry : fs::directory_iterator(cluster_->dir().path())) {
      auto socket = entry.path() / "store.sock";
      if (!fs::exists(socket)) continue;
      node_dir_ = new std::string(entry.path().string());
      auto client = objectstore::StoreClient::Connect(
          socket.string(), objectstore::StoreClient::Options{.prefault = false});
      if (client.ok()) store_ = client->release();
    }
  }
  static void TearDownTestSuite() {
    delete store_;
    delete node_dir_;
    delete cluster_;
  }
  void SetUp() override {
    ASSERT_NE(store_, nullptr) << "no store found in " << cluster_->dir().path();
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- node log ----\n" << cluster_->NodeLog();
  }
  static size_t FallbackFiles() {
    std::error_code ec;
    size_t n = 0;
    for (const auto& entry : fs::directory_iterator(*node_dir_ + "/fallback", ec)) {
      n += entry.is_regular_file();
    }
    return n;
  }

  static e2e::TaskCluster* cluster_;
  static objectstore::StoreClient* store_;
  static std::string* node_dir_;
};

e2e::TaskCluster* StoreFallback::cluster_ = nullptr;
objectstore::StoreClient* StoreFallback::store_ = nullptr;
std::string* StoreFallback::node_dir_ = nullptr;

TEST_F(StoreFallback, APutLargerThanTheStoreReadsBackFromFallbackMemory) {
  std::vector<uint8_t> bytes(static_cast<size_t>(kObjectMiB) << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13 + (i >> 20));
  {
    ObjectRef<std::vector<uint8_t>> ref = Put(bytes);
    Result<objectstore::StoreStats> stats = store_->Stats();
    ASSERT_TRUE(stats.ok());
    EXPECT_EQ(stats->capacity_bytes, static_cast<uint64_t>(kStoreMiB) << 20);
    EXPECT_EQ(stats->num_fallback, 1u);
    EXPECT_GE(stats->fallback_bytes, bytes.size());
    EXPECT_EQ(FallbackFiles(), 1u);
    EXPECT_TRUE(*Get(ref) == bytes);
    // A task on a worker process reads it too.
    EXPECT_EQ(Get(Task(Bytes).Remote(16, 1))->size(), 16u);
  }
  // The reference gone, the object and its file go.
  EXPECT_TRUE(testing::WaitUntil([] { return FallbackFiles() == 0; }, std::chrono::seconds(20)))
      << FallbackFiles() << " fallback files left";
}

TEST_F(StoreFallback, AReturnLargerThanTheStoreReadsBackFromFallbackMemory) {
  ObjectRef<std::vector<uint8_t>> huge = Task(Bytes).Remote(kObjectMiB << 20, 5);
  std::shared_ptr<std::vector<uint8_t>> got = Get(huge, 120'000);
  ASSERT_EQ(got->size(), static_cast<size_t>(kObjectMiB) << 20);
  for (size_t i = 0; i < got->size(); ++i) {
    ASSERT_EQ((*got)[i], static_cast<uint8_t>(i * 7 + 5)) << "byte " << i;
  }
}

}  // namespace
}  // namespace airt
