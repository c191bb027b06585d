#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/scheduling/scheduling_test_util.h"
#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling {
namespace {

using testing::Node;
using testing::Set;
using testing::Shape;

TEST(NodeResources, CreateNumbersGpuIdsFromZero) {
  NodeResources node = Node("CPU: 8, GPU: 4, memory: 1000");
  EXPECT_EQ(node.Total().ToString(), "{CPU: 8, GPU: 4, memory: 1000}");
  EXPECT_EQ(node.Available(), node.Total());
  Result<Allocation> all = node.Acquire(Shape("GPU: 4"));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->CudaVisibleDevices(), "0,1,2,3");
}

TEST(NodeResources, CreateRejectsBadGpuIdsAndTotals) {
  auto why = [](const std::string& totals, std::vector<GpuId> ids, Labels labels = {}) {
    Result<NodeResources> node =
        NodeResources::Create(Set(totals), std::move(ids), std::move(labels));
    EXPECT_FALSE(node.ok()) << totals;
    EXPECT_EQ(node.status().code(), Code::kInvalidArgument);
    return node.status().message();
  };
  EXPECT_EQ(why("GPU: 2", {0, 1, 2}),
            "invalid node resources {GPU: 2}: GPU is 2 but 3 GPU ids are given");
  EXPECT_NE(why("CPU: 1", {0, 0}).find("GPU id 0 is twice"), std::string::npos);
  EXPECT_NE(why("GPU: 0.5", {}).find("a node has whole GPUs"), std::string::npos);
  EXPECT_NE(why("GPU: 5000", {}).find("more than 1024 GPUs"), std::string::npos);
  EXPECT_NE(why("CPU: 1", {}, {{"", "x"}}).find("label name is empty"), std::string::npos);
}

TEST(NodeResources, AcquireTakesAndReleaseReturnsExactly) {
  NodeResources node = Node("CPU: 4, GPU: 2, memory: 1073741824");
  Result<Allocation> a = node.Acquire(Shape("CPU: 1.5, GPU: 0.5, memory: 536870912"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->resources, Set("CPU: 1.5, GPU: 0.5, memory: 536870912"));
  EXPECT_EQ(a->gpu_ids, (std::vector<GpuId>{0}));
  EXPECT_EQ(node.Available().ToString(), "{CPU: 2.5, GPU: 1.5, memory: 536870912}");
  ASSERT_TRUE(node.Release(*a).ok());
  EXPECT_EQ(node.Available(), node.Total());
}

TEST(NodeResources, ABlockedWorkersCpusAreLentAndTakenBackWithoutGoingNegative) {
  NodeResources node = Node("CPU: 2, GPU: 1");
  Result<Allocation> outer = node.Acquire(Shape("CPU: 2, GPU: 1"));
  ASSERT_TRUE(outer.ok());
  EXPECT_FALSE(node.FitsNow(Shape("CPU: 1")));
  // Blocked in Get: its CPUs (not its GPU) serve other work.
  ASSERT_TRUE(node.LendCpus(outer->id, true).ok());
  ASSERT_TRUE(node.LendCpus(outer->id, true).ok());  // twice: once
  EXPECT_EQ(node.Available().ToString(), "{CPU: 2}");
  Result<Allocation> inner = node.Acquire(Shape("CPU: 1.5"));
  ASSERT_TRUE(inner.ok());
  // Back from Get while the inner task runs: 0.5 CPU comes back now, 1.5 is owed.
  ASSERT_TRUE(node.LendCpus(outer->id, false).ok());
  EXPECT_EQ(node.Available().ToString(), "{}");
  ASSERT_TRUE(node.Release(*inner).ok());  // repays the debt first
  EXPECT_EQ(node.Available().ToString(), "{}");
  ASSERT_TRUE(node.Release(*outer).ok());
  EXPECT_EQ(node.Available(), node.Total());
  EXPECT_EQ(node.LendCpus(outer->id, true).code(), Code::kNotFound);
}

TEST(NodeResources, ReleasingALentAllocationLeavesItsCpusInThePoolOnce) {
  NodeResources node = Node("CPU: 4");
  Result<Allocation> a = node.Acquire(Shape("CPU: 3"));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(node.LendCpus(a->id, true).ok());
  ASSERT_TRUE(node.Release(*a).ok());
  EXPECT_EQ(node.Available(), node.Total());
}

TEST(NodeResources, AcquireIsResourceExhaustedWhenBusyAndFailedPreconditionWhenNever) {
  NodeResources node = Node("CPU: 2, GPU: 1");
  Result<Allocation> gpu = node.Acquire(Shape("GPU: 1"));
  ASSERT_TRUE(gpu.ok());
  Result<Allocation> busy = node.Acquire(Shape("CPU: 1, GPU: 1"));
  EXPECT_EQ(busy.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(busy.status().message(),
            "cannot acquire {CPU: 1, GPU: 1} now: available {CPU: 2} of {CPU: 2, GPU: 1}");
  Result<Allocation> never = node.Acquire(Shape("GPU: 2"));
  EXPECT_EQ(never.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(never.status().message(),
            "{GPU: 2} can never run on this node: its totals are {CPU: 2, GPU: 1}");
  EXPECT_EQ(node.Available(), Set("CPU: 2"));  // failed acquires took nothing
}

TEST(NodeResources, AcquireChecksTheAcceleratorTypeLabel) {
  NodeResources a10 = Node("GPU: 1", {{"ray.io/accelerator-type", "A10"}});
  EXPECT_TRUE(a10.FitsNow(Shape("GPU: 1, accelerator_type: A10")));
  EXPECT_TRUE(a10.FitsNow(Shape("GPU: 1")));
  EXPECT_FALSE(a10.FitsNow(Shape("GPU: 1, accelerator_type: H100")));
  EXPECT_FALSE(a10.CouldEverFit(Shape("GPU: 1, accelerator_type: H100")));
  Result<Allocation> h100 = a10.Acquire(Shape("GPU: 1, accelerator_type: H100"));
  EXPECT_EQ(h100.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(h100.status().message(),
            "{GPU: 1, accelerator_type: H100} can never run on this node: its accelerator_type "
            "is A10");
  NodeResources unlabelled = Node("GPU: 1");
  EXPECT_FALSE(unlabelled.FitsNow(Shape("GPU: 1, accelerator_type: A10")));
}

TEST(NodeResources, ReleaseTwiceIsNotFound) {
  NodeResources node = Node("CPU: 1, GPU: 1");
  Result<Allocation> a = node.Acquire(Shape("GPU: 0.5"));
  Result<Allocation> b = node.Acquire(Shape("GPU: 0.5"));
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(node.Release(*a).ok());
  Status twice = node.Release(*a);
  EXPECT_EQ(twice.code(), Code::kNotFound);
  EXPECT_EQ(twice.message(),
            "allocation 1 of {GPU: 0.5} is not held on this node (released twice?)");
  EXPECT_EQ(node.Available(), Set("CPU: 1, GPU: 0.5"));  // b's share is still held
}

TEST(NodeResources, ReleaseOfAnAlteredAllocationIsInvalidArgument) {
  NodeResources node = Node("GPU: 2");
  Result<Allocation> a = node.Acquire(Shape("GPU: 1"));
  ASSERT_TRUE(a.ok());
  Allocation altered = *a;
  altered.gpu_ids = {1};
  EXPECT_EQ(node.Release(altered).code(), Code::kInvalidArgument);
  EXPECT_EQ(node.Available(), Set("GPU: 1"));
  EXPECT_TRUE(node.Release(*a).ok());
}

TEST(NodeResources, FitsNowSeesGpuFragmentationThatTotalsHide) {
  NodeResources node = Node("GPU: 2");
  ASSERT_TRUE(node.Acquire(Shape("GPU: 0.6")).ok());
  ASSERT_TRUE(node.Acquire(Shape("GPU: 0.6")).ok());
  EXPECT_EQ(node.Available(), Set("GPU: 0.8"));
  EXPECT_FALSE(node.FitsNow(Shape("GPU: 0.8")));  // 0.4 free on each id
  EXPECT_FALSE(node.FitsNow(Shape("GPU: 0.5")));
  EXPECT_TRUE(node.FitsNow(Shape("GPU: 0.4")));
  EXPECT_TRUE(node.CouldEverFit(Shape("GPU: 2")));
  EXPECT_EQ(node.Acquire(Shape("GPU: 0.5")).status().code(), Code::kResourceExhausted);
}

TEST(NodeResources, QuarantineShrinksTotalsAndShowsInSnapshot) {
  NodeResources node = Node("CPU: 4, GPU: 4", {{"ray.io/accelerator-type", "A10"}});
  Result<Allocation> held = node.Acquire(Shape("GPU: 0.25"));
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->gpu_ids, (std::vector<GpuId>{0}));
  ASSERT_TRUE(node.QuarantineGpu(0).ok());
  ASSERT_TRUE(node.QuarantineGpu(3).ok());
  EXPECT_EQ(node.QuarantineGpu(4).code(), Code::kNotFound);

  NodeResourcesSnapshot snapshot = node.Snapshot();
  EXPECT_EQ(snapshot.total, Set("CPU: 4, GPU: 2"));
  EXPECT_EQ(snapshot.available, Set("CPU: 4, GPU: 2"));
  EXPECT_EQ(snapshot.quarantined_gpus, (std::vector<GpuId>{0, 3}));
  EXPECT_EQ(snapshot.gpus_in_use, (std::vector<GpuIdUsage>{{0, Amount::Units(2500)}}));
  EXPECT_EQ(snapshot.labels.at("ray.io/accelerator-type"), "A10");
  EXPECT_EQ(snapshot.num_allocations, 1u);
  EXPECT_FALSE(node.CouldEverFit(Shape("GPU: 3")));
  EXPECT_EQ(node.Acquire(Shape("GPU: 3")).status().code(), Code::kFailedPrecondition);

  Result<Allocation> two = node.Acquire(Shape("GPU: 2"));
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->CudaVisibleDevices(), "1,2");
  ASSERT_TRUE(node.Release(*held).ok());
  ASSERT_TRUE(node.RestoreGpu(0).ok());
  EXPECT_EQ(node.Snapshot().quarantined_gpus, (std::vector<GpuId>{3}));
  EXPECT_EQ(node.Available(), Set("CPU: 4, GPU: 1"));
}

TEST(NodeResources, CopyKeepsItsOwnAccounting) {
  NodeResources node = Node("CPU: 2, GPU: 1");
  NodeResources copy = node;
  ASSERT_TRUE(copy.Acquire(Shape("CPU: 2, GPU: 1")).ok());
  EXPECT_EQ(node.Available(), Set("CPU: 2, GPU: 1"));
  EXPECT_EQ(copy.Available(), Set("{}"));
  node = copy;
  EXPECT_EQ(node.Snapshot().num_allocations, 1u);
}

TEST(NodeResources, RandomWorkloadNeverGoesNegativeAndReleasesBackToTotals) {
  const std::vector<std::string> shapes = {
      "CPU: 1",   "CPU: 0.5, GPU: 0.5",  "GPU: 1, memory: 1000", "GPU: 2, CPU: 4", "GPU: 0.25",
      "CPU: 0.1", "custom: 1, GPU: 0.3", "memory: 4000",         "CPU: 3, GPU: 3", "GPU: 0.7"};
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    NodeResources node = Node("CPU: 16, GPU: 4, memory: 10000, custom: 2");
    const ResourceSet totals = node.Total();
    std::vector<Allocation> held;
    for (int step = 0; step < 1000; ++step) {
      if (held.empty() || rng() % 5 < 3) {
        ResourceShape shape = Shape(shapes[rng() % shapes.size()]);
        bool fits = node.FitsNow(shape);
        ResourceSet before = node.Available();
        Result<Allocation> a = node.Acquire(shape);
        ASSERT_EQ(a.ok(), fits) << shape.ToString() << " " << a.status().ToString();
        if (a.ok()) {
          held.push_back(*a);
          ResourceSet expected = before;
          ASSERT_TRUE(expected.Subtract(shape.amounts()).ok());
          EXPECT_EQ(node.Available(), expected);
        } else {
          EXPECT_EQ(a.status().code(), Code::kResourceExhausted);
          EXPECT_EQ(node.Available(), before);
        }
      } else {
        size_t i = rng() % held.size();
        ASSERT_TRUE(node.Release(held[i]).ok());
        held.erase(held.begin() + i);
      }
      // Available never exceeds the totals and, with what is held, adds up to them.
      ResourceSet sum = node.Available();
      EXPECT_TRUE(sum.FitsIn(totals)) << sum.ToString();
      for (const auto& [name, amount] : sum.amounts()) ASSERT_GT(amount, Amount()) << name;
      for (const Allocation& a : held) sum.Add(a.resources);
      ASSERT_EQ(sum, totals) << "seed " << seed << " step " << step;
    }
    for (const Allocation& a : held) ASSERT_TRUE(node.Release(a).ok());
    EXPECT_EQ(node.Available(), totals);
    EXPECT_TRUE(node.Snapshot().gpus_in_use.empty());
    EXPECT_EQ(node.Snapshot().num_allocations, 0u);
  }
}

}  // namespace
}  // namespace airt::worker::scheduling
