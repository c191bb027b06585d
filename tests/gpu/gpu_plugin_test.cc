// Tests of airt::GpuPlugin, the dlopen loader of libairt_gpu_plugin.so. AIRT_GPU_PLUGIN_PATH is
// the built plugin, defined only when the build has CUDA (AIRT_WITH_CUDA).
#include "gpu/gpu_plugin.h"

#include <cstdio>
#include <string>
#include <vector>
#include <utility>

#include <gtest/gtest.h>

namespace airt {
namespace {

TEST(GpuPlugin, LoadReturnsUnavailableWhenFileMissing) {
  const std::string path = "/nonexistent/airt/libairt_gpu_plugin.so";
  Result<GpuPlugin> plugin = GpuPlugin::Load(path);
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().code(), Code::kUnavailable);
  EXPECT_NE(plugin.status().message().find(path), std::string::npos) << plugin.status().ToString();
}

TEST(GpuPlugin, LoadReturnsInternalWhenSymbolMissing) {
  // Any shared library without the plugin's entry points will do; libm is always there.
  Result<GpuPlugin> plugin = GpuPlugin::Load("libm.so.6");
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().code(), Code::kInternal);
  EXPECT_NE(plugin.status().message().find(AIRT_GPU_DEVICE_COUNT_SYMBOL), std::string::npos)
      << plugin.status().ToString();
}

#ifdef AIRT_GPU_PLUGIN_PATH

// The plugin must load where there is no driver (as on a CPU-only CI machine) and refuse a
// device it does not have: kInvalidArgument with a driver, kUnavailable without one.
TEST(GpuPlugin, ProbeFailsWhenDeviceOutOfRange) {
  Result<GpuPlugin> plugin = GpuPlugin::Load(AIRT_GPU_PLUGIN_PATH);
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  const int count = plugin->DeviceCount();
  EXPECT_GE(count, 0);
  Status status = plugin->Probe(count, 1 << 20);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(status.code() == Code::kInvalidArgument || status.code() == Code::kUnavailable)
      << status.ToString();
}

TEST(GpuPlugin, MoveLeavesSourceWithoutDevices) {
  Result<GpuPlugin> plugin = GpuPlugin::Load(AIRT_GPU_PLUGIN_PATH);
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  GpuPlugin moved = std::move(*plugin);
  EXPECT_EQ(moved.path(), AIRT_GPU_PLUGIN_PATH);
  EXPECT_EQ(plugin->DeviceCount(), 0);  // NOLINT(bugprone-use-after-move): the contract under test
  EXPECT_EQ(plugin->Probe(0, 1 << 20).code(), Code::kFailedPrecondition);
}

TEST(GpuPluginDevice, ProbePassesWhenDevicePresent) {
  Result<GpuPlugin> plugin = GpuPlugin::Load(AIRT_GPU_PLUGIN_PATH);
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  if (plugin->DeviceCount() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  Status status = plugin->Probe(0, uint64_t{64} << 20);
  EXPECT_TRUE(status.ok()) << status.ToString();
}

// Discovery, NVML's counters and the bandwidth figure on every device (scripts/gpu_check reads
// the "device N:" lines).
TEST(GpuPluginDevice, DescribesEveryDevice) {
  Result<GpuPlugin> plugin = GpuPlugin::Load(AIRT_GPU_PLUGIN_PATH);
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  if (plugin->DeviceCount() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  for (int d = 0; d < plugin->DeviceCount(); ++d) {
    Result<GpuDeviceInfo> info = plugin->DeviceInfo(d);
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_FALSE(info->name.empty());
    EXPECT_GT(info->total_memory, 0u);
    EXPECT_TRUE(info->uuid.starts_with("GPU-") || info->uuid.starts_with("MIG-")) << info->uuid;
    Result<airt_gpu_health_t> health = plugin->Health(d);
    ASSERT_TRUE(health.ok()) << health.status().ToString();
    Result<double> gbps = plugin->Bandwidth(d, uint64_t{256} << 20);
    ASSERT_TRUE(gbps.ok()) << gbps.status().ToString();
    EXPECT_GT(*gbps, 0);
    Result<std::vector<GpuProcessMemory>> processes = plugin->ProcessMemory(d);
    std::printf("device %d: %s %s %s %llu MiB%s, NVML %s, XIDs %llu, ECC %llu, throttle 0x%llx, "
                "copy bandwidth %.0f GB/s, %s\n",
                d, info->name.c_str(), info->uuid.c_str(), info->pci_bus_id.c_str(),
                static_cast<unsigned long long>(info->total_memory >> 20),
                info->is_mig ? " (MIG)" : "", health->nvml_ok ? "ok" : "absent",
                health->xid_count, health->ecc_uncorrectable, health->throttle_reasons, *gbps,
                processes.ok() ? (std::to_string(processes->size()) + " process(es)").c_str()
                               : processes.status().message().c_str());
  }
}

TEST(GpuPlugin, DescribeFailsWithoutTheDevice) {
  Result<GpuPlugin> plugin = GpuPlugin::Load(AIRT_GPU_PLUGIN_PATH);
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  Result<GpuDeviceInfo> info = plugin->DeviceInfo(plugin->DeviceCount());
  ASSERT_FALSE(info.ok());
  EXPECT_TRUE(info.status().code() == Code::kInvalidArgument ||
              info.status().code() == Code::kUnavailable)
      << info.status().ToString();
  Result<airt_gpu_health_t> health = plugin->Health(0);  // no NVML here: nothing to read
  if (plugin->DeviceCount() == 0) {
    ASSERT_TRUE(health.ok() || health.status().code() == Code::kUnavailable);
    if (health.ok()) EXPECT_EQ(health->nvml_ok, 0);
  }
}

#else  // built without CUDA

TEST(GpuPluginDevice, ProbePassesWhenDevicePresent) {
  GTEST_SKIP() << "skipped: no CUDA device (built with AIRT_WITH_CUDA=OFF)";
}

TEST(GpuPluginDevice, DescribesEveryDevice) {
  GTEST_SKIP() << "skipped: no CUDA device (built with AIRT_WITH_CUDA=OFF)";
}

#endif

}  // namespace
}  // namespace airt
