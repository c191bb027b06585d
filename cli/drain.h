// `airt drain NODE [--deadline S] [--reason TEXT] [--wait]` (docs/cluster.md "Draining a node"):
// the head marks the node draining and tells it; the node takes no new leases, lets what runs
// finish for at most the deadline, stops the rest, and leaves the cluster.
#pragma once

#include <cstdint>
#include <string>

#include "common/ids.h"
#include "common/status.h"

namespace airt::cli {

// An alive node of the head's view, found by a prefix of its id (as `airt status` shows it).
struct AliveNode {
  NodeId id;
  std::string host;
  uint16_t port = 0;  // its Node service
};

// kNotFound when no alive node's id starts with `prefix`, or when several do (give more of it);
// the head's error when it cannot be asked. `head_address`: "host:port".
Result<AliveNode> FindAliveNode(const std::string& head_address, const std::string& prefix);

// The head's address: `address` when given, else the one `airt start` saved under `temp_dir`,
// else $AIRT_ADDRESS; "" when none.
std::string ResolveHeadAddress(std::string address, const std::string& temp_dir);

// `ms` (milliseconds since the epoch) as "YYYY-MM-DD HH:MM:SS UTC".
std::string FormatUtc(uint64_t ms);

int DrainCommand(int argc, char** argv);

}  // namespace airt::cli
