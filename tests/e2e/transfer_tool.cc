// airt_transfer_tool: a real puller process for the transfer e2e tests. It connects to its node's
// store and pulls objects from another node's transfer service (ObjectPuller) into it.
//
// Exit status: 0 success; 2 bad usage; 10 + Code for a failed call (e.g. 12 kNotFound,
// 17 kUnavailable), with the Status on stderr. Lines on stdout are flushed at once so that a test
// can wait for them.
//
//   pull <socket> <peer host:port> <id>[,<id>...] <timeout ms>
//       print "pulling", Pull (several ids: pipelined on one connection), print "pulled <n>"
//       (n: the bytes of the local copies, data and metadata)
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/process.h"
#include "objectstore/object_store.h"
#include "objectstore/transfer.h"

namespace {

using airt::ObjectId;
using airt::Status;
using airt::objectstore::ObjectPuller;
using airt::objectstore::StoreClient;
using Clock = std::chrono::steady_clock;

constexpr int kUsage = 2;

int Fail(const Status& status, std::string_view what) {
  std::fprintf(stderr, "transfer_tool: %.*s: %s\n", static_cast<int>(what.size()), what.data(),
               status.ToString().c_str());
  return 10 + static_cast<int>(status.code());
}

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int Pull(const std::string& socket, const std::string& peer, const std::string& hex_ids,
         int64_t timeout_ms) {
  std::vector<ObjectId> ids;
  for (size_t begin = 0; begin <= hex_ids.size();) {
    size_t end = std::min(hex_ids.find(',', begin), hex_ids.size());
    auto id = ObjectId::FromHex(std::string_view(hex_ids).substr(begin, end - begin));
    if (!id.ok()) return Fail(id.status(), "parse id");
    ids.push_back(*id);
    begin = end + 1;
  }
  StoreClient::Options options;
  options.prefault = false;  // the pulled bytes are written once, by the kernel
  auto client = StoreClient::Connect(socket, options);
  if (!client.ok()) return Fail(client.status(), "connect to " + socket);

  ObjectPuller puller(client->get());
  Say("pulling");
  auto start = Clock::now();
  Status pulled = puller.Pull(peer, ids, timeout_ms);
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!pulled.ok()) return Fail(pulled, "pull " + hex_ids + " from " + peer);

  auto pins = (*client)->Get(ids, 0);  // the copies are sealed here now
  if (!pins.ok()) return Fail(pins.status(), "get the pulled copies");
  uint64_t bytes = 0;
  for (const auto& pin : *pins) bytes += pin.data().size() + pin.metadata().size();
  std::fprintf(stderr, "transfer_tool: pulled %" PRIu64 " bytes in %.3f s (%.0f MB/s)\n", bytes,
               seconds, seconds > 0 ? bytes / seconds / 1e6 : 0.0);
  Say("pulled " + std::to_string(bytes));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  airt::InitProcess("transfer_tool");
  if (argc == 6 && std::string_view(argv[1]) == "pull") {
    return Pull(argv[2], argv[3], argv[4], std::strtoll(argv[5], nullptr, 10));
  }
  std::fprintf(stderr, "usage: see the comment at the top of transfer_tool.cc\n");
  return kUsage;
}
