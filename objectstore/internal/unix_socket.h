// Unix stream sockets with file-descriptor passing, translating errno to Status once.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "common/unique_fd.h"

namespace airt::objectstore::internal {

// Binds and listens at `path` (removing a stale socket file first). Non-blocking, close-on-exec.
// kInvalidArgument when the path is too long for a sockaddr_un.
Result<UniqueFd> ListenUnix(const std::string& path);
// Connects to `path`; blocking, close-on-exec. kUnavailable when nobody listens there.
Result<UniqueFd> ConnectUnix(const std::string& path);

// Writes all of `data` on a blocking socket. kUnavailable when the peer is gone.
Status SendAll(int fd, std::string_view data);
// Reads exactly `n` bytes; spins on a non-blocking read for up to `spin_us` first (the reply
// usually arrives within microseconds), then blocks. kUnavailable on EOF.
Status RecvAll(int fd, char* out, size_t n, int spin_us = 0);

// Sends `data` with `fd_to_send` attached (SCM_RIGHTS); for a non-blocking socket too (retries
// the first byte until sent).
Status SendWithFd(int fd, std::string_view data, int fd_to_send);
// Reads exactly `n` bytes, the first of which carries a descriptor; returns it.
Result<UniqueFd> RecvWithFd(int fd, char* out, size_t n);

}  // namespace airt::objectstore::internal
