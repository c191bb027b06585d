// An object's copies outlive its primary's node (docs/ownership.md "Copies"), with real kill -9:
// a head, airt-node processes on this machine, and this test as the driver (the owner) on the
// first node. A task return that may not be rebuilt (max_retries 0) is made on node `a`; a task on
// node `b` reads it (b's store pulls a copy, and the owner hears of it); `a` is killed; a task on
// a third node `c` still reads it, from b's copy. Without b's read the same object is lost.
#include <signal.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/multinode_cluster.h"

std::vector<uint8_t> Bytes(int n, int seed);
int64_t SumBytes(std::vector<uint8_t> bytes);

namespace airt {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string>& kHeadFlags = e2e::kNodeKillHeadFlags;
const std::vector<std::string>& kNodeFlags = e2e::kNodeKillNodeFlags;
constexpr int kSize = 1 << 20;  // not inline: the return lives in its node's store

int64_t ExpectedSum() {
  int64_t sum = 0;
  for (int i = 0; i < kSize; ++i) sum += static_cast<uint8_t>(i * 7 + 3);
  return sum;
}

class ObjectCopies : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<e2e::MultiNodeCluster>(kNodeFlags, kHeadFlags);
    ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("first", {}));
    for (std::string name : {"a", "b", "c"}) {
      ASSERT_NO_FATAL_FAILURE(
          cluster_->AddNode(name, {"--resources={\"" + name + "\": 1}"}));
    }
    cluster_->Init();
  }
  void TearDown() override { cluster_.reset(); }

  // Bytes(kSize, 3) made on node `a`, never rebuilt (its task may not run again).
  ObjectRef<std::vector<uint8_t>> MadeOnA() {
    return Task(Bytes).SetResource("a", 1).SetMaxRetries(0).Remote(kSize, 3);
  }
  // SumBytes of `ref` on node `name` (which pulls `ref` there).
  ObjectRef<int64_t> SumOn(const std::string& name, const ObjectRef<std::vector<uint8_t>>& ref) {
    return Task(SumBytes).SetResource(name, 1).Remote(ref);
  }
  void KillA() {
    cluster_->node("a").Kill(SIGKILL);
    ASSERT_EQ(cluster_->node("a").Wait(60s), 128 + SIGKILL);
  }

  std::unique_ptr<e2e::MultiNodeCluster> cluster_;
};

TEST_F(ObjectCopies, AnObjectPulledByAnotherNodeIsReadAfterItsPrimarysNodeDies) {
  ObjectRef<std::vector<uint8_t>> made = MadeOnA();
  ASSERT_EQ(*Get(SumOn("b", made), 120'000), ExpectedSum());
  ASSERT_NO_FATAL_FAILURE(KillA());
  // The worker on `c` cannot pull from `a`; the owner learns from the head that `a` died, makes
  // b's copy the primary, and runs the task again against it.
  EXPECT_EQ(*Get(SumOn("c", made), 120'000), ExpectedSum());
  // The owner reads it too (from b).
  EXPECT_EQ(Get(made, 120'000)->size(), static_cast<size_t>(kSize));
}

TEST_F(ObjectCopies, WithoutACopyElsewhereTheObjectIsLostWithItsNode) {
  ObjectRef<std::vector<uint8_t>> made = MadeOnA();
  // Made, read by nobody: its only copy is on `a`.
  ASSERT_EQ(*Get(SumOn("a", made), 120'000), ExpectedSum());
  ASSERT_NO_FATAL_FAILURE(KillA());
  EXPECT_THROW(Get(SumOn("c", made), 120'000), ObjectLostError);
  EXPECT_THROW(Get(made, 120'000), ObjectLostError);
}

}  // namespace
}  // namespace airt
