#include "objectstore/internal/unix_socket.h"

#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <sys/socket.h>
#include <sys/un.h>

namespace airt::objectstore::internal {
namespace {

Result<sockaddr_un> AddressOf(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return InvalidArgument("socket path '" + path + "' is empty or longer than " +
                           std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

}  // namespace

Result<UniqueFd> ListenUnix(const std::string& path) {
  AIRT_ASSIGN_OR_RETURN(sockaddr_un addr, AddressOf(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  ::unlink(path.c_str());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoStatus("bind " + path, errno);
  }
  if (::listen(fd.get(), 128) != 0) return ErrnoStatus("listen " + path, errno);
  return fd;
}

Result<UniqueFd> ConnectUnix(const std::string& path) {
  AIRT_ASSIGN_OR_RETURN(sockaddr_un addr, AddressOf(path));
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    Status s = ErrnoStatus("connect to the object store at " + path, err);
    if (err == ENOENT || err == ECONNREFUSED) return Unavailable(s.message());
    return s;
  }
  return fd;
}

Status SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, -1);
        continue;
      }
      return ErrnoStatus("send", errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status RecvAll(int fd, char* out, size_t n, int spin_us) {
  auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  size_t got = 0;
  while (got < n) {
    bool spinning = spin_us > 0 && std::chrono::steady_clock::now() < spin_until;
    ssize_t r = ::recv(fd, out + got, n - got, spinning ? MSG_DONTWAIT : 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return Unavailable("the object store closed the connection");
    if (errno == EINTR || errno == EAGAIN) continue;
    return ErrnoStatus("recv", errno);
  }
  return Status::Ok();
}

Status SendWithFd(int fd, std::string_view data, int fd_to_send) {
  if (data.empty()) return InvalidArgument("a descriptor needs at least one byte to ride on");
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{const_cast<char*>(data.data()), data.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd_to_send, sizeof(int));
  for (;;) {
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n > 0) return SendAll(fd, data.substr(static_cast<size_t>(n)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    return ErrnoStatus("sendmsg with descriptor", errno);
  }
}

Result<UniqueFd> RecvWithFd(int fd, char* out, size_t n) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{out, n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t r;
  do {
    r = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return ErrnoStatus("recvmsg", errno);
  if (r == 0) return Unavailable("the object store closed the connection");
  UniqueFd received;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int v;
      std::memcpy(&v, CMSG_DATA(c), sizeof(int));
      received.Reset(v);
    }
  }
  AIRT_RETURN_IF_ERROR(RecvAll(fd, out + r, n - static_cast<size_t>(r)));
  if (!received.valid()) return Internal("the object store's reply carried no descriptor");
  return received;
}

}  // namespace airt::objectstore::internal
