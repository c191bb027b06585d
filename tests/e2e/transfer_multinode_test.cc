// Node-to-node transfer across real processes: each node an airt-store --transfer daemon, each
// pull an airt_transfer_tool process, puts and byte-for-byte checks airt_store_client_tool
// processes. Covers copies on several nodes and what makes them secondary, pipelined pulls,
// spilled objects, and the failures a puller must report instead of hanging or leaving a partial
// copy: a missing object, nobody listening, a silent peer, a too-slow transfer, a full receiver,
// a peer killed mid-transfer, and a puller killed mid-transfer.
#include <netinet/in.h>
#include <sys/socket.h>

#include "tests/e2e/transfer_fixture.h"

namespace airt::e2e {
namespace {

using objectstore::StoreStats;

class TransferProcesses : public TransferFixture {};

constexpr uint64_t kMiB = 1 << 20;
std::string N(uint64_t n) { return std::to_string(n); }

// A TCP socket on 127.0.0.1 held for the test: bound only (connections are refused) or listening
// but never accepting (connections complete in the backlog and are never answered). Holding it
// keeps any other process off the port.
class LocalPort {
 public:
  explicit LocalPort(bool listen) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
          (!listen || ::listen(fd_, 4) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~LocalPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  bool ok_ = false;
  uint16_t port_ = 0;
};

TEST_F(TransferProcesses, CopiesAnObjectToTwoNodesAsSecondaryCopiesWhenPulledBySeparateProcesses) {
  constexpr uint64_t kSize = 64 * kMiB;
  Node* a = StartNode("a", {"--capacity", "96M"});
  ASSERT_NE(a, nullptr);
  Node* b = StartNode("b", {"--capacity", "96M"});
  ASSERT_NE(b, nullptr);
  Node* c = StartNode("c", {"--capacity", "96M"});
  ASSERT_NE(c, nullptr);
  const ObjectId x = Id(1);
  ASSERT_EQ(Put(a, x, kSize, 7), 0);

  // B and C pull at the same time, each in its own process.
  Tool* into_b = StartPull(b, a->transfer, x, 30000);
  Tool* into_c = StartPull(c, a->transfer, x, 30000);
  ASSERT_EQ(WaitTool(into_b), 0);
  ASSERT_EQ(WaitTool(into_c), 0);
  EXPECT_TRUE(WaitForOutput(into_b, "pulled " + N(kSize)));
  EXPECT_TRUE(WaitForOutput(into_c, "pulled " + N(kSize)));
  EXPECT_EQ(RunStoreTool(b, "read-verify", {x.Hex(), N(kSize), "7"}), 0);
  EXPECT_EQ(RunStoreTool(c, "read-verify", {x.Hex(), N(kSize), "7"}), 0);
  for (Node* n : {b, c}) {
    StoreStats s = Stats(n);
    EXPECT_EQ(s.num_sealed, 1u) << n->name;
    EXPECT_EQ(s.num_creating, 0u) << n->name;
    EXPECT_EQ(s.used_bytes, kSize) << n->name;
  }
  // A still holds its own copy, unpinned once the transfers are done.
  EXPECT_TRUE(WaitForStats(a, [](const StoreStats& s) { return s.num_pinned == 0; }));
  EXPECT_TRUE(a->observer->Contains(x));

  // Full B takes a new primary object by dropping its secondary copy of x ...
  const ObjectId y = Id(2);
  EXPECT_EQ(Put(b, y, 48 * kMiB, 8), 0);
  StoreStats on_b = Stats(b);
  EXPECT_EQ(on_b.total_evicted, 1u);
  EXPECT_FALSE(b->observer->Contains(x));
  EXPECT_TRUE(b->observer->Contains(y));
  // ... while full A refuses one rather than drop x, its primary copy (A has no spill folder).
  EXPECT_EQ(RunStoreTool(a, "put", {y.Hex(), N(48 * kMiB), "8"}),
            TransferToolExitFor(Code::kResourceExhausted));
  EXPECT_TRUE(a->observer->Contains(x));
  EXPECT_EQ(Stats(a).total_evicted, 0u);
  // C's copy is C's own: B's eviction did not touch it.
  EXPECT_EQ(RunStoreTool(c, "read-verify", {x.Hex(), N(kSize), "7", "--sampled"}), 0);

  for (Node* n : {a, b, c}) StopNode(n);
}

TEST_F(TransferProcesses, PullReturnsNotFoundWhenThePeerDoesNotHoldTheObject) {
  Node* a = StartNode("a", {"--capacity", "16M"});
  ASSERT_NE(a, nullptr);
  Node* b = StartNode("b", {"--capacity", "16M"});
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(Put(a, Id(1), kMiB, 1), 0);

  EXPECT_EQ(Pull(b, a->transfer, Id(2)), TransferToolExitFor(Code::kNotFound));
  StoreStats s = Stats(b);
  EXPECT_EQ(s.num_objects, 0u);
  EXPECT_EQ(s.num_creating, 0u);
  EXPECT_FALSE(b->observer->Contains(Id(2)));
  // The same connection setup serves an object A holds.
  EXPECT_EQ(Pull(b, a->transfer, Id(1)), 0);
  EXPECT_EQ(RunStoreTool(b, "read-verify", {Id(1).Hex(), N(kMiB), "1"}), 0);
  StopNode(a);
  StopNode(b);
}

TEST_F(TransferProcesses, PullReturnsUnavailableWhenNothingListensAtThePeerAddress) {
  Node* b = StartNode("b", {"--capacity", "16M"});
  ASSERT_NE(b, nullptr);
  LocalPort refused(/*listen=*/false);
  ASSERT_TRUE(refused.ok());

  EXPECT_EQ(Pull(b, refused.address(), Id(1)), TransferToolExitFor(Code::kUnavailable));
  StoreStats s = Stats(b);
  EXPECT_EQ(s.num_objects, 0u);
  EXPECT_EQ(s.num_creating, 0u);
  StopNode(b);
}

TEST_F(TransferProcesses, PullReturnsDeadlineExceededWhenThePeerNeverAnswers) {
  Node* b = StartNode("b", {"--capacity", "16M"});
  ASSERT_NE(b, nullptr);
  LocalPort silent(/*listen=*/true);
  ASSERT_TRUE(silent.ok());

  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Pull(b, silent.address(), Id(1), /*timeout_ms=*/300),
            TransferToolExitFor(Code::kDeadlineExceeded));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s) << "the timeout was not kept";
  EXPECT_EQ(Stats(b).num_objects, 0u);
  StopNode(b);
}

TEST_F(TransferProcesses, PullReturnsDeadlineExceededAndAbortsTheCopyWhenTheTransferIsTooSlow) {
  constexpr uint64_t kSize = 512 * kMiB;
  Node* a = StartNode("a", {"--capacity", "600M"});
  ASSERT_NE(a, nullptr);
  Node* b = StartNode("b", {"--capacity", "600M", "--no-prefault"});  // fresh pages: slow
  ASSERT_NE(b, nullptr);
  const ObjectId x = Id(1);
  ASSERT_EQ(Put(a, x, kSize, 2), 0);

  // 512 MiB into fresh pages takes several times 100 ms here.
  EXPECT_EQ(Pull(b, a->transfer, x, /*timeout_ms=*/100),
            TransferToolExitFor(Code::kDeadlineExceeded));
  EXPECT_TRUE(WaitForStats(b, [](const StoreStats& s) {
    return s.num_creating == 0 && s.num_objects == 0 && s.used_bytes == 0;
  })) << "B kept a partial copy";
  EXPECT_FALSE(b->observer->Contains(x));
  EXPECT_TRUE(WaitForStats(a, [](const StoreStats& s) { return s.num_pinned == 0; }));
  // Given time, the same pull succeeds.
  EXPECT_EQ(Pull(b, a->transfer, x, 30000), 0);
  EXPECT_EQ(RunStoreTool(b, "read-verify", {x.Hex(), N(kSize), "2", "--sampled"}), 0);
  StopNode(a);
  StopNode(b);
}

TEST_F(TransferProcesses, PullReturnsUnavailableAndLeavesNoPartialObjectWhenThePeerIsKilled) {
  constexpr uint64_t kSize = 512 * kMiB;
  Node* a = StartNode("a", {"--capacity", "600M"});
  ASSERT_NE(a, nullptr);
  // Without prefaulting B receives into fresh pages, which keeps the transfer going for a while.
  Node* b = StartNode("b", {"--capacity", "600M", "--no-prefault"});
  ASSERT_NE(b, nullptr);
  Node* c = StartNode("c", {"--capacity", "16M"});
  ASSERT_NE(c, nullptr);
  const ObjectId x = Id(1);
  ASSERT_EQ(Put(a, x, kSize, 5), 0);

  // Once B holds the object being created, the puller is stopped mid-transfer so that A dies
  // while the transfer is certainly in flight, and resumed once A is gone.
  Tool* puller = StartPull(b, a->transfer, x, 60000);
  ASSERT_TRUE(WaitForStats(b, [](const StoreStats& s) { return s.num_creating == 1; }))
      << "the puller never created the object on B";
  puller->process->Kill(SIGSTOP);
  StoreStats in_flight = Stats(b);
  ASSERT_EQ(in_flight.num_creating, 1u) << "the transfer finished before A could be killed";
  ASSERT_EQ(in_flight.num_sealed, 0u);
  KillNode(a);
  puller->process->Kill(SIGCONT);

  EXPECT_EQ(WaitTool(puller, 20s), TransferToolExitFor(Code::kUnavailable));
  EXPECT_TRUE(WaitForStats(b, [](const StoreStats& s) { return s.num_creating == 0; }));
  StoreStats after = Stats(b);
  EXPECT_EQ(after.num_objects, 0u);
  EXPECT_EQ(after.used_bytes, 0u);
  EXPECT_FALSE(b->observer->Contains(x));

  // B keeps serving: its store takes and returns objects, and its transfer service sends them.
  const ObjectId y = Id(2);
  ASSERT_EQ(Put(b, y, 4 * kMiB, 6), 0);
  EXPECT_EQ(RunStoreTool(b, "read-verify", {y.Hex(), N(4 * kMiB), "6"}), 0);
  EXPECT_EQ(Pull(c, b->transfer, y), 0);
  EXPECT_EQ(RunStoreTool(c, "read-verify", {y.Hex(), N(4 * kMiB), "6"}), 0);
  // And a pull into B still works (from C, which now holds a copy of y; B drops its own first).
  EXPECT_TRUE(b->observer->Delete(y).ok());
  EXPECT_TRUE(testing::WaitUntil([&] { return !b->observer->Contains(y); }, 10s));
  EXPECT_EQ(Pull(b, c->transfer, y), 0);
  EXPECT_EQ(RunStoreTool(b, "read-verify", {y.Hex(), N(4 * kMiB), "6"}), 0);
  StopNode(b);
  StopNode(c);
}

TEST_F(TransferProcesses, PullFailsOnlyTheMissingObjectWhenSeveralArePipelined) {
  Node* a = StartNode("a", {"--capacity", "32M"});
  ASSERT_NE(a, nullptr);
  Node* b = StartNode("b", {"--capacity", "32M"});
  ASSERT_NE(b, nullptr);
  const ObjectId x1 = Id(1), missing = Id(2), x3 = Id(3), x4 = Id(4);
  ASSERT_EQ(Put(a, x1, 3 * kMiB + 1, 1), 0);
  ASSERT_EQ(Put(a, x3, 3 * kMiB, 3), 0);
  ASSERT_EQ(Put(a, x4, kMiB, 4), 0);

  // The missing object fails the pull, and the objects on either side of it still arrive.
  EXPECT_EQ(WaitTool(StartPull(b, a->transfer, {x1, missing, x3}, 30000)),
            TransferToolExitFor(Code::kNotFound));
  // (Visible to this process a moment after the tool's seal: see Put.)
  EXPECT_TRUE(WaitUntilSealed(b, x1));
  EXPECT_TRUE(WaitUntilSealed(b, x3));
  EXPECT_FALSE(b->observer->Contains(missing));
  EXPECT_EQ(Stats(b).num_creating, 0u);
  EXPECT_EQ(RunStoreTool(b, "read-verify", {x1.Hex(), N(3 * kMiB + 1), "1"}), 0);
  EXPECT_EQ(RunStoreTool(b, "read-verify", {x3.Hex(), N(3 * kMiB), "3"}), 0);
  EXPECT_TRUE(WaitForStats(a, [](const StoreStats& s) { return s.num_pinned == 0; }));

  // All present: x4 arrives, x1 and x3 (here already) are skipped.
  Tool* all = StartPull(b, a->transfer, {x1, x3, x4}, 30000);
  ASSERT_EQ(WaitTool(all), 0);
  EXPECT_TRUE(WaitForOutput(all, "pulled " + N(7 * kMiB + 1)));
  EXPECT_EQ(RunStoreTool(b, "read-verify", {x4.Hex(), N(kMiB), "4"}), 0);
  EXPECT_EQ(Stats(b).num_sealed, 3u);
  StopNode(a);
  StopNode(b);
}

TEST_F(TransferProcesses, PullReturnsResourceExhaustedWhenTheLocalStoreHasNoRoom) {
  Node* a = StartNode("a", {"--capacity", "32M"});
  ASSERT_NE(a, nullptr);
  Node* b = StartNode("b", {"--capacity", "16M"});  // no spill folder: its primaries stay
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(Put(a, Id(1), 8 * kMiB, 1), 0);
  ASSERT_EQ(Put(b, Id(2), 12 * kMiB, 2), 0);

  EXPECT_EQ(Pull(b, a->transfer, Id(1)), TransferToolExitFor(Code::kResourceExhausted));
  StoreStats s = Stats(b);
  EXPECT_EQ(s.num_objects, 1u);
  EXPECT_EQ(s.num_creating, 0u);
  EXPECT_EQ(s.used_bytes, 12 * kMiB);
  EXPECT_TRUE(b->observer->Contains(Id(2)));
  EXPECT_TRUE(WaitForStats(a, [](const StoreStats& s) { return s.num_pinned == 0; }));

  // With room made, the same pull succeeds.
  ASSERT_TRUE(b->observer->Delete(Id(2)).ok());
  EXPECT_EQ(Pull(b, a->transfer, Id(1)), 0);
  EXPECT_EQ(RunStoreTool(b, "read-verify", {Id(1).Hex(), N(8 * kMiB), "1"}), 0);
  StopNode(a);
  StopNode(b);
}

TEST_F(TransferProcesses, ObjectLargerThanBothStoresTravelsFromFallbackToFallback) {
  Node* a = StartNode("a", {"--capacity", "16M", "--fallback-dir", dir().File("fallback-a")});
  ASSERT_NE(a, nullptr);
  Node* b = StartNode("b", {"--capacity", "16M", "--fallback-dir", dir().File("fallback-b")});
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(Put(a, Id(1), 24 * kMiB, 1), 0);
  ASSERT_EQ(Stats(a).num_fallback, 1u);

  EXPECT_EQ(Pull(b, a->transfer, Id(1)), 0);
  StoreStats on_b = Stats(b);
  EXPECT_EQ(on_b.num_fallback, 1u);
  EXPECT_EQ(on_b.used_bytes, 0u);
  EXPECT_EQ(RunStoreTool(b, "read-verify", {Id(1).Hex(), N(24 * kMiB), "1"}), 0);
  EXPECT_TRUE(WaitForStats(a, [](const StoreStats& s) { return s.num_pinned == 0; }));
  StopNode(a);
  StopNode(b);
}

TEST_F(TransferProcesses, ServesAnObjectItHasSpilledWhenAnotherNodePullsIt) {
  Node* a = StartNode("a", {"--capacity", "40M", "--spill-dir", dir().File("spill-a")});
  ASSERT_NE(a, nullptr);
  Node* b = StartNode("b", {"--capacity", "40M"});
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(Put(a, Id(1), 24 * kMiB, 1), 0);
  ASSERT_EQ(Put(a, Id(2), 24 * kMiB, 2), 0);
  ASSERT_EQ(Stats(a).num_spilled, 1u) << "the first object should be on disk";

  EXPECT_EQ(Pull(b, a->transfer, Id(1)), 0);
  EXPECT_EQ(RunStoreTool(b, "read-verify", {Id(1).Hex(), N(24 * kMiB), "1"}), 0);
  EXPECT_GE(Stats(a).total_restored, 1u);
  StopNode(a);
  StopNode(b);
}

TEST_F(TransferProcesses, PeerReleasesItsPinAndReceiverAbortsTheCopyWhenThePullerIsKilled) {
  constexpr uint64_t kSize = 256 * kMiB;
  Node* a = StartNode("a", {"--capacity", "300M"});
  ASSERT_NE(a, nullptr);
  Node* b = StartNode("b", {"--capacity", "300M", "--no-prefault"});
  ASSERT_NE(b, nullptr);
  const ObjectId x = Id(1);
  ASSERT_EQ(Put(a, x, kSize, 9), 0);

  Tool* puller = StartPull(b, a->transfer, x, 60000);
  ASSERT_TRUE(WaitForStats(b, [](const StoreStats& s) { return s.num_creating == 1; }));
  puller->process->Kill(SIGSTOP);  // holds the transfer mid-way: A is stuck sending
  ASSERT_EQ(Stats(b).num_creating, 1u) << "the transfer finished before the puller was stopped";
  EXPECT_EQ(Stats(a).num_pinned, 1u) << "A pins the object while sending it";
  puller->process->Kill(SIGKILL);
  EXPECT_EQ(WaitTool(puller, 10s), 128 + SIGKILL);

  EXPECT_TRUE(WaitForStats(a, [](const StoreStats& s) { return s.num_pinned == 0; }))
      << "A's transfer service kept the pin of a transfer whose puller is gone";
  EXPECT_TRUE(WaitForStats(b, [](const StoreStats& s) {
    return s.num_creating == 0 && s.num_objects == 0 && s.used_bytes == 0;
  })) << "B kept the partial copy of a killed puller";
  EXPECT_FALSE(b->observer->Contains(x));
  // A new puller gets the whole object.
  EXPECT_EQ(Pull(b, a->transfer, x), 0);
  EXPECT_EQ(RunStoreTool(b, "read-verify", {x.Hex(), N(kSize), "9", "--sampled"}), 0);
  StopNode(a);
  StopNode(b);
}

}  // namespace
}  // namespace airt::e2e
