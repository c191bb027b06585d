// transfer_bench: a cross-node pull next to a raw TCP copy of the same bytes, in the same run.
// Two airt-store processes (node A serving transfers, node B), an object put on A, then pulled
// into B by this process (ObjectPuller: B's copy is created in B's shared memory and read from
// the socket straight into it). The baseline copies the same number of bytes over a loopback TCP
// connection from a child process's buffer into this process's buffer.
// Prints figures only; never fails on time.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "bench/bench_support.h"
#include "common/flags.h"
#include "common/process.h"
#include "objectstore/transfer.h"

namespace {

using airt::ObjectId;
using airt::bench::Clock;
using airt::bench::Die;
using airt::bench::Seconds;

// Copies `size` bytes `reps` times from a child process to this one over loopback TCP, as a
// stream of one connection per copy (as a pull does). Returns GB/s over the receive side.
double RawTcpGbps(uint64_t size, int reps) {
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::listen(listener, 4);
  socklen_t len = sizeof(addr);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  pid_t parent = ::getpid();
  pid_t child = ::fork();
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    std::vector<uint8_t> src(size, 7);  // touched
    for (int r = 0; r < reps; ++r) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) ::_exit(1);
      for (uint64_t sent = 0; sent < size;) {
        ssize_t n = ::send(fd, src.data() + sent, size - sent, 0);
        if (n <= 0) ::_exit(1);
        sent += static_cast<uint64_t>(n);
      }
      char ack;
      ::recv(fd, &ack, 1, MSG_WAITALL);
      ::close(fd);
    }
    ::_exit(0);
  }
  std::vector<uint8_t> dst(size, 1);  // touched
  Clock::duration total{};
  for (int r = 0; r < reps; ++r) {
    int fd = ::accept(listener, nullptr, nullptr);
    auto start = Clock::now();
    for (uint64_t got = 0; got < size;) {
      ssize_t n = ::recv(fd, dst.data() + got, size - got, 0);
      if (n <= 0) Die(airt::ErrnoStatus("recv", errno), "raw TCP baseline");
      got += static_cast<uint64_t>(n);
    }
    total += Clock::now() - start;
    char ack = 1;
    ::send(fd, &ack, 1, 0);
    ::close(fd);
  }
  ::waitpid(child, nullptr, 0);
  ::close(listener);
  return static_cast<double>(size) * reps / Seconds(total) / 1e9;
}

}  // namespace

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
    double raw_gbps = RawTcpGbps(size, reps);
    std::string name = size >= kGiB ? "1 GiB" : std::to_string(size / kMiB) + " MiB";
    std::printf("%-22s %12.2f %14.2f %8.2f\n", name.c_str(), airt_gbps, raw_gbps,
                airt_gbps / raw_gbps);
    (void)a->Delete(id);
  }
  return 0;
}
