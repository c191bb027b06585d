// Gets of many objects made on two other nodes: a head, three airt-node processes on this machine
// (each with its own store and transfer service), and this test as the driver on the first. The
// driver's core worker pulls each node's objects in one pipelined batch; airt::Buffer views them
// in the driver's node store; a node that dies fails only its own objects.
#include <signal.h>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "airt/buffer.h"
#include "objectstore/object_store.h"
#include "tests/e2e/multinode_cluster.h"
#include "tests/testing/test_support.h"

std::vector<uint8_t> Bytes(int n, int seed);

namespace airt {
namespace {

constexpr int kSize = 200 << 10;  // over the inline threshold: kept in the maker's store

ObjectId IdOf(const std::string& binary) {
  return ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(binary.data()));
}

bool HasPattern(const uint8_t* data, size_t size, int seed) {
  if (size != static_cast<size_t>(kSize)) return false;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != static_cast<uint8_t>(i * 7 + seed)) return false;
  }
  return true;
}

class MultiNodeFetch : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(cluster_.AddNode("first", {}));
    ASSERT_NO_FATAL_FAILURE(cluster_.AddNode("second", {"--resources={\"second\": 1}"}));
    ASSERT_NO_FATAL_FAILURE(cluster_.AddNode("third", {"--resources={\"third\": 1}"}));
    cluster_.Init();
  }
  // `n` objects made on node `resource`, seeds from `seed`; waits until all are made. Their
  // tasks may not run again, so a dead node's objects are lost, not rebuilt (lineage).
  std::vector<ObjectRef<std::vector<uint8_t>>> Make(const std::string& resource, int n, int seed) {
    std::vector<ObjectRef<std::vector<uint8_t>>> refs;
    for (int i = 0; i < n; ++i) {
      refs.push_back(Task(Bytes).SetResource(resource, 1).SetMaxRetries(0).Remote(kSize, seed + i));
    }
    EXPECT_TRUE(Wait(refs, n, 60000).unready.empty());
    return refs;
  }

  e2e::MultiNodeCluster cluster_{
      {"--num-cpus=1", "--object-store-memory=128M", "--cluster-view-interval-ms=100"}};
};

TEST_F(MultiNodeFetch, GetOfManyObjectsFromTwoNodesArrivesWholeAndViewsWithoutACopy) {
  auto on_second = Make("second", 30, 0);
  auto on_third = Make("third", 30, 100);
  std::vector<ObjectRef<std::vector<uint8_t>>> all = on_second;
  all.insert(all.end(), on_third.begin(), on_third.end());
  auto local = objectstore::StoreClient::Connect(cluster_.StoreSocket("first"));
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  std::vector<std::shared_ptr<std::vector<uint8_t>>> values = Get(all, 60000);
  ASSERT_EQ(values.size(), all.size());
  for (size_t i = 0; i < values.size(); ++i) {
    int seed = i < 30 ? static_cast<int>(i) : static_cast<int>(100 + i - 30);
    EXPECT_TRUE(HasPattern(values[i]->data(), values[i]->size(), seed)) << i;
    EXPECT_TRUE((*local)->Contains(IdOf(all[i].ID())));  // pulled into the driver's node
  }

  // The same objects read as airt::Buffer: views into the driver's node store, no copy.
  std::vector<ObjectRef<Buffer>> as_buffers;
  for (const auto& ref : all) as_buffers.emplace_back(ref.ID());
  std::vector<std::shared_ptr<Buffer>> views = Get(as_buffers, 60000);
  for (size_t i = 0; i < views.size(); ++i) {
    int seed = i < 30 ? static_cast<int>(i) : static_cast<int>(100 + i - 30);
    EXPECT_TRUE(views[i]->is_view());
    EXPECT_TRUE(HasPattern(views[i]->data(), views[i]->size(), seed)) << i;
  }
  // A fresh object from another node, straight into a view.
  auto fresh = Make("third", 1, 7);
  std::shared_ptr<Buffer> one = Get(ObjectRef<Buffer>(fresh[0].ID()), 60000);
  EXPECT_TRUE(one->is_view());
  EXPECT_TRUE(HasPattern(one->data(), one->size(), 7));
}

TEST_F(MultiNodeFetch, ObjectsOfADeadNodeFailAloneNamingThemWhileTheOthersArrive) {
  auto on_second = Make("second", 10, 0);
  auto on_third = Make("third", 10, 100);
  cluster_.node("third").Kill(SIGKILL);  // its store and transfer service go with it
  ASSERT_EQ(cluster_.node("third").Wait(std::chrono::seconds(10)), 128 + SIGKILL);
  // Wait started pulling the ready objects in the background; drop what came from `third` (as
  // eviction would), so that the Get below must reach the dead node for them.
  auto local = objectstore::StoreClient::Connect(cluster_.StoreSocket("first"));
  ASSERT_TRUE(local.ok()) << local.status().ToString();
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        auto stats = (*local)->Stats();
        return stats.ok() && stats->num_creating == 0;
      },
      std::chrono::seconds(20)));
  for (const auto& ref : on_third) {
    if ((*local)->Contains(IdOf(ref.ID()))) {
      ASSERT_TRUE((*local)->Delete(IdOf(ref.ID())).ok());
    }
  }

  std::vector<ObjectRef<std::vector<uint8_t>>> mixed;
  for (int i = 0; i < 10; ++i) {
    mixed.push_back(on_second[i]);
    mixed.push_back(on_third[i]);
  }
  try {
    Get(mixed, 60000);
    FAIL() << "a Get of objects on a dead node succeeded";
  } catch (const ObjectLostError& e) {
    // The first failed object, in order: on_third[0], naming it and its node.
    EXPECT_NE(std::string(e.what()).find(IdOf(on_third[0].ID()).Hex()), std::string::npos)
        << e.what();
  }
  // Every object of the live node is in the driver's node store.
  for (const auto& ref : on_second) EXPECT_TRUE((*local)->Contains(IdOf(ref.ID())));
  std::vector<std::shared_ptr<std::vector<uint8_t>>> values = Get(on_second, 60000);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(HasPattern(values[i]->data(), values[i]->size(), i));
  for (const auto& ref : on_third) EXPECT_THROW(Get(ref, 60000), ObjectLostError);
}

}  // namespace
}  // namespace airt
