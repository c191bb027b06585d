// Who listens on a TCP port of this machine, for the error when the head's port is taken.
#pragma once

#include <cstdint>
#include <string>

namespace airt::head::internal {

// "redis-server (pid 1234)" for the process listening on `port` (read from /proc/net/tcp,
// /proc/net/tcp6 and /proc/<pid>/fd), "a process of another user" when the socket is found but
// not its process, "" when nothing listens there.
std::string DescribePortOwner(uint16_t port);

}  // namespace airt::head::internal
