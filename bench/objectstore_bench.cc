// objectstore_bench: the object store's figures next to baselines measured in the same run.
// Starts a real airt-store process, warms the arena, then prints
//   put GB/s for 1 MiB, 64 MiB and 1 GiB objects (StoreClient::Put, and Create + the caller's
//   memcpy + Seal) | memcpy GB/s of the same bytes into touched memory | ratio; Get+Release latency
//   (median, p99 us) and ops/s for a small and a large object; Create+Seal ops/s for 1 KiB objects
//   | a raw Unix-socket round trip; and for objects larger than a second store's 16 MiB arena,
//   held in fallback memory (a file each in its --fallback-dir): put GB/s and Get + read GB/s |
//   memcpy and a read of touched memory of the same bytes.
// Prints figures only; never fails on time.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include "bench/bench_support.h"
#include "common/flags.h"
#include "common/process.h"
#include "objectstore/object_store.h"

namespace {

using airt::ObjectId;
using airt::bench::Clock;
using airt::bench::Die;
using airt::bench::Seconds;
using airt::objectstore::StoreClient;

ObjectId NextId() {
  static uint32_t n = 0;
  static airt::TaskId task = airt::TaskId::ForDriver(airt::JobId::FromRandom());
  return ObjectId::ForPut(task, ++n);
}

struct PutFigures {
  double gbps;
  double create_us, copy_us, seal_us;  // per put
};

// Puts of `size`-byte objects, keeping `window` bytes live (oldest deleted first) so the
// destinations rotate through memory as they would in use. `api_put`: StoreClient::Put;
// otherwise Create, the caller's own memcpy, Seal (timed separately).
PutFigures MeasurePut(StoreClient& client, const std::vector<uint8_t>& src, uint64_t size, int reps,
                      uint64_t window, bool api_put) {
  std::deque<ObjectId> live;
  Clock::duration total{}, create{}, copy{}, seal{};
  for (int i = 0; i < reps; ++i) {
    while (!live.empty() && (live.size() + 1) * size > window) {
      if (auto s = client.Delete(live.front()); !s.ok()) Die(s, "delete");
      live.pop_front();
    }
    ObjectId id = NextId();
    auto start = Clock::now();
    if (api_put) {
      if (auto s = client.Put(id, std::span<const uint8_t>(src.data(), size)); !s.ok()) {
        Die(s, "put");
      }
      total += Clock::now() - start;
      live.push_back(id);
      continue;
    }
    auto object = client.Create(id, size);
    if (!object.ok()) Die(object.status(), "create");
    auto created = Clock::now();
    std::memcpy(object->data.data(), src.data(), size);
    auto copied = Clock::now();
    if (auto s = client.Seal(id); !s.ok()) Die(s, "seal");
    auto sealed = Clock::now();
    total += sealed - start;
    create += created - start;
    copy += copied - created;
    seal += sealed - copied;
    live.push_back(id);
  }
  for (const ObjectId& id : live) (void)client.Delete(id);
  return {static_cast<double>(size) * reps / Seconds(total) / 1e9, Seconds(create) * 1e6 / reps,
          Seconds(copy) * 1e6 / reps, Seconds(seal) * 1e6 / reps};
}

// memcpy of the same bytes into touched memory, rotating over `window` bytes the same way.
double MemcpyGbps(const std::vector<uint8_t>& src, std::vector<uint8_t>& dst, uint64_t size,
                  int reps) {
  uint64_t slots = std::max<uint64_t>(1, dst.size() / size);
  Clock::duration total{};
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    std::memcpy(dst.data() + (i % slots) * size, src.data(), size);
    total += Clock::now() - start;
  }
  return static_cast<double>(size) * reps / Seconds(total) / 1e9;
}

struct Latency {
  double median_us, p99_us, ops_per_s;
};

Latency GetReleaseLatency(StoreClient& client, const ObjectId& id, int reps) {
  std::vector<double> us(reps);
  auto begin = Clock::now();
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    {
      auto pin = client.Get(id, 0);
      if (!pin.ok()) Die(pin.status(), "get");
    }
    us[i] = Seconds(Clock::now() - start) * 1e6;
  }
  double total = Seconds(Clock::now() - begin);
  std::sort(us.begin(), us.end());
  return {us[reps / 2], us[reps * 99 / 100], reps / total};
}

double CreateSealOps(StoreClient& client, int reps) {
  std::vector<ObjectId> ids(reps);
  for (auto& id : ids) id = NextId();
  auto start = Clock::now();
  for (const ObjectId& id : ids) {
    auto object = client.Create(id, 1024);
    if (!object.ok()) Die(object.status(), "create");
    object->data[0] = 1;
    if (auto s = client.Seal(id); !s.ok()) Die(s, "seal");
  }
  double ops = reps / Seconds(Clock::now() - start);
  for (const ObjectId& id : ids) (void)client.Delete(id);
  return ops;
}

// A 16-byte request and reply over a Unix socketpair to an echo thread: the floor under any
// store request that needs an answer.
double SocketRoundTripOps(int reps) {
  int fds[2];
  ::socketpair(AF_UNIX, SOCK_STREAM, 0, fds);
  std::thread echo([fd = fds[1], reps] {
    char buf[16];
    for (int i = 0; i < reps; ++i) {
      if (::recv(fd, buf, 16, MSG_WAITALL) != 16) return;
      ::send(fd, buf, 16, 0);
    }
  });
  char buf[16] = {};
  auto start = Clock::now();
  for (int i = 0; i < reps; ++i) {
    ::send(fds[0], buf, 16, 0);
    ::recv(fds[0], buf, 16, MSG_WAITALL);
  }
  double ops = reps / Seconds(Clock::now() - start);
  echo.join();
  ::close(fds[0]);
  ::close(fds[1]);
  return ops;
}

// Reads every 8-byte word of `bytes` (the reader's cost of looking at an object).
uint64_t SumWords(std::span<const uint8_t> bytes) {
  const auto* words = reinterpret_cast<const uint64_t*>(bytes.data());
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes.size() / 8; ++i) sum += words[i];
  return sum;
}

// Put and Get + read of objects of `size` bytes in a store whose arena is smaller than them, so
// each lives in a fallback file; next to memcpy and a read of touched memory of the same bytes.
void FallbackFigures(const std::string& store_binary, const std::string& dir, uint64_t size,
                     int reps, const std::vector<uint8_t>& src, std::vector<uint8_t>& dst) {
  std::string socket = dir + "/fallback-store.sock";
  airt::bench::DaemonProcess store({store_binary, "--socket=" + socket, "--capacity=16M",
                                    "--fallback-dir=" + dir + "/fallback", "--no-prefault"},
                                   dir + "/fallback-store.log");
  std::unique_ptr<StoreClient> client =
      airt::bench::ConnectWithRetry(socket, std::chrono::seconds(10));
  PutFigures put = MeasurePut(*client, src, size, reps, size, /*api_put=*/true);
  double memcpy_gbps = MemcpyGbps(src, dst, size, reps);

  ObjectId id = NextId();
  if (auto s = client->Put(id, std::span<const uint8_t>(src.data(), size)); !s.ok()) {
    Die(s, "fallback put");
  }
  uint64_t sink = 0;
  Clock::duration get{}, read{};
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    {
      auto pin = client->Get(id, 0);
      if (!pin.ok()) Die(pin.status(), "fallback get");
      sink += SumWords(pin->data());
    }
    get += Clock::now() - start;
    start = Clock::now();
    sink += SumWords(std::span<const uint8_t>(dst.data(), size));
    read += Clock::now() - start;
  }
  auto gbps = [&](Clock::duration d) {
    return static_cast<double>(size) * reps / Seconds(d) / 1e9;
  };
  std::printf("\nfallback memory (objects of %llu MiB, a 16 MiB arena; checksum %llu)\n",
              static_cast<unsigned long long>(size >> 20),
              static_cast<unsigned long long>(sink & 0xff));
  std::printf("%-28s %9s %14s %7s\n", "", "airt GB/s", "baseline GB/s", "ratio");
  std::printf("%-28s %9.2f %14.2f %7.2f   (baseline: memcpy into touched memory)\n", "Put",
              put.gbps, memcpy_gbps, put.gbps / memcpy_gbps);
  std::printf("%-28s %9.2f %14.2f %7.2f   (baseline: reading touched memory)\n",
              "Get + read every byte", gbps(get), gbps(read), gbps(get) / gbps(read));
  (void)client->Delete(id);
}

}  // namespace

int main(int argc, char** argv) {
  airt::InitProcess("objectstore_bench");
  std::string store_binary = airt::bench::DefaultStoreBinary();
  bool quick = false;
  uint64_t spin_us = airt::objectstore::StoreOptions().poll_spin_us;
  airt::FlagSet flags("objectstore_bench");
  flags.AddString("store-binary", &store_binary, "the airt-store daemon to measure");
  flags.AddBool("quick", &quick, "fewer repetitions and no 1 GiB objects (for CI smoke runs)");
  flags.AddUint64("poll-spin-us", &spin_us, "the store's --poll-spin-us");
  if (airt::Status s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "%s\n%s", s.message().c_str(), flags.Usage().c_str());
    return s.code() == airt::Code::kCancelled ? 0 : 2;
  }

  const uint64_t kGiB = 1ull << 30, kMiB = 1ull << 20;
  const uint64_t biggest = quick ? 64 * kMiB : kGiB;
  const uint64_t capacity = biggest + 512 * kMiB;
  airt::bench::ScratchDir dir;
  std::string socket = dir.path() + "/store.sock";
  airt::bench::DaemonProcess store(
      {store_binary, "--socket=" + socket, "--capacity=" + std::to_string(capacity),
       "--poll-spin-us=" + std::to_string(spin_us), "--max-objects=200000"},
      dir.path() + "/store.log");
  std::unique_ptr<StoreClient> connected =
      airt::bench::ConnectWithRetry(socket, std::chrono::seconds(10));
  StoreClient& client = *connected;

  std::printf(
      "objectstore_bench: airt-store in its own process, arena %.1f GiB, %u cores, "
      "poll spin %llu us\n",
      static_cast<double>(capacity) / kGiB, std::thread::hardware_concurrency(),
      static_cast<unsigned long long>(spin_us));
  auto warm_start = Clock::now();
  client.Warm();
  // Let the store finish its own background prefault, so it does not compete for the cores.
  for (;;) {
    auto stats = client.Stats();
    if (!stats.ok()) Die(stats.status(), "stats");
    if (stats->prefaulted_bytes >= stats->prefault_target_bytes) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<uint8_t> src(biggest), dst(std::max<uint64_t>(biggest, 256 * kMiB));
  for (size_t i = 0; i < src.size(); i += 4096) src[i] = static_cast<uint8_t>(i >> 12);
  std::memset(dst.data(), 1, dst.size());  // "touched memory" for the baseline
  std::printf("warm-up (arena mapped and populated, buffers touched): %.2f s\n\n",
              Seconds(Clock::now() - warm_start));

  std::printf("%-8s %9s %12s %7s   %s\n", "put", "Put GB/s", "memcpy GB/s", "ratio",
              "| Create+memcpy+Seal GB/s, ratio (Create / memcpy / Seal us per put)");
  struct PutCase {
    uint64_t size;
    int reps;
  };
  std::vector<PutCase> cases = {{kMiB, quick ? 200 : 2000}, {64 * kMiB, quick ? 4 : 30}};
  if (!quick) cases.push_back({kGiB, 3});
  for (auto [size, reps] : cases) {
    uint64_t window = std::min<uint64_t>(256 * kMiB, capacity - size);
    if (size >= window) window = size;
    PutFigures put = MeasurePut(client, src, size, reps, window, /*api_put=*/true);
    PutFigures raw = MeasurePut(client, src, size, reps, window, /*api_put=*/false);
    double memcpy_gbps = MemcpyGbps(src, dst, size, reps);
    std::string name = size >= kGiB ? "1 GiB" : std::to_string(size / kMiB) + " MiB";
    std::printf("%-8s %9.2f %12.2f %7.2f   | %.2f, %.2f (%.1f / %.1f / %.1f)\n", name.c_str(),
                put.gbps, memcpy_gbps, put.gbps / memcpy_gbps, raw.gbps, raw.gbps / memcpy_gbps,
                raw.create_us, raw.copy_us, raw.seal_us);
  }

  std::printf("\n%-28s %14s %16s %12s\n", "Get+Release (local, sealed)", "median us", "p99 us",
              "ops/s");
  for (uint64_t size : {uint64_t{64}, 64 * kMiB}) {
    ObjectId id = NextId();
    auto object = client.Create(id, size);
    if (!object.ok()) Die(object.status(), "create");
    if (auto s = client.Seal(id); !s.ok()) Die(s, "seal");
    Latency l = GetReleaseLatency(client, id, quick ? 20000 : 200000);
    std::string name = size < kMiB ? "64 B object" : "64 MiB object";
    std::printf("%-28s %14.3f %16.3f %12.0f\n", name.c_str(), l.median_us, l.p99_us, l.ops_per_s);
    (void)client.Delete(id);
  }

  int reps = quick ? 5000 : 50000;
  double create_seal = CreateSealOps(client, reps);
  double round_trip = SocketRoundTripOps(reps);
  std::printf("\n%-28s %14s %16s\n", "1 KiB objects", "airt ops/s", "baseline ops/s");
  std::printf("%-28s %14.0f %16.0f   (baseline: one Unix-socket round trip)\n", "Create+Seal",
              create_seal, round_trip);

  connected.reset();
  FallbackFigures(store_binary, dir.path(), quick ? 48 * kMiB : 256 * kMiB, quick ? 3 : 10, src,
                  dst);
  return 0;
}
