// A node that leaves on purpose hands its primary copies on (docs/ownership.md "When a node
// leaves"): a head, airt-node processes on this machine, and this test as the driver on the first
// node. A task's return stored on `second` is moved by Node.evacuateObjects to another node, its
// owner (this driver) told; `second` then stops, and the value is still read, with no re-run of
// the task (each run leaves a marker file). When no node has room, nothing moves and nothing is
// lost.
#include <signal.h>

#include <filesystem>
#include <string>
#include <vector>

#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>

#include "airt/api.h"
#include "common/proto/cluster.capnp.h"
#include "common/proto/node.capnp.h"
#include "tests/e2e/multinode_cluster.h"

std::vector<uint8_t> MadeBytes(std::string dir, int n, int seed);
int64_t SumBytes(std::vector<uint8_t> bytes);

namespace airt {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string> kHeadFlags = {"--heartbeat-interval-ms=200",
                                             "--node-timeout-ms=20000"};
const std::vector<std::string> kNodeFlags = {"--num-cpus=2", "--object-store-memory=64M",
                                             "--cluster-view-interval-ms=100"};
const std::string kSpecial = "--resources={\"special\": 1}";
constexpr int kSize = 1 << 20;  // not inline: the return lives in its node's store

std::vector<uint8_t> Expected(int seed) {
  std::vector<uint8_t> out(kSize);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + seed);
  return out;
}

size_t Runs(const std::string& dir, const std::string& what) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    n += entry.path().filename().string().rfind(what + "-", 0) == 0 ? 1 : 0;
  }
  return n;
}

struct Evacuation {
  uint64_t moved = 0;
  uint64_t unreferenced = 0;
  std::vector<std::string> failed;  // the reasons
};

class EvacuationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<e2e::MultiNodeCluster>(kNodeFlags, kHeadFlags);
    markers_ = cluster_->Dir() + "/markers";
    std::filesystem::create_directories(markers_);
  }
  void TearDown() override { cluster_.reset(); }

  // The Node service address of the node holding {special: 1}, once every alive node has
  // reported its store in a heartbeat.
  std::string SpecialNode(size_t nodes) {
    capnp::EzRpcClient head(cluster_->address());
    auto& wait = head.getWaitScope();
    std::string found;
    bool ok = testing::WaitUntil(
        [&] {
          auto view = head.getMain<proto::Head>().clusterViewRequest().send().wait(wait);
          size_t reported = 0;
          for (auto n : view.getNodes()) {
            if (!n.getAlive()) continue;
            reported += n.getStoreFreeBytes() > 0 ? 1 : 0;
            for (auto r : n.getInfo().getTotal()) {
              if (std::string(r.getName().cStr()) == "special") {
                found = std::string(n.getInfo().getAddress().cStr()) + ":" +
                        std::to_string(n.getInfo().getNodePort());
              }
            }
          }
          return reported == nodes && !found.empty();
        },
        60s);
    EXPECT_TRUE(ok) << "the nodes did not report their stores";
    return found;
  }
  Evacuation Evacuate(const std::string& node) {
    capnp::EzRpcClient client(node);
    auto request = client.getMain<proto::Node>().evacuateObjectsRequest();
    request.setDeadlineMs(60'000);
    auto reply = request.send().wait(client.getWaitScope());
    Evacuation out;
    out.moved = reply.getMoved();
    out.unreferenced = reply.getUnreferenced();
    for (auto f : reply.getFailed()) out.failed.push_back(f.getReason().cStr());
    return out;
  }
  // Waits until `ref`'s task has finished, without a copy of it reaching this node.
  void WaitReady(const ObjectRef<std::vector<uint8_t>>& ref) {
    EXPECT_GT(*Get(Task(SumBytes).SetResource("special", 1).Remote(ref), 60'000), 0);
  }

  // An object made by a task on the {special} node, once it is there.
  ObjectRef<std::vector<uint8_t>> MadeOnSpecialNode(int seed) {
    ObjectRef<std::vector<uint8_t>> made =
        Task(MadeBytes).SetResource("special", 1).Remote(markers_, kSize, seed);
    WaitReady(made);
    return made;
  }

  std::unique_ptr<e2e::MultiNodeCluster> cluster_;
  std::string markers_;
};

TEST_F(EvacuationTest, AReturnOfALeavingNodeIsMovedAndReadAfterItStopsWithoutAReRun) {
  ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("first", {}));
  ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("second", {kSpecial}));
  ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("third", {}));
  cluster_->Init();
  ObjectRef<std::vector<uint8_t>> made;
  ASSERT_NO_FATAL_FAILURE(made = MadeOnSpecialNode(5));
  std::string second = SpecialNode(3);
  ASSERT_FALSE(second.empty());

  Evacuation evacuated = Evacuate(second);
  EXPECT_EQ(evacuated.moved, 1u);
  EXPECT_TRUE(evacuated.failed.empty()) << evacuated.failed[0];
  // A second call finds nothing left to move.
  Evacuation again = Evacuate(second);
  EXPECT_EQ(again.moved, 0u);
  EXPECT_TRUE(again.failed.empty());

  cluster_->node("second").Kill(SIGTERM);
  ASSERT_EQ(cluster_->node("second").Wait(60s), 0);
  EXPECT_EQ(*Get(made, 120'000), Expected(5));
  EXPECT_EQ(Runs(markers_, "made5"), 1u);  // read from its new node, not rebuilt
}

TEST_F(EvacuationTest, NothingMovesWhenNoOtherNodeHasRoomAndTheObjectStaysReadable) {
  // The driver's node is the only other one, and its store is smaller than the object.
  ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("first", {"--object-store-memory=512K"}));
  ASSERT_NO_FATAL_FAILURE(cluster_->AddNode("second", {kSpecial}));
  cluster_->Init();
  ObjectRef<std::vector<uint8_t>> made;
  ASSERT_NO_FATAL_FAILURE(made = MadeOnSpecialNode(6));
  std::string second = SpecialNode(2);
  ASSERT_FALSE(second.empty());

  Evacuation evacuated = Evacuate(second);
  EXPECT_EQ(evacuated.moved, 0u);
  ASSERT_EQ(evacuated.failed.size(), 1u);
  EXPECT_NE(evacuated.failed[0].find("no other alive node has room"), std::string::npos)
      << evacuated.failed[0];
  // Still on `second`, still its primary copy: read from there.
  EXPECT_EQ(*Get(Task(SumBytes).SetResource("special", 1).Remote(made), 60'000),
            SumBytes(Expected(6)));
  EXPECT_EQ(Runs(markers_, "made6"), 1u);
}

}  // namespace
}  // namespace airt
