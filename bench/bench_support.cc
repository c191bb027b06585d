#include "bench/bench_support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

namespace airt::bench {

using namespace std::chrono_literals;

void Die(const Status& status, const std::string& what) {
  std::fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what.c_str(),
               status.ToString().c_str());
  std::exit(1);
}

std::string DefaultStoreBinary() {
  std::filesystem::path self = std::filesystem::canonical("/proc/self/exe");
  return (self.parent_path().parent_path() / "objectstore" / "airt-store").string();
}

ScratchDir::ScratchDir() {
  char pattern[] = "/tmp/airt-bench-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) Die(ErrnoStatus("mkdtemp", errno), "scratch folder");
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

DaemonProcess::DaemonProcess(std::vector<std::string> argv, std::string log)
    : log_(std::move(log)) {
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) Die(ErrnoStatus("open " + log_, errno), "start " + argv[0]);
  pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
    if (::getppid() != parent) ::_exit(127);
    ::dup2(fd, STDOUT_FILENO);
    ::dup2(fd, STDERR_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fd);
  if (pid_ < 0) Die(ErrnoStatus("fork", errno), "start " + argv[0]);
}

DaemonProcess::~DaemonProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  auto deadline = Clock::now() + 10s;
  while (::waitpid(pid_, nullptr, WNOHANG) == 0) {
    if (Clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(5ms);
  }
}

Result<std::string> DaemonProcess::WaitForLine(const std::string& prefix,
                                               std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    std::string text = ReadFile(log_);
    for (size_t start = 0, nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (text.compare(start, prefix.size(), prefix) == 0) {
        return text.substr(start + prefix.size(), nl - start - prefix.size());
      }
    }
    std::string tail = text.size() > 2000 ? text.substr(text.size() - 2000) : text;
    if (int status = 0; ::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      std::string how = !WIFEXITED(status) ? std::string("signal ") + strsignal(WTERMSIG(status))
                        : WEXITSTATUS(status) == 127
                            ? std::string("exit 127: could not exec")
                            : "exit " + std::to_string(WEXITSTATUS(status));
      return Unavailable("exited (" + how + ") before printing '" + prefix + "'; its log:\n" +
                         tail);
    }
    if (Clock::now() >= deadline) {
      return DeadlineExceeded("never printed '" + prefix + "'; its log:\n" + tail);
    }
    std::this_thread::sleep_for(5ms);
  }
}

std::unique_ptr<objectstore::StoreClient> ConnectWithRetry(const std::string& socket,
                                                           std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto client = objectstore::StoreClient::Connect(socket);
    if (client.ok()) return std::move(*client);
    if (Clock::now() >= deadline) Die(client.status(), "connect to airt-store at " + socket);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Result<std::string> NodeStoreSocket(const std::string& temp_dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(temp_dir, ec)) {
    auto candidate = entry.path() / "store.sock";
    if (entry.path().filename().string().rfind("node-", 0) == 0 &&
        std::filesystem::exists(candidate)) {
      return candidate.string();
    }
  }
  return NotFound("no node store socket under " + temp_dir);
}

Status WaitForWarmStore(const std::string& socket) {
  AIRT_ASSIGN_OR_RETURN(auto client,
                        objectstore::StoreClient::Connect(
                            socket, objectstore::StoreClient::Options{.prefault = false}));
  for (;;) {
    AIRT_ASSIGN_OR_RETURN(objectstore::StoreStats stats, client->Stats());
    if (stats.prefaulted_bytes >= stats.prefault_target_bytes) return Status::Ok();
    std::this_thread::sleep_for(50ms);
  }
}

namespace {

// The sending side of RawTcpCopyGbps, in the child: `reps` connections to `addr`, each sending
// all of `src` and waiting for a one-byte acknowledgement. Never returns.
[[noreturn]] void SendCopies(const sockaddr_in& addr, const std::vector<uint8_t>& src, int reps) {
  for (int r = 0; r < reps; ++r) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::_exit(1);
    }
    for (uint64_t sent = 0; sent < src.size();) {
      ssize_t n = ::send(fd, src.data() + sent, src.size() - sent, 0);
      if (n <= 0) ::_exit(1);
      sent += static_cast<uint64_t>(n);
    }
    char ack;
    ::recv(fd, &ack, 1, MSG_WAITALL);
    ::close(fd);
  }
  ::_exit(0);
}

}  // namespace

Result<double> RawTcpCopyGbps(uint64_t size, int reps) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return ErrnoStatus("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listener, 4) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Status failed = ErrnoStatus("loopback listener", errno);
    ::close(listener);
    return failed;
  }
  // The source is touched before the fork (the child only reads it); the destination after it,
  // else each page written would first be copied (copy-on-write after a fork).
  std::vector<uint8_t> src(size, 7);
  pid_t parent = ::getpid();
  pid_t child = ::fork();
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    SendCopies(addr, src, reps);
  }
  if (child < 0) {
    Status failed = ErrnoStatus("fork", errno);
    ::close(listener);
    return failed;
  }
  std::vector<uint8_t>().swap(src);  // the child has its own
  std::vector<uint8_t> dst(size, 1);
  Status received = Status::Ok();
  Clock::duration total{};
  for (int r = 0; r < reps && received.ok(); ++r) {
    // The child connects at once; a minute without it means it died before connecting.
    pollfd ready{.fd = listener, .events = POLLIN, .revents = 0};
    if (::poll(&ready, 1, 60000) != 1) {
      received = Unavailable("the sending process never connected");
      break;
    }
    int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) {
      received = ErrnoStatus("accept", errno);
      break;
    }
    auto start = Clock::now();
    for (uint64_t got = 0; got < size;) {
      ssize_t n = ::recv(fd, dst.data() + got, size - got, 0);
      if (n <= 0) {
        received = n == 0 ? Unavailable("the sending process closed the connection early")
                          : ErrnoStatus("recv", errno);
        break;
      }
      got += static_cast<uint64_t>(n);
    }
    total += Clock::now() - start;
    char ack = 1;
    (void)::send(fd, &ack, 1, MSG_NOSIGNAL);
    ::close(fd);
  }
  if (!received.ok()) ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(listener);
  if (!received.ok()) return received.WithContext("raw TCP copy over loopback");
  return static_cast<double>(size) * reps / Seconds(total) / 1e9;
}

}  // namespace airt::bench
