#include "bench/bench_support.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <sys/prctl.h>
#include <sys/wait.h>

namespace airt::bench {

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

StoreProcess::StoreProcess(const std::string& binary, const std::vector<std::string>& args) {
  int out[2];
  if (::pipe(out) != 0) Die(ErrnoStatus("pipe", errno), "start airt-store");
  pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark
    if (::getppid() != parent) ::_exit(127);
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    std::vector<char*> argv = {const_cast<char*>(binary.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  stdout_fd_ = out[0];
}

StoreProcess::~StoreProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

Result<std::string> StoreProcess::WaitForLine(const std::string& prefix,
                                              std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    size_t start = 0;
    for (size_t nl; (nl = buffered_.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string line = buffered_.substr(start, nl - start);
      if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return DeadlineExceeded("airt-store never printed '" + prefix + "'");
    pollfd p{stdout_fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[512];
    ssize_t n = ::read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) return Unavailable("airt-store exited before printing '" + prefix + "'");
    buffered_.append(buf, static_cast<size_t>(n));
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

}  // namespace airt::bench
