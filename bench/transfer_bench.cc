// transfer_bench: a cross-node pull next to a raw TCP copy of the same bytes, in the same run.
// Two airt-store processes (node A serving transfers, node B), an object put on A, then pulled
// into B by this process (ObjectPuller: B's copy is created in B's shared memory and read from
// the socket straight into it). The baseline copies the same number of bytes over a loopback TCP
// connection from a child process's buffer into this process's buffer.
// Prints figures only; never fails on time.
#include <cstdio>
#include <thread>
#include <vector>

#include "bench/bench_support.h"
#include "common/flags.h"
#include "common/process.h"
#include "objectstore/transfer.h"

using airt::ObjectId;
using airt::bench::Clock;
using airt::bench::Die;
using airt::bench::Seconds;

int main(int argc, char** argv) {
  airt::InitProcess("transfer_bench");
  std::string store_binary = airt::bench::DefaultStoreBinary();
  bool quick = false;
  airt::FlagSet flags("transfer_bench");
  flags.AddString("store-binary", &store_binary, "the airt-store daemon to measure");
  flags.AddBool("quick", &quick, "64 MiB objects only, fewer repetitions (for CI smoke runs)");
  if (airt::Status s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "%s\n%s", s.message().c_str(), flags.Usage().c_str());
    return s.code() == airt::Code::kCancelled ? 0 : 2;
  }
  const uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;
  struct Case {
    uint64_t size;
    int reps;
  };
  std::vector<Case> cases = {{64 * kMiB, quick ? 3 : 20}};
  if (!quick) cases.push_back({kGiB, 3});
  uint64_t capacity = cases.back().size + 256 * kMiB;

  airt::bench::ScratchDir dir;
  std::string cap = "--capacity=" + std::to_string(capacity);
  airt::bench::DaemonProcess node_a(
      {store_binary, "--socket=" + dir.path() + "/a.sock", cap, "--transfer"},
      dir.path() + "/a.log");
  airt::bench::DaemonProcess node_b({store_binary, "--socket=" + dir.path() + "/b.sock", cap},
                                    dir.path() + "/b.log");
  auto address = node_a.WaitForLine("transfer ", std::chrono::seconds(10));
  if (!address.ok()) Die(address.status(), "node A's transfer service");
  auto a = airt::bench::ConnectWithRetry(dir.path() + "/a.sock", std::chrono::seconds(10));
  auto b = airt::bench::ConnectWithRetry(dir.path() + "/b.sock", std::chrono::seconds(10));
  a->Warm();
  b->Warm();
  airt::objectstore::ObjectPuller puller(b.get());

  std::printf("transfer_bench: two airt-store processes on loopback TCP, %u cores\n\n",
              std::thread::hardware_concurrency());
  std::printf("%-22s %12s %14s %8s\n", "cross-node pull", "airt GB/s", "raw TCP GB/s", "ratio");
  airt::TaskId task = airt::TaskId::ForDriver(airt::JobId::FromRandom());
  uint32_t n = 0;
  for (auto [size, reps] : cases) {
    ObjectId id = ObjectId::ForPut(task, ++n);
    auto object = a->Create(id, size);
    if (!object.ok()) Die(object.status(), "create on node A");
    for (uint64_t i = 0; i < size; i += 4096) object->data[i] = static_cast<uint8_t>(i >> 12);
    if (auto s = a->Seal(id); !s.ok()) Die(s, "seal on node A");
    Clock::duration total{};
    for (int r = 0; r < reps; ++r) {
      auto start = Clock::now();
      if (auto s = puller.Pull(*address, id, 60000); !s.ok()) Die(s, "pull");
      total += Clock::now() - start;
      if (auto s = b->Delete(id); !s.ok()) Die(s, "delete on node B");
    }
    double airt_gbps = static_cast<double>(size) * reps / Seconds(total) / 1e9;
    auto raw_gbps = airt::bench::RawTcpCopyGbps(size, reps);
    if (!raw_gbps.ok()) Die(raw_gbps.status(), "raw TCP baseline");
    std::string name = size >= kGiB ? "1 GiB" : std::to_string(size / kMiB) + " MiB";
    std::printf("%-22s %12.2f %14.2f %8.2f\n", name.c_str(), airt_gbps, *raw_gbps,
                airt_gbps / *raw_gbps);
    (void)a->Delete(id);
  }
  return 0;
}
