// Placement-group bundles that reserved GPUs lend their ids to the leases in them (LeaseFixture,
// the node's lease service over the real RPC stack): a lease in bundle i gets bundle i's ids as
// its CUDA_VISIBLE_DEVICES, fractional leases share one of them, and the ids come back when the
// lease is returned.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/bundle_resources.h"
#include "tests/worker/lease_fixture.h"

namespace airt {
namespace {

using testing::LeaseReply;
using Kind = LeaseReply::Kind;

class BundleGpus : public testing::LeaseFixture {
 protected:
  // Prepares and commits `bundles` of group_ here, through the Node service.
  void Reserve(const std::vector<std::map<std::string, double>>& bundles) {
    auto prepare = node().prepareBundlesRequest();
    std::string id = group_.Binary();
    prepare.setGroupId(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(id.data()), id.size()));
    auto list = prepare.initBundles(static_cast<uint>(bundles.size()));
    for (size_t i = 0; i < bundles.size(); ++i) {
      list[i].setIndex(static_cast<uint32_t>(i));
      auto resources = list[i].initResources(static_cast<uint>(bundles[i].size()));
      size_t j = 0;
      for (const auto& [name, amount] : bundles[i]) {
        resources[j].setName(name);
        resources[j++].setAmount(amount);
      }
    }
    prepare.send().wait(wait());
    auto commit = node().commitBundlesRequest();
    commit.setGroupId(capnp::Data::Reader(reinterpret_cast<const kj::byte*>(id.data()), id.size()));
    commit.send().wait(wait());
  }
  std::map<std::string, double> In(int index, std::map<std::string, double> shape) {
    return ResourcesInBundle(group_.Hex(), index, shape);
  }
  PlacementGroupId group_ = PlacementGroupId::FromRandom();
};

TEST_F(BundleGpus, ALeaseInABundleGetsThatBundlesGpuIds) {
  ASSERT_NO_FATAL_FAILURE(StartNode({.total = {{"CPU", 8}, {"GPU", 4}}}));
  LeaseReply outside = Lease({{"GPU", 1}});  // takes id 0 before the group
  ASSERT_EQ(outside.kind, Kind::kGranted) << outside.status.ToString();
  ASSERT_NO_FATAL_FAILURE(Reserve({{{"CPU", 1}, {"GPU", 1}}, {{"CPU", 1}, {"GPU", 2}}}));
  // Bundle 0 holds id 1, bundle 1 ids 2 and 3.
  LeaseReply first = Lease(In(0, {{"GPU", 1}}));
  ASSERT_EQ(first.kind, Kind::kGranted) << first.status.ToString() << first.text;
  EXPECT_EQ(first.gpu_ids, (std::vector<uint32_t>{1}));
  LeaseReply both = Lease(In(1, {{"GPU", 2}}));
  ASSERT_EQ(both.kind, Kind::kGranted) << both.status.ToString() << both.text;
  EXPECT_EQ(both.gpu_ids, (std::vector<uint32_t>{2, 3}));
  ASSERT_TRUE(Return(both.lease_id).ok());
  // Fractions share one id of the bundle; a whole one takes the other.
  LeaseReply half_a = Lease(In(1, {{"GPU", 0.5}}));
  LeaseReply half_b = Lease(In(1, {{"GPU", 0.5}}));
  ASSERT_EQ(half_a.kind, Kind::kGranted) << half_a.status.ToString();
  ASSERT_EQ(half_b.kind, Kind::kGranted) << half_b.status.ToString();
  EXPECT_EQ(half_a.gpu_ids, (std::vector<uint32_t>{2}));
  EXPECT_EQ(half_b.gpu_ids, (std::vector<uint32_t>{2}));
  LeaseReply any = Lease(In(-1, {{"GPU", 1}}));
  ASSERT_EQ(any.kind, Kind::kGranted) << any.status.ToString();
  EXPECT_EQ(any.gpu_ids, (std::vector<uint32_t>{3}));
}

}  // namespace
}  // namespace airt
