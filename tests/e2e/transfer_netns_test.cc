// Transfer between nodes on separate hosts: two network namespaces joined by a veth pair, one node
// in each, its transfer service bound to its namespace's address, and its pullers and readers
// running in its namespace too. (Unix sockets live in the filesystem, so this test process still
// reaches both stores for Stats.) Skipped where `ip netns add` is not permitted.
#include <string>

#include "tests/e2e/transfer_fixture.h"

namespace airt::e2e {
namespace {

using objectstore::StoreStats;

class TransferNetworkNamespaces : public TransferFixture {};

constexpr uint64_t kMiB = 1 << 20;
std::string N(uint64_t n) { return std::to_string(n); }

std::string PortOf(const std::string& address) { return address.substr(address.rfind(':') + 1); }

TEST_F(TransferNetworkNamespaces, PullsBothWaysBetweenNodesInSeparateNetworkNamespaces) {
  auto pair = NamespacePair::Create();
  if (!pair.ok() && pair.status().code() == Code::kFailedPrecondition) {
    GTEST_SKIP() << "skipped: cannot make network namespaces here: " << pair.status().ToString();
  }
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  const std::string ns_a = (*pair)->a(), ns_b = (*pair)->b();
  AdoptNamespaces(std::move(pair).value());

  Node* a = StartNode("a", {"--capacity", "48M", "--transfer-address", NamespacePair::kAddressA},
                      NamespacePair::Exec(ns_a));
  ASSERT_NE(a, nullptr);
  Node* b = StartNode("b", {"--capacity", "48M", "--transfer-address", NamespacePair::kAddressB},
                      NamespacePair::Exec(ns_b));
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(a->transfer.rfind(std::string(NamespacePair::kAddressA) + ":", 0), 0u) << a->transfer;
  ASSERT_EQ(b->transfer.rfind(std::string(NamespacePair::kAddressB) + ":", 0), 0u) << b->transfer;

  // A to B: put in namespace a, pulled and checked in namespace b.
  const ObjectId x = Id(1), y = Id(2);
  ASSERT_EQ(Put(a, x, 24 * kMiB, 3), 0);
  EXPECT_EQ(Pull(b, a->transfer, x), 0);
  EXPECT_EQ(RunStoreTool(b, "read-verify", {x.Hex(), N(24 * kMiB), "3"}), 0);
  // B to A.
  ASSERT_EQ(Put(b, y, 8 * kMiB + 5, 4), 0);
  EXPECT_EQ(Pull(a, b->transfer, y), 0);
  EXPECT_EQ(RunStoreTool(a, "read-verify", {y.Hex(), N(8 * kMiB + 5), "4"}), 0);
  StoreStats on_a = Stats(a), on_b = Stats(b);
  EXPECT_EQ(on_a.num_sealed, 2u);
  EXPECT_EQ(on_b.num_sealed, 2u);

  // They are separate hosts: B's loopback does not reach A's transfer service.
  if (PortOf(a->transfer) != PortOf(b->transfer)) {
    EXPECT_EQ(Pull(b, "127.0.0.1:" + PortOf(a->transfer), Id(3)),
              TransferToolExitFor(Code::kUnavailable));
  }

  StopNode(a);
  StopNode(b);
  EndProcessesAndNamespaces();
  auto [rc, listing] = RunCommand({IpBinary(), "netns", "list"}, dir().File("netns-list.log"));
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(listing.find(ns_a), std::string::npos) << "namespace left behind: " << listing;
  EXPECT_EQ(listing.find(ns_b), std::string::npos) << "namespace left behind: " << listing;
}

}  // namespace
}  // namespace airt::e2e
