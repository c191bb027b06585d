// Tests of airt::GpuPlugin, the dlopen loader of libairt_gpu_plugin.so. AIRT_GPU_PLUGIN_PATH is
// the built plugin, defined only when the build has CUDA (AIRT_WITH_CUDA).
#include "gpu/gpu_plugin.h"

#include <string>
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

#else  // built without CUDA

TEST(GpuPluginDevice, ProbePassesWhenDevicePresent) {
  GTEST_SKIP() << "skipped: no CUDA device (built with AIRT_WITH_CUDA=OFF)";
}

#endif

}  // namespace
}  // namespace airt
