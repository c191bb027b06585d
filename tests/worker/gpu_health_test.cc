// The GPU health checks' fault-injecting source and its spec, and the accelerator type of a GPU's
// name. The quarantine, cordon and memory-watch paths they drive are tested across processes in
// tests/python/test_gpu.py.
#include "worker/internal/gpu_health.h"

#include <gtest/gtest.h>

#include "gpu/accelerator_type.h"

namespace airt::worker {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

FaultSpecGpuHealth Source(const std::string& spec, std::vector<uint32_t> ids = {0, 1}) {
  Result<std::vector<GpuFault>> faults = ParseGpuFaultSpec(spec, ids);
  EXPECT_TRUE(faults.ok()) << faults.status().ToString();
  return FaultSpecGpuHealth(faults.ok() ? *faults : std::vector<GpuFault>{}, ids, 0.5);
}

TEST(GpuFaultSpec, ParsesEveryFaultAndOption) {
  auto faults = ParseGpuFaultSpec(
      "gpu=0:xid=79:when=busy;gpu=1:memory=9G;driver:down:after=3;gpu=1:ecc=2:times=1;"
      "gpu=0:throttle=hw-thermal;gpu=0:bandwidth=100:when=idle",
      {0, 1});
  ASSERT_TRUE(faults.ok()) << faults.status().ToString();
  ASSERT_EQ(faults->size(), 6u);
  EXPECT_EQ((*faults)[0].kind, GpuFault::Kind::kXid);
  EXPECT_EQ((*faults)[0].value, 79u);
  EXPECT_EQ((*faults)[0].only, GpuCheckDepth::kLight);
  EXPECT_EQ((*faults)[1].kind, GpuFault::Kind::kMemory);
  EXPECT_EQ((*faults)[1].value, 9 * kGiB);
  EXPECT_EQ((*faults)[2].kind, GpuFault::Kind::kDriverDown);
  EXPECT_EQ((*faults)[2].after, 3u);
  EXPECT_EQ((*faults)[3].times, 1u);
  EXPECT_EQ((*faults)[4].text, "hw-thermal");
  EXPECT_EQ((*faults)[5].only, GpuCheckDepth::kFull);
}

TEST(GpuFaultSpec, RejectsBadEntriesNamingThem) {
  auto error = [](const std::string& spec) {
    auto faults = ParseGpuFaultSpec(spec, {0});
    EXPECT_FALSE(faults.ok());
    return faults.ok() ? std::string("parsed") : faults.status().message();
  };
  EXPECT_NE(error("gpu=3:xid=79").find("this node has no GPU 3"), std::string::npos);
  EXPECT_NE(error("gpu=0:melt").find("unknown fault 'melt'"), std::string::npos);
  EXPECT_NE(error("gpu=0:xid").find("'xid' needs =VALUE"), std::string::npos);
  EXPECT_NE(error("gpu=0:xid=79:soon").find("unknown option 'soon'"), std::string::npos);
  EXPECT_NE(error("gpu=0:throttle=hot").find("hw-slowdown"), std::string::npos);
  EXPECT_NE(error("node:down").find("'node:down'"), std::string::npos);
  EXPECT_NE(error("gpu=0:xid=79:after=0").find("after= counts from 1"), std::string::npos);
}

TEST(FaultSpecGpuHealth, BusyOnlyFaultFailsLightChecksOnly) {
  FaultSpecGpuHealth source = Source("gpu=0:xid=79:when=busy");
  auto idle = source.Check(0, GpuCheckDepth::kFull);
  ASSERT_TRUE(idle.ok());
  EXPECT_TRUE(idle->healthy);
  auto busy = source.Check(0, GpuCheckDepth::kLight);
  ASSERT_TRUE(busy.ok());
  EXPECT_FALSE(busy->healthy);
  EXPECT_NE(busy->reason.find("XID 79"), std::string::npos) << busy->reason;
  auto other = source.Check(1, GpuCheckDepth::kLight);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->healthy) << "GPU 1 has no fault";
}

TEST(FaultSpecGpuHealth, AfterAndTimesBoundTheFault) {
  FaultSpecGpuHealth source = Source("gpu=1:ecc=2:after=2:times=1");
  EXPECT_TRUE(source.Check(1, GpuCheckDepth::kLight)->healthy);
  auto second = source.Check(1, GpuCheckDepth::kLight);
  EXPECT_FALSE(second->healthy);
  EXPECT_NE(second->reason.find("2 uncorrectable ECC"), std::string::npos) << second->reason;
  EXPECT_TRUE(source.Check(1, GpuCheckDepth::kLight)->healthy) << "times=1: once only";
}

TEST(FaultSpecGpuHealth, ProbeAndBandwidthFaultsFailFullChecksOnly) {
  FaultSpecGpuHealth source = Source("gpu=0:probe;gpu=1:bandwidth=100");
  EXPECT_TRUE(source.Check(0, GpuCheckDepth::kLight)->healthy);
  EXPECT_NE(source.Check(0, GpuCheckDepth::kFull)->reason.find("probe kernel"), std::string::npos);
  auto slow = source.Check(1, GpuCheckDepth::kFull);
  EXPECT_FALSE(slow->healthy);
  EXPECT_NE(slow->reason.find("memory bandwidth 100 GB/s"), std::string::npos) << slow->reason;
}

TEST(FaultSpecGpuHealth, DriverDownIsUnavailable) {
  FaultSpecGpuHealth source = Source("driver:down:after=2");
  EXPECT_TRUE(source.Check(0, GpuCheckDepth::kFull).ok());
  auto down = source.Check(0, GpuCheckDepth::kFull);
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), Code::kUnavailable);
}

TEST(FaultSpecGpuHealth, MemoryFaultReportsEveryAskedProcess) {
  FaultSpecGpuHealth source = Source("gpu=1:memory=3G");
  auto used = source.ProcessMemory(1, {41, 42});
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(*used, (std::map<int32_t, uint64_t>{{41, 3 * kGiB}, {42, 3 * kGiB}}));
  EXPECT_TRUE(source.ProcessMemory(0, {41})->empty());
}

TEST(AcceleratorType, FromMarketingNames) {
  EXPECT_EQ(AcceleratorTypeFromName("NVIDIA H100 80GB HBM3"), "H100");
  EXPECT_EQ(AcceleratorTypeFromName("NVIDIA H200"), "H200");
  EXPECT_EQ(AcceleratorTypeFromName("NVIDIA A100-SXM4-80GB"), "A100");
  EXPECT_EQ(AcceleratorTypeFromName("NVIDIA A10G"), "A10G");
  EXPECT_EQ(AcceleratorTypeFromName("NVIDIA A10"), "A10");
  EXPECT_EQ(AcceleratorTypeFromName("NVIDIA L4"), "L4");
  EXPECT_EQ(AcceleratorTypeFromName("NVIDIA B200"), "B200");
  EXPECT_EQ(AcceleratorTypeFromName("Tesla T4"), "T4");
  EXPECT_EQ(AcceleratorTypeFromName("NVIDIA H100 MIG 1g.10gb"), "H100");
  EXPECT_EQ(AcceleratorTypeFromName("NVIDIA GeForce RTX 4090"), "NVIDIA-GeForce-RTX-4090");
  EXPECT_GT(ExpectedBandwidthGbps("H100", 80 * kGiB), 0);
  EXPECT_EQ(ExpectedBandwidthGbps("NVIDIA-GeForce-RTX-4090", 24 * kGiB), 0);
}

}  // namespace
}  // namespace airt::worker
