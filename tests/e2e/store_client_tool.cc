// airt_store_client_tool: a real store client process for the e2e tests, which start it, read
// its output and kill it. Objects hold the deterministic pattern of object_pattern.h.
//
// Exit status: 0 success; 1 the bytes read differ from the pattern; 2 bad usage;
// 10 + Code for a failed store call (e.g. 15 kDeadlineExceeded, 16 kResourceExhausted), with the
// Status on stderr. Lines on stdout ("created", "waiting", "got", "verified", "checksum <hex>")
// are flushed at once so that a test can wait for them.
//
//   put <socket> <id> <size> <seed> [--secondary]        Create, fill, Seal
//   create-and-hang <socket> <id> <size>                 Create, print "created", never Seal
//   get-and-hang <socket> <id>                           print "waiting", Get (forever), print
//                                                        "got", then hold the pin forever
//   wait-get <socket> <id> <timeout ms> [<size> <seed>]  print "waiting", Get, print checksum;
//                                                        with size and seed also verify
//   read-verify <socket> <id> <size> <seed> [--sampled] [--hold-until <file>]
//                                                        Get (10 s), verify every byte (--sampled:
//                                                        one word per page, then the checksum),
//                                                        print "verified"; with --hold-until
//                                                        keep the pin until <file> exists
//   put-many <socket> <base id> <count> <size> <seed> [--vary] [--secondary]
//   verify-many <socket> <base id> <count> <size> <seed> [--vary] [--stride <n>]
//                                                        objects BatchId(base, i), see the header
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/process.h"
#include "objectstore/object_store.h"
#include "tests/e2e/object_pattern.h"

namespace {

using airt::Code;
using airt::ObjectId;
using airt::Status;
using airt::objectstore::StoreClient;
using Clock = std::chrono::steady_clock;

constexpr int kMismatch = 1;
constexpr int kUsage = 2;

int Fail(const Status& status, std::string_view what) {
  std::fprintf(stderr, "store_client_tool: %.*s: %s\n", static_cast<int>(what.size()), what.data(),
               status.ToString().c_str());
  return 10 + static_cast<int>(status.code());
}

void Say(const char* line) {
  std::printf("%s\n", line);
  std::fflush(stdout);
}

[[noreturn]] void HangForever() {
  for (;;) ::pause();
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Args {
  std::vector<std::string> positional;
  bool secondary = false;
  bool vary = false;
  bool sampled = false;
  std::string hold_until;
  uint64_t stride = 1;
};

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--secondary") {
      args->secondary = true;
    } else if (a == "--vary") {
      args->vary = true;
    } else if (a == "--sampled") {
      args->sampled = true;
    } else if (a == "--hold-until" && i + 1 < argc) {
      args->hold_until = argv[++i];
    } else if (a == "--stride" && i + 1 < argc) {
      args->stride = std::strtoull(argv[++i], nullptr, 10);
      if (args->stride == 0) return false;
    } else if (a.starts_with("--")) {
      return false;
    } else {
      args->positional.emplace_back(a);
    }
  }
  return true;
}

uint64_t Number(const std::string& s) { return std::strtoull(s.c_str(), nullptr, 10); }

// Connects without background prefaulting: the tests' objects are written or read once.
airt::Result<std::unique_ptr<StoreClient>> Connect(const std::string& socket) {
  StoreClient::Options options;
  options.prefault = false;
  return StoreClient::Connect(socket, options);
}

int Put(StoreClient& client, const ObjectId& id, uint64_t size, uint64_t seed, bool secondary) {
  auto object = client.Create(id, size, 0, secondary);
  if (!object.ok()) return Fail(object.status(), "create " + id.Hex());
  airt::e2e::FillPattern(object->data, seed);
  Status sealed = client.Seal(id);
  if (!sealed.ok()) return Fail(sealed, "seal " + id.Hex());
  return 0;
}

// Checks a pinned object against the pattern; prints where it differs.
int Verify(std::span<const uint8_t> data, const ObjectId& id, uint64_t size, uint64_t seed,
           bool sampled) {
  if (data.size() != size) {
    std::fprintf(stderr, "store_client_tool: %s has %zu bytes, expected %" PRIu64 "\n",
                 id.Hex().c_str(), data.size(), size);
    return kMismatch;
  }
  auto start = Clock::now();
  std::optional<size_t> bad;
  if (sampled) {
    bad = airt::e2e::FirstMismatchSampled(data, seed);
    if (!bad && airt::e2e::Checksum(data) != airt::e2e::PatternChecksum(size, seed)) bad = 0;
  } else {
    bad = airt::e2e::FirstMismatch(data, seed);
  }
  if (bad) {
    std::fprintf(stderr, "store_client_tool: %s differs from the pattern at byte %zu\n",
                 id.Hex().c_str(), *bad);
    return kMismatch;
  }
  if (size > (256u << 20)) {
    std::fprintf(stderr, "store_client_tool: verified %" PRIu64 " bytes in %.2f s\n", size,
                 SecondsSince(start));
  }
  return 0;
}

int Main(int argc, char** argv) {
  Args args;
  if (argc < 2 || !ParseArgs(argc, argv, &args) || args.positional.size() < 2) {
    std::fprintf(stderr, "usage: see the comment at the top of store_client_tool.cc\n");
    return kUsage;
  }
  const std::string command = argv[1];
  const std::vector<std::string>& p = args.positional;
  auto id = ObjectId::FromHex(p[1]);
  if (!id.ok()) return Fail(id.status(), "parse id");
  auto want = [&](size_t n) { return p.size() == n; };

  auto connected = Connect(p[0]);
  if (!connected.ok()) return Fail(connected.status(), "connect to " + p[0]);
  StoreClient& client = **connected;

  if (command == "put" && want(4)) {
    auto start = Clock::now();
    int rc = Put(client, *id, Number(p[2]), Number(p[3]), args.secondary);
    if (rc == 0 && Number(p[2]) > (256u << 20)) {
      std::fprintf(stderr, "store_client_tool: put %s bytes in %.2f s\n", p[2].c_str(),
                   SecondsSince(start));
    }
    return rc;
  }
  if (command == "create-and-hang" && want(3)) {
    auto object = client.Create(*id, Number(p[2]));
    if (!object.ok()) return Fail(object.status(), "create " + id->Hex());
    airt::e2e::FillPattern(object->data, 0);  // touch the pages, as a real writer would
    Say("created");
    HangForever();
  }
  if (command == "get-and-hang" && want(2)) {
    Say("waiting");
    auto pin = client.Get(*id, -1);
    if (!pin.ok()) return Fail(pin.status(), "get " + id->Hex());
    Say("got");
    HangForever();
  }
  if (command == "wait-get" && (want(3) || want(5))) {
    Say("waiting");
    auto pin = client.Get(*id, static_cast<int64_t>(std::strtoll(p[2].c_str(), nullptr, 10)));
    if (!pin.ok()) return Fail(pin.status(), "get " + id->Hex());
    if (want(5)) {
      if (int rc = Verify(pin->data(), *id, Number(p[3]), Number(p[4]), false); rc != 0) return rc;
    }
    std::printf("checksum %016" PRIx64 "\n", airt::e2e::Checksum(pin->data()));
    std::fflush(stdout);
    return 0;
  }
  if (command == "read-verify" && want(4)) {
    auto pin = client.Get(*id, 10000);
    if (!pin.ok()) return Fail(pin.status(), "get " + id->Hex());
    if (int rc = Verify(pin->data(), *id, Number(p[2]), Number(p[3]), args.sampled); rc != 0) {
      return rc;
    }
    Say("verified");
    if (!args.hold_until.empty()) {
      auto deadline = Clock::now() + std::chrono::seconds(120);
      while (::access(args.hold_until.c_str(), F_OK) != 0) {
        if (Clock::now() > deadline)
          return Fail(Status(Code::kDeadlineExceeded, "no " + args.hold_until), "hold");
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    return 0;
  }
  if ((command == "put-many" || command == "verify-many") && want(5)) {
    const auto count = static_cast<uint32_t>(Number(p[2]));
    const uint64_t size = Number(p[3]), seed = Number(p[4]);
    auto start = Clock::now();
    for (uint32_t i = 0; i < count; i += (command == "put-many" ? 1 : args.stride)) {
      ObjectId oid = airt::e2e::BatchId(*id, i);
      uint64_t n = airt::e2e::BatchSize(size, i, args.vary);
      uint64_t s = airt::e2e::BatchSeed(seed, i);
      if (command == "put-many") {
        if (int rc = Put(client, oid, n, s, args.secondary); rc != 0) {
          std::fprintf(stderr, "store_client_tool: failed at object %u of %u\n", i, count);
          return rc;
        }
        continue;
      }
      auto pin = client.Get(oid, 10000);
      if (!pin.ok()) return Fail(pin.status(), "get object " + std::to_string(i) + " " + oid.Hex());
      if (int rc = Verify(pin->data(), oid, n, s, false); rc != 0) return rc;
    }
    std::fprintf(stderr, "store_client_tool: %s of %u objects took %.2f s\n", command.c_str(),
                 count, SecondsSince(start));
    return 0;
  }
  std::fprintf(stderr, "store_client_tool: bad command or arguments: %s\n", command.c_str());
  return kUsage;
}

}  // namespace

int main(int argc, char** argv) {
  airt::InitProcess("store_client_tool");
  return Main(argc, argv);
}
