#include "bench/bench_support.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <sys/prctl.h>
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

}  // namespace airt::bench
