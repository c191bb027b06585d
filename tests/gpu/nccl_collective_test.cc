// The communicator's nccl backend through the GPU plugin, on one rank: init, every collective on
// device memory, destroy. Without a CUDA device (or without the plugin) it reports
// "skipped: no CUDA device". Labelled gpu.
#include <gtest/gtest.h>

#include <vector>

#include "collective/communicator.h"
#include "collective/services.h"
#include "gpu/gpu_plugin.h"

namespace airt::collective {
namespace {

// Device memory through the plugin (the test has no CUDA runtime of its own).
class DeviceBuffer {
 public:
  DeviceBuffer(const GpuPlugin& plugin, size_t bytes) : plugin_(plugin), bytes_(bytes) {
    char error[256] = {};
    rc_ = plugin_.nccl().memory(0, 0, &ptr_, nullptr, bytes, error, sizeof(error));
  }
  ~DeviceBuffer() {
    if (rc_ == 0) plugin_.nccl().memory(0, 1, &ptr_, nullptr, 0, nullptr, 0);
  }
  void Write(const std::vector<float>& host) {
    plugin_.nccl().memory(0, 2, &ptr_, const_cast<float*>(host.data()), bytes_, nullptr, 0);
  }
  std::vector<float> Read() {
    std::vector<float> host(bytes_ / sizeof(float));
    plugin_.nccl().memory(0, 3, &ptr_, host.data(), bytes_, nullptr, 0);
    return host;
  }
  Buffer View(size_t count) { return Buffer{ptr_, count, DataType::kFloat32}; }
  bool ok() const { return rc_ == 0; }

 private:
  const GpuPlugin& plugin_;
  size_t bytes_;
  void* ptr_ = nullptr;
  int rc_ = -1;
};

TEST(NcclCollective, OneRankRunsEveryOperationOnDeviceMemory) {
  std::string path = GpuPluginPath();
  if (path.empty()) GTEST_SKIP() << "skipped: no CUDA device (the GPU plugin is not built)";
  Result<GpuPlugin> plugin = GpuPlugin::Load(path);
  if (!plugin.ok() || plugin->DeviceCount() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  ASSERT_NE(plugin->nccl().run, nullptr) << "the plugin lacks NCCL";

  MemoryKv kv;
  MemoryProgress board;
  auto view = board.ForRank("r0");
  GroupOptions o;
  o.world_size = 1;
  o.rank = 0;
  o.backend = "nccl";
  o.group_name = "nccl1";
  o.timeout_ms = 30000;
  CommunicatorServices s{&kv, view.get(), RankInfo{0, "node", 1, "r0"}};
  auto c = Communicator::Create(o, s);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(kv.size(), 0u) << "the unique id is deleted once the group formed";

  constexpr size_t n = 1024;
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = static_cast<float>(i);
  DeviceBuffer a(*plugin, n * sizeof(float)), b(*plugin, n * sizeof(float));
  ASSERT_TRUE(a.ok() && b.ok());
  for (ReduceOp op : {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX,
                      ReduceOp::AVERAGE}) {
    a.Write(host);
    ASSERT_TRUE((*c)->Allreduce(a.View(n), op).ok());
    EXPECT_EQ(a.Read(), host) << "one rank: the input is the result";
  }
  a.Write(host);
  ASSERT_TRUE((*c)->Broadcast(a.View(n), 0).ok());
  EXPECT_EQ(a.Read(), host);
  ASSERT_TRUE((*c)->Allgather(a.View(n), b.View(n)).ok());
  EXPECT_EQ(b.Read(), host);
  b.Write(std::vector<float>(n, 0.0f));
  ASSERT_TRUE((*c)->Reducescatter(a.View(n), b.View(n), ReduceOp::SUM).ok());
  EXPECT_EQ(b.Read(), host);
  ASSERT_TRUE((*c)->Reduce(a.View(n), 0, ReduceOp::MAX).ok());
  EXPECT_EQ(a.Read(), host);
  ASSERT_TRUE((*c)->Barrier().ok());
  c->reset();  // destroy: ncclCommDestroy
}

}  // namespace
}  // namespace airt::collective
