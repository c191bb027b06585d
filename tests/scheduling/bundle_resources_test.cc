// A placement group's bundle resources on a node: Ray's formatted names
// (common/bundle_resources.h), added to and removed from NodeResources, and usable only by shapes
// that ask for them.
#include "common/bundle_resources.h"

#include <gtest/gtest.h>

#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling {
namespace {

constexpr std::string_view kGroup = "0123456789abcdef0123456789abcdef0123";

ResourceSet Set(const std::map<std::string, double>& amounts) {
  Result<ResourceSet> set = ResourceSet::FromDoubles(amounts);
  EXPECT_TRUE(set.ok()) << set.status().ToString();
  return set.ok() ? *set : ResourceSet();
}

TEST(BundleResources, NamesFollowRaysFormat) {
  std::map<std::string, double> committed = CommittedBundleResources(kGroup, 1, {{"CPU", 2}});
  EXPECT_EQ(committed.at("CPU_group_1_" + std::string(kGroup)), 2);
  EXPECT_EQ(committed.at("CPU_group_" + std::string(kGroup)), 2);
  EXPECT_EQ(committed.at("bundle_group_1_" + std::string(kGroup)), kBundleUnits);
  std::map<std::string, double> any = ResourcesInBundle(kGroup, -1, {{"CPU", 1}});
  EXPECT_EQ(any.count("CPU_group_1_" + std::string(kGroup)), 0u);
  EXPECT_EQ(any.at("CPU_group_" + std::string(kGroup)), 1);
  EXPECT_TRUE(IsBundleResourceOf("CPU_group_1_" + std::string(kGroup), kGroup));
  EXPECT_FALSE(IsBundleResourceOf("CPU", kGroup));
}

TEST(BundleResources, OnlyShapesInTheBundleUseItsResourcesAndRemovalTakesThemBack) {
  Result<NodeResources> node = NodeResources::Create(Set({{"CPU", 4}}));
  ASSERT_TRUE(node.ok());
  // Prepare: the bundle's CPUs are taken from the node's.
  Result<Allocation> reserved = node->Acquire(*ResourceShape::Make(Set({{"CPU", 2}})));
  ASSERT_TRUE(reserved.ok());
  // Commit: its formatted names join the node.
  ResourceSet formatted = Set(CommittedBundleResources(kGroup, 0, {{"CPU", 2}}));
  ASSERT_TRUE(node->AddResources(formatted).ok());
  ResourceShape in_bundle = *ResourceShape::Make(Set(ResourcesInBundle(kGroup, 0, {{"CPU", 2}})));
  EXPECT_TRUE(node->FitsNow(in_bundle));
  EXPECT_FALSE(node->FitsNow(*ResourceShape::Make(Set({{"CPU", 3}})))) << "2 CPUs are the bundle's";
  Result<Allocation> task = node->Acquire(in_bundle);
  ASSERT_TRUE(task.ok());
  EXPECT_FALSE(node->FitsNow(in_bundle)) << "the bundle is in use";
  ASSERT_TRUE(node->Release(*task).ok());
  EXPECT_FALSE(node->AddResources(Set({{"CPU", 1}})).ok()) << "a bundle never adds plain CPUs";
  // Cancel: the names go, the CPUs come back.
  ASSERT_TRUE(node->RemoveResources(formatted).ok());
  ASSERT_TRUE(node->Release(*reserved).ok());
  EXPECT_FALSE(node->CouldEverFit(in_bundle));
  EXPECT_EQ(node->Available(), Set({{"CPU", 4}}));
  EXPECT_EQ(node->Total(), Set({{"CPU", 4}}));
}

}  // namespace
}  // namespace airt::worker::scheduling
