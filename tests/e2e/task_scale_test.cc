// Tasks at scale (label `scale`): a 1 GiB argument built by the driver reaches its task intact.
#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/object_pattern.h"
#include "tests/e2e/task_cluster.h"

uint64_t ChecksumOf(std::string data);

namespace airt {
namespace {

// Over the inline limit, so Remote puts it into the node's store (2 GiB here: the default 1 GiB
// cannot hold 1 GiB and the value's msgpack header), and the worker reads it from there.
TEST(TaskScale, OneGibibyteArgumentReachesItsTaskIntact) {
  e2e::TaskCluster cluster({"--num-cpus=1", "--object-store-memory=2G"});
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  std::string big(size_t{1} << 30, '\0');
  std::span<uint8_t> bytes(reinterpret_cast<uint8_t*>(big.data()), big.size());
  e2e::FillPattern(bytes, 42);
  uint64_t expect = e2e::Checksum(bytes);
  ObjectRef<uint64_t> sum = Task(ChecksumOf).Remote(big);
  EXPECT_EQ(*Get(sum, 600000), expect) << cluster.NodeLog();
}

}  // namespace
}  // namespace airt
