// Node-to-node transfer at scale: one 1 GiB object pulled from one airt-store --transfer daemon
// into another by an airt_transfer_tool process, then checked byte for byte by a reader on the
// receiving node. Labelled "scale".
#include <chrono>
#include <iostream>

#include "tests/e2e/transfer_fixture.h"

namespace airt::e2e {
namespace {

using objectstore::StoreStats;

class TransferScale : public TransferFixture {};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

TEST_F(TransferScale, PullsAOneGibObjectIntactWhenAnotherNodeHoldsIt) {
  constexpr uint64_t kSize = uint64_t{1} << 30;
  const std::string size = std::to_string(kSize);
  Node* a = StartNode("a", {"--capacity", "1040M"});
  ASSERT_NE(a, nullptr);
  Node* b = StartNode("b", {"--capacity", "1040M"});
  ASSERT_NE(b, nullptr);
  const ObjectId x = Id(1);

  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(Put(a, x, kSize, 17), 0);
  std::cerr << "put 1 GiB on A in " << Seconds(start) << " s\n";

  start = std::chrono::steady_clock::now();
  Tool* puller = StartPull(b, a->transfer, x, 60000);
  ASSERT_EQ(WaitTool(puller, 90s), 0);
  EXPECT_TRUE(WaitForOutput(puller, "pulled " + size));
  std::cerr << "pulled 1 GiB from A into B in " << Seconds(start) << " s (with process start)\n";

  // Every byte, in a process on B (not the one that wrote them).
  start = std::chrono::steady_clock::now();
  EXPECT_EQ(RunStoreTool(b, "read-verify", {x.Hex(), size, "17"}, 60s), 0);
  std::cerr << "verified 1 GiB on B in " << Seconds(start) << " s\n";
  StoreStats on_b = Stats(b);
  EXPECT_EQ(on_b.num_sealed, 1u);
  EXPECT_EQ(on_b.num_creating, 0u);
  EXPECT_EQ(on_b.used_bytes, kSize);
  EXPECT_TRUE(WaitForStats(a, [](const StoreStats& s) { return s.num_pinned == 0; }))
      << "A's transfer service kept its pin after sending";
  StopNode(a);
  StopNode(b);
}

}  // namespace
}  // namespace airt::e2e
