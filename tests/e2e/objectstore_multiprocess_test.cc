// The object store across real processes: an airt-store daemon and airt_store_client_tool
// clients that read together, get killed mid-create and mid-get, wait for each other, and push
// the store into eviction, spilling and refusal.
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "tests/e2e/object_pattern.h"
#include "tests/e2e/store_fixture.h"

namespace airt::e2e {
namespace {

using objectstore::StoreStats;

class ObjectStoreProcesses : public StoreFixture {
 protected:
  std::string Hex(uint32_t i) const { return Id(i).Hex(); }
  void ExpectEvictionSparesTheCopyRead(uint32_t read);
};

constexpr uint64_t kMiB = 1 << 20;
std::string N(uint64_t n) { return std::to_string(n); }

TEST_F(ObjectStoreProcesses, FourReadersVerifyOneObjectAtOnceAndLeaveNoPinsWhenDone) {
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "64M"}));
  ASSERT_EQ(RunTool("put", {Hex(1), N(16 * kMiB), "7"}), 0);

  const std::string release = dir().File("release");
  std::vector<Tool*> readers;
  for (int r = 0; r < 4; ++r) {
    readers.push_back(
        StartTool("read-verify", {Hex(1), N(16 * kMiB), "7", "--hold-until", release}));
  }
  for (Tool* reader : readers) ASSERT_TRUE(WaitForOutput(reader, "verified")) << reader->name;
  // All four hold their pins at once: one object pinned; four readers and the observer connected.
  StoreStats held = Stats();
  EXPECT_EQ(held.num_pinned, 1u);
  EXPECT_EQ(held.num_clients, 5u);

  std::ofstream(release).put('x');
  for (Tool* reader : readers) EXPECT_EQ(reader->process->Wait(20s), 0) << reader->name;
  EXPECT_TRUE(WaitForStats([](const StoreStats& s) {
    return s.num_pinned == 0 && s.num_clients == 1;
  })) << "pins left: "
      << Stats().num_pinned;
  EXPECT_EQ(Stats().num_objects, 1u);
  StopStore();
}

TEST_F(ObjectStoreProcesses, UnsealedObjectIsAbortedWhenItsCreatorIsKilled) {
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "16M"}));
  Tool* creator = StartTool("create-and-hang", {Hex(1), N(4 * kMiB)});
  ASSERT_TRUE(WaitForOutput(creator, "created"));
  // A reader waiting for the object while it is being created.
  Tool* reader = StartTool("wait-get", {Hex(1), "60000", N(3 * kMiB), "11"});
  ASSERT_TRUE(WaitForOutput(reader, "waiting"));
  StoreStats creating = Stats();
  EXPECT_EQ(creating.num_creating, 1u);
  EXPECT_GE(creating.used_bytes, 4 * kMiB);
  EXPECT_FALSE(observer().Contains(Id(1)));
  // The store serves others meanwhile.
  ASSERT_EQ(RunTool("put", {Hex(2), N(kMiB), "2"}), 0);

  creator->process->Kill(SIGKILL);
  EXPECT_EQ(creator->process->Wait(10s), 128 + SIGKILL);
  EXPECT_TRUE(WaitForStats([](const StoreStats& s) {
    return s.num_creating == 0 && s.num_clients == 2;  // the observer and the waiting reader
  }));
  StoreStats after = Stats();
  EXPECT_EQ(after.num_objects, 1u);
  EXPECT_EQ(after.used_bytes, kMiB);
  EXPECT_FALSE(observer().Contains(Id(1)));
  EXPECT_TRUE(reader->process->Running()) << "the abort must not answer a waiting Get";

  // The id is free again; the waiting reader gets the new object, not the aborted one.
  ASSERT_EQ(RunTool("put", {Hex(1), N(3 * kMiB), "11"}), 0);
  EXPECT_EQ(reader->process->Wait(20s), 0);
  EXPECT_EQ(RunTool("read-verify", {Hex(1), N(3 * kMiB), "11"}), 0);
  EXPECT_EQ(RunTool("read-verify", {Hex(2), N(kMiB), "2"}), 0);
  StopStore();
}

TEST_F(ObjectStoreProcesses, GetOfLaterObjectSucceedsWhenAnEarlierWaiterWasKilled) {
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "16M"}));
  Tool* waiter = StartTool("get-and-hang", {Hex(1)});
  ASSERT_TRUE(WaitForOutput(waiter, "waiting"));
  ASSERT_TRUE(WaitForStats([](const StoreStats& s) { return s.num_clients == 2; }));
  waiter->process->Kill(SIGKILL);
  EXPECT_EQ(waiter->process->Wait(10s), 128 + SIGKILL);
  EXPECT_TRUE(WaitForStats([](const StoreStats& s) { return s.num_clients == 1; }));

  ASSERT_EQ(RunTool("put", {Hex(1), N(2 * kMiB + 5), "3"}), 0);
  Tool* reader = StartTool("wait-get", {Hex(1), "10000", N(2 * kMiB + 5), "3"});
  EXPECT_EQ(reader->process->Wait(20s), 0);
  EXPECT_TRUE(WaitForOutput(reader, "checksum"));
  StoreStats after = Stats();
  EXPECT_EQ(after.num_pinned, 0u);
  EXPECT_EQ(after.num_objects, 1u);
  StopStore();
}

TEST_F(ObjectStoreProcesses, PinIsUndoneSoDeleteSucceedsWhenTheReaderHoldingItIsKilled) {
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "16M"}));
  ASSERT_EQ(RunTool("put", {Hex(1), N(kMiB), "4"}), 0);
  Tool* holder = StartTool("get-and-hang", {Hex(1)});
  ASSERT_TRUE(WaitForOutput(holder, "got"));
  EXPECT_EQ(Stats().num_pinned, 1u);

  holder->process->Kill(SIGKILL);
  EXPECT_EQ(holder->process->Wait(10s), 128 + SIGKILL);
  ASSERT_TRUE(WaitForStats([](const StoreStats& s) {
    return s.num_pinned == 0 && s.num_clients == 1;
  })) << "pinned objects: "
      << Stats().num_pinned;
  Status deleted = observer().Delete(Id(1));
  EXPECT_TRUE(deleted.ok()) << deleted.ToString();
  EXPECT_FALSE(observer().Contains(Id(1)));
  StoreStats after = Stats();
  EXPECT_EQ(after.num_objects, 0u);
  EXPECT_EQ(after.used_bytes, 0u);
  StopStore();
}

TEST_F(ObjectStoreProcesses, PendingDeleteFinishesWhenTheLastPinHolderIsKilled) {
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "16M"}));
  ASSERT_EQ(RunTool("put", {Hex(1), N(kMiB), "5"}), 0);
  Tool* holder = StartTool("get-and-hang", {Hex(1)});
  ASSERT_TRUE(WaitForOutput(holder, "got"));
  Status deleted = observer().Delete(Id(1));
  ASSERT_TRUE(deleted.ok()) << deleted.ToString();
  EXPECT_EQ(Stats().num_objects, 1u) << "a pinned object goes at its last release";
  // Being deleted, it is not readable any more.
  EXPECT_EQ(RunTool("wait-get", {Hex(1), "50"}), ToolExitFor(Code::kDeadlineExceeded));

  holder->process->Kill(SIGKILL);
  EXPECT_EQ(holder->process->Wait(10s), 128 + SIGKILL);
  EXPECT_TRUE(WaitForStats([](const StoreStats& s) { return s.num_objects == 0; }));
  EXPECT_FALSE(observer().Contains(Id(1)));
  EXPECT_EQ(Stats().used_bytes, 0u);
  ASSERT_EQ(RunTool("put", {Hex(1), N(kMiB), "6"}), 0);
  EXPECT_EQ(RunTool("read-verify", {Hex(1), N(kMiB), "6"}), 0);
  StopStore();
}

TEST_F(ObjectStoreProcesses, GetReturnsWhenAnotherProcessPutsTheObjectLater) {
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "16M"}));
  Tool* reader = StartTool("wait-get", {Hex(1), "60000", N(kMiB + 3), "8"});
  ASSERT_TRUE(WaitForOutput(reader, "waiting"));
  // A short Get of the same absent object times out meanwhile, naming nothing found.
  EXPECT_EQ(RunTool("wait-get", {Hex(1), "100"}), ToolExitFor(Code::kDeadlineExceeded));
  ASSERT_TRUE(reader->process->Running()) << "the reader returned before the object existed";

  ASSERT_EQ(RunTool("put", {Hex(1), N(kMiB + 3), "8"}), 0);
  EXPECT_EQ(reader->process->Wait(20s), 0);
  char expect[40];
  std::snprintf(expect, sizeof(expect), "checksum %016llx",
                static_cast<unsigned long long>(PatternChecksum(kMiB + 3, 8)));
  EXPECT_TRUE(WaitForOutput(reader, expect));
  StopStore();
}

TEST_F(ObjectStoreProcesses,
       EvictsSecondaryCopiesLeastRecentlyUsedFirstThenSpillsPrimariesWhenFull) {
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "8M", "--spill-dir", dir().File("spill")}));
  // Six secondary copies of 1 MiB (ids 1..6), then reads of 1, 2, 3 in that order.
  for (uint32_t s = 1; s <= 6; ++s) {
    ASSERT_EQ(RunTool("put", {Hex(s), N(kMiB), N(s), "--secondary"}), 0);
  }
  for (uint32_t s = 1; s <= 3; ++s) ASSERT_EQ(RunTool("read-verify", {Hex(s), N(kMiB), N(s)}), 0);
  auto secondaries_left = [&] {
    std::string left;
    for (uint32_t s = 1; s <= 6; ++s) left += observer().Contains(Id(s)) ? N(s) : "-";
    return left;
  };

  // Primary copies (ids 101..) fill the store: the 2 MiB one fits in the free space.
  ASSERT_EQ(RunTool("put", {Hex(101), N(2 * kMiB), "101"}), 0);
  EXPECT_EQ(Stats().total_evicted, 0u);
  EXPECT_EQ(secondaries_left(), "123456");
  // Three more evict the three never read since created.
  for (uint32_t p = 102; p <= 104; ++p) ASSERT_EQ(RunTool("put", {Hex(p), N(kMiB), N(p)}), 0);
  EXPECT_EQ(Stats().total_evicted, 3u);
  EXPECT_EQ(secondaries_left(), "123---");
  // Then the read ones, least recently read first.
  ASSERT_EQ(RunTool("put", {Hex(105), N(kMiB), "105"}), 0);
  EXPECT_EQ(secondaries_left(), "-23---");
  ASSERT_EQ(RunTool("put", {Hex(106), N(kMiB), "106"}), 0);
  EXPECT_EQ(secondaries_left(), "--3---");
  ASSERT_EQ(RunTool("put", {Hex(107), N(kMiB), "107"}), 0);
  EXPECT_EQ(secondaries_left(), "------");
  StoreStats evicted = Stats();
  EXPECT_EQ(evicted.total_evicted, 6u);
  EXPECT_EQ(evicted.num_spilled, 0u);

  // No secondary copy is left: more primaries spill others, which stay readable.
  ASSERT_EQ(RunTool("put", {Hex(108), N(3 * kMiB), "108"}), 0);
  StoreStats spilled = Stats();
  EXPECT_GT(spilled.num_spilled, 0u);
  EXPECT_EQ(spilled.total_evicted, 6u);
  EXPECT_EQ(spilled.num_objects, 8u);
  for (uint32_t p = 101; p <= 108; ++p) {
    EXPECT_TRUE(observer().Contains(Id(p))) << p;
    uint64_t size = p == 101 ? 2 * kMiB : p == 108 ? 3 * kMiB : kMiB;
    EXPECT_EQ(RunTool("read-verify", {Hex(p), N(size), N(p)}), 0) << p;
  }
  EXPECT_GT(Stats().total_restored, 0u);
  StopStore();
}

// Secondary copies 1, 2, 3 are created in that order, then copy `read` is read. Two more
// primaries force two evictions: the copy read must survive both, and the others go in creation
// order (creating is the first use).
void ObjectStoreProcesses::ExpectEvictionSparesTheCopyRead(uint32_t read) {
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "4M"}));
  for (uint32_t s = 1; s <= 3; ++s) {
    ASSERT_EQ(RunTool("put", {Hex(s), N(kMiB), N(s), "--secondary"}), 0);
  }
  ASSERT_EQ(RunTool("read-verify", {Hex(read), N(kMiB), N(read)}), 0);
  std::vector<uint32_t> unread;
  for (uint32_t s = 1; s <= 3; ++s) {
    if (s != read) unread.push_back(s);
  }
  ASSERT_EQ(RunTool("put", {Hex(101), N(kMiB), "101"}), 0);  // fits in the free space
  ASSERT_EQ(RunTool("put", {Hex(102), N(kMiB), "102"}), 0);
  EXPECT_EQ(Stats().total_evicted, 1u);
  EXPECT_TRUE(observer().Contains(Id(read)))
      << "copy " << read << ", the only one read, went first";
  EXPECT_FALSE(observer().Contains(Id(unread[0]))) << "copy " << unread[0] << " should go first";
  ASSERT_EQ(RunTool("put", {Hex(103), N(kMiB), "103"}), 0);
  EXPECT_EQ(Stats().total_evicted, 2u);
  EXPECT_TRUE(observer().Contains(Id(read)))
      << "copy " << read << ", the only one read, was evicted";
  EXPECT_FALSE(observer().Contains(Id(unread[1])));
  StopStore();
}

TEST_F(ObjectStoreProcesses, EvictionSparesTheSecondaryCopyReadWhenItWasCreatedFirst) {
  ExpectEvictionSparesTheCopyRead(1);
}

TEST_F(ObjectStoreProcesses, EvictionSparesTheSecondaryCopyReadWhenItWasCreatedLast) {
  ExpectEvictionSparesTheCopyRead(3);
}

TEST_F(ObjectStoreProcesses, PrimariesReadBackByteForByteWhenFilledWellPastCapacity) {
  const std::string spill_dir = dir().File("spill");
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "16M", "--spill-dir", spill_dir}));
  // 48 objects of 0.5 to 1.5 MiB, odd sizes: about three times the capacity.
  ASSERT_EQ(RunTool("put-many", {Hex(1), "48", N(kMiB), "21", "--vary"}), 0);
  StoreStats written = Stats();
  EXPECT_EQ(written.num_objects, 48u);
  EXPECT_GT(written.num_spilled, 24u);
  EXPECT_EQ(written.total_evicted, 0u);
  EXPECT_LE(written.used_bytes, 16 * kMiB);
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(spill_dir))
    files += entry.is_regular_file();
  EXPECT_EQ(files, written.num_spilled);

  // Two readers at once, each restoring what the other's restores spilled.
  Tool* a = StartTool("verify-many", {Hex(1), "48", N(kMiB), "21", "--vary"});
  Tool* b = StartTool("verify-many", {Hex(1), "48", N(kMiB), "21", "--vary"});
  EXPECT_EQ(a->process->Wait(60s), 0);
  EXPECT_EQ(b->process->Wait(60s), 0);
  StoreStats read = Stats();
  EXPECT_EQ(read.num_objects, 48u);
  EXPECT_GT(read.total_restored, 0u);
  EXPECT_EQ(read.num_pinned, 0u);
  StopStore();
}

size_t FilesIn(const std::string& dir) {
  size_t files = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    files += entry.is_regular_file();
  return files;
}

TEST_F(ObjectStoreProcesses, ObjectLargerThanTheStoreLivesInAFallbackFileOtherProcessesRead) {
  const std::string fallback = dir().File("fallback");
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "64M", "--fallback-dir", fallback}));
  ASSERT_EQ(RunTool("put", {Hex(1), N(96 * kMiB), "5"}), 0);  // the writer exits: still there
  StoreStats put = Stats();
  EXPECT_EQ(put.num_fallback, 1u);
  EXPECT_EQ(put.fallback_bytes, 96 * kMiB);
  EXPECT_EQ(put.used_bytes, 0u);
  EXPECT_EQ(FilesIn(fallback), 1u);

  const std::string release = dir().File("release");
  std::vector<Tool*> readers;
  for (int r = 0; r < 2; ++r) {
    readers.push_back(
        StartTool("read-verify", {Hex(1), N(96 * kMiB), "5", "--hold-until", release}));
  }
  for (Tool* reader : readers) ASSERT_TRUE(WaitForOutput(reader, "verified")) << reader->name;
  EXPECT_EQ(Stats().num_pinned, 1u);
  // Deleted while pinned: the file stays until the readers let go.
  ASSERT_TRUE(observer().Delete(Id(1)).ok());
  EXPECT_EQ(FilesIn(fallback), 1u);
  std::ofstream(release).put('x');
  for (Tool* reader : readers) EXPECT_EQ(reader->process->Wait(20s), 0) << reader->name;
  EXPECT_TRUE(WaitForStats([](const StoreStats& s) { return s.num_objects == 0; }));
  EXPECT_EQ(Stats().fallback_bytes, 0u);
  EXPECT_EQ(FilesIn(fallback), 0u);
  StopStore();
}

TEST_F(ObjectStoreProcesses, WorkingSetFourTimesTheStoreReadsBackWithSpillingAndFallback) {
  const std::string spill = dir().File("spill"), fallback = dir().File("fallback");
  ASSERT_NO_FATAL_FAILURE(
      StartStore({"--capacity", "16M", "--spill-dir", spill, "--fallback-dir", fallback}));
  // 64 objects of 0.5 to 1.5 MiB (about four times the store), and one of 24 MiB.
  ASSERT_EQ(RunTool("put-many", {Hex(1), "64", N(kMiB), "41", "--vary"}), 0);
  ASSERT_EQ(RunTool("put", {Hex(500), N(24 * kMiB), "42"}), 0);
  StoreStats written = Stats();
  EXPECT_EQ(written.num_objects, 65u);
  EXPECT_GT(written.num_spilled, 40u);
  EXPECT_EQ(written.num_fallback, 1u);
  Tool* a = StartTool("verify-many", {Hex(1), "64", N(kMiB), "41", "--vary"});
  Tool* b = StartTool("verify-many", {Hex(1), "64", N(kMiB), "41", "--vary", "--stride", "3"});
  EXPECT_EQ(a->process->Wait(60s), 0);
  EXPECT_EQ(b->process->Wait(60s), 0);
  EXPECT_EQ(RunTool("read-verify", {Hex(500), N(24 * kMiB), "42"}), 0);
  StoreStats read = Stats();
  EXPECT_EQ(read.num_objects, 65u);
  EXPECT_GT(read.total_restored, 0u);
  EXPECT_EQ(read.num_pinned, 0u);
  StopStore();
}

TEST_F(ObjectStoreProcesses,
       CreateGetsResourceExhaustedNamingSizeAndCapacityWhenFullWithoutSpilling) {
  ASSERT_NO_FATAL_FAILURE(StartStore({"--capacity", "4M"}));
  ASSERT_EQ(RunTool("put-many", {Hex(1), "3", N(kMiB), "31"}), 0);

  auto full = observer().Create(Id(100), 2 * kMiB);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), Code::kResourceExhausted) << full.status().ToString();
  EXPECT_NE(full.status().message().find(N(2 * kMiB)), std::string::npos)
      << full.status().ToString();
  EXPECT_NE(full.status().message().find(N(4 * kMiB)), std::string::npos)
      << full.status().ToString();
  EXPECT_EQ(RunTool("put", {Hex(100), N(2 * kMiB), "1"}), ToolExitFor(Code::kResourceExhausted));

  auto huge = observer().Create(Id(101), 64 * kMiB);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), Code::kResourceExhausted) << huge.status().ToString();
  EXPECT_NE(huge.status().message().find(N(64 * kMiB)), std::string::npos)
      << huge.status().ToString();
  EXPECT_NE(huge.status().message().find(N(4 * kMiB)), std::string::npos)
      << huge.status().ToString();

  StoreStats after = Stats();
  EXPECT_EQ(after.num_objects, 3u);
  EXPECT_EQ(after.num_creating, 0u);
  EXPECT_EQ(after.total_evicted + after.total_spilled, 0u);
  EXPECT_EQ(RunTool("verify-many", {Hex(1), "3", N(kMiB), "31"}), 0);
  // What still fits is still taken.
  EXPECT_EQ(RunTool("put", {Hex(102), N(kMiB), "9"}), 0);
  StopStore();
}

}  // namespace
}  // namespace airt::e2e
