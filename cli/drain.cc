#include "cli/drain.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <thread>
#include <vector>

#include <capnp/ez-rpc.h>

#include "cli/session.h"
#include "common/flags.h"
#include "common/proto/cluster.capnp.h"
#include "common/rpc_status.h"

namespace airt::cli {
namespace {

Result<std::pair<std::string, uint16_t>> SplitAddress(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument("address '" + address + "' is not host:port");
  }
  try {
    unsigned long port = std::stoul(address.substr(colon + 1));
    if (port > 0xFFFF) throw std::out_of_range("port");
    return std::make_pair(address.substr(0, colon), static_cast<uint16_t>(port));
  } catch (const std::exception&) {
    return InvalidArgument("address '" + address + "' has no port number after ':'");
  }
}

// Whether node `id` is still alive in the head's view.
Result<bool> StillAlive(const std::string& host, uint16_t port, const NodeId& id) {
  bool alive = false;
  Status s = CatchKj([&] {
    capnp::EzRpcClient client(host, port);
    auto view = client.getMain<proto::Head>().clusterViewRequest().send().wait(
        client.getWaitScope());
    for (auto n : view.getNodes()) {
      auto bytes = n.getInfo().getNodeId();
      if (bytes.size() == NodeId::kSize && NodeId::FromRaw(bytes.begin()) == id) {
        alive = n.getAlive();
      }
    }
  });
  if (!s.ok()) return s;
  return alive;
}

}  // namespace

std::string FormatUtc(uint64_t ms) {
  std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &utc);
  return text;
}


std::string ResolveHeadAddress(std::string address, const std::string& temp_dir) {
  if (address.empty()) {
    if (auto saved = Session(temp_dir).HeadAddress()) {
      address = *saved;
    } else if (const char* env = std::getenv("AIRT_ADDRESS")) {
      address = env;
    }
  }
  return address;
}

Result<AliveNode> FindAliveNode(const std::string& head_address, const std::string& prefix) {
  AIRT_ASSIGN_OR_RETURN(auto head, SplitAddress(head_address));
  std::vector<AliveNode> matches;
  Status s = CatchKj([&] {
    capnp::EzRpcClient client(head.first, head.second);
    auto view = client.getMain<proto::Head>().clusterViewRequest().send().wait(
        client.getWaitScope());
    for (auto n : view.getNodes()) {
      auto id = n.getInfo().getNodeId();
      if (!n.getAlive() || id.size() != NodeId::kSize) continue;
      NodeId node = NodeId::FromRaw(id.begin());
      if (node.Hex().rfind(prefix, 0) != 0) continue;
      matches.push_back({node, n.getInfo().getAddress().cStr(), n.getInfo().getNodePort()});
    }
  });
  if (!s.ok()) return s.WithContext("asking the head at " + head_address);
  if (matches.size() != 1) {
    return NotFound(matches.empty() ? "no alive node's id starts with '" + prefix + "'"
                                    : "several nodes' ids start with '" + prefix +
                                          "': give more of the id");
  }
  return matches[0];
}

int DrainCommand(int argc, char** argv) {
  std::string address, temp_dir = "/tmp/airt", reason, deadline = "600";
  bool wait = false;
  FlagSet flags("airt drain NODE");
  flags.AddString("address", &address, "the head, HOST:PORT (default: as airt status)");
  flags.AddString("temp-dir", &temp_dir, "the temp folder `airt start` used");
  flags.AddString("deadline", &deadline,
                  "seconds the node's running work may take before it is stopped (default 600)");
  flags.AddString("reason", &reason, "why, shown in airt status (default: drained by airt drain)");
  flags.AddBool("wait", &wait, "return once the node has left the cluster");
  std::vector<char*> rest;
  std::vector<std::string> words;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      rest.push_back(argv[i]);
      bool takes_value = arg.find('=') == std::string::npos && arg != "--wait" &&
                         arg != "--no-wait" && arg != "--help";
      if (takes_value && i + 1 < argc) rest.push_back(argv[++i]);
    } else {
      words.push_back(arg);
    }
  }
  rest.insert(rest.begin(), argv[0]);
  if (Status s = flags.Parse(static_cast<int>(rest.size()), rest.data()); !s.ok()) {
    if (s.code() == Code::kCancelled) return std::cout << flags.Usage(), 0;
    std::cerr << "airt: " << s.message() << "\n";
    return 1;
  }
  auto fail = [](const Status& s) {
    std::cerr << "airt: " << s.message() << "\n";
    return 1;
  };
  if (words.size() != 1) {
    return fail(InvalidArgument(
        "usage: airt drain NODE [--deadline S] [--reason TEXT] [--wait] [--address HOST:PORT]"));
  }
  double seconds = 0;
  try {
    size_t used = 0;
    seconds = std::stod(deadline, &used);
    if (used != deadline.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    seconds = -1;
  }
  if (!std::isfinite(seconds) || seconds <= 0 || seconds > 7 * 24 * 3600) {
    return fail(InvalidArgument("--deadline '" + deadline +
                                "' is not a number of seconds above 0 (at most 7 days)"));
  }
  address = ResolveHeadAddress(address, temp_dir);
  if (address.empty()) {
    return fail(NotFound("no cluster started here; pass --address or set AIRT_ADDRESS"));
  }
  Result<AliveNode> node = FindAliveNode(address, words[0]);
  if (!node.ok()) return fail(node.status());
  auto head = SplitAddress(address);
  uint64_t deadline_ms = 0;
  Status s = CatchKj([&] {
    capnp::EzRpcClient client(head->first, head->second);
    auto request = client.getMain<proto::Head>().drainNodeRequest();
    request.setNodeId(capnp::Data::Reader(node->id.data(), NodeId::kSize));
    request.setReason(reason);
    request.setTimeoutMs(static_cast<uint64_t>(std::ceil(seconds * 1000)));
    deadline_ms = request.send().wait(client.getWaitScope()).getDeadlineMs();
  });
  if (!s.ok()) return fail(s);
  std::cout << "Node " << node->id.Hex().substr(0, 8) << " is draining"
            << (reason.empty() ? "" : " (" + reason + ")")
            << ": it takes no new work and leaves the cluster once its running work is done, "
            << "stopping what still runs at " << FormatUtc(deadline_ms) << ".\n";
  if (!wait) return 0;
  // The node stops what still runs at the deadline and then leaves: a minute past it, something
  // is wrong (the node may be hung: the head then declares it dead at its heartbeat timeout).
  auto give_up = std::chrono::system_clock::time_point(std::chrono::milliseconds(deadline_ms)) +
                 std::chrono::minutes(1);
  while (true) {
    Result<bool> alive = StillAlive(head->first, head->second, node->id);
    if (!alive.ok()) return fail(alive.status());
    if (!*alive) break;
    if (std::chrono::system_clock::now() > give_up) {
      return fail(DeadlineExceeded("node " + node->id.Hex().substr(0, 8) +
                                   " has not left a minute after its drain's deadline"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::cout << "Node " << node->id.Hex().substr(0, 8) << " has left the cluster.\n";
  return 0;
}

}  // namespace airt::cli
