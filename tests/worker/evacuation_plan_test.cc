// Where a leaving node's primary copies go (PlanEvacuation) and which nodes may take them
// (EvacuationTargets): the pure parts of the ObjectEvacuator.
#include <capnp/message.h>
#include <gtest/gtest.h>

#include "worker/internal/object_evacuator.h"

namespace airt::worker {
namespace {

objectstore::PrimaryCopy Copy(uint32_t i, uint64_t size) {
  return {ObjectId::ForPut(TaskId::ForDriver(JobId::FromRandom()), i), size, "owner:1"};
}

TEST(PlanEvacuation, SendsEachObjectToTheTargetWithMostRoomLeft) {
  std::vector<objectstore::PrimaryCopy> objects = {Copy(1, 10), Copy(2, 60), Copy(3, 30)};
  std::vector<EvacuationTarget> targets = {{"a:1", "a:2", 100}, {"b:1", "b:2", 80}};
  std::vector<int> plan = PlanEvacuation(objects, targets);
  // Largest first: 60 -> a (100, leaving 40); 30 -> b (80, leaving 50); 10 -> b (50 > 40).
  EXPECT_EQ(plan, (std::vector<int>{1, 0, 1}));
}

TEST(PlanEvacuation, CountsWhatIsSentAlreadyAndLeavesWhatFitsNowhere) {
  std::vector<objectstore::PrimaryCopy> objects = {Copy(1, 50), Copy(2, 50), Copy(3, 50),
                                                   Copy(4, 500)};
  std::vector<EvacuationTarget> targets = {{"a:1", "a:2", 100}};
  std::vector<int> plan = PlanEvacuation(objects, targets);
  EXPECT_EQ(plan, (std::vector<int>{0, 0, -1, -1}));
}

TEST(PlanEvacuation, PlacesNothingWithoutTargets) {
  std::vector<objectstore::PrimaryCopy> objects = {Copy(1, 1)};
  EXPECT_EQ(PlanEvacuation(objects, {}), (std::vector<int>{-1}));
  EXPECT_TRUE(PlanEvacuation({}, {}).empty());
}

TEST(EvacuationTargets, ListsAliveNodesButTheLeavingOneAndThoseToAvoid) {
  capnp::MallocMessageBuilder message;
  auto nodes = message.initRoot<proto::Head::ClusterViewResults>().initNodes(4);
  auto set = [&](unsigned i, const char* host, uint16_t port, uint16_t transfer, bool alive,
                 uint64_t free) {
    auto info = nodes[i].initInfo();
    info.setAddress(host);
    info.setNodePort(port);
    info.setTransferPort(transfer);
    nodes[i].setAlive(alive);
    nodes[i].setStoreFreeBytes(free);
  };
  set(0, "10.0.0.1", 7000, 7001, true, 100);  // the leaving node
  set(1, "10.0.0.2", 7000, 7001, true, 200);
  set(2, "10.0.0.3", 7000, 7001, false, 300);  // dead
  set(3, "10.0.0.4", 7000, 0, true, 400);      // no transfer service
  std::vector<EvacuationTarget> targets = EvacuationTargets(nodes.asReader(), "10.0.0.1:7000");
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_EQ(targets[0].node_address, "10.0.0.2:7000");
  EXPECT_EQ(targets[0].transfer_address, "10.0.0.2:7001");
  EXPECT_EQ(targets[0].free_bytes, 200u);
  // Another node leaving too is avoided.
  EXPECT_TRUE(EvacuationTargets(nodes.asReader(), "10.0.0.1:7000", {"10.0.0.2:7000"}).empty());
}

}  // namespace
}  // namespace airt::worker
