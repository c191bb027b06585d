#include "tests/testing/test_support.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include <sys/prctl.h>
#include <sys/wait.h>

namespace airt::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/airt-test-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ChildProcess::ChildProcess(std::vector<std::string> argv, std::string log_path) {
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    // Die with the test, even when the test itself is killed before its destructors run.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (!log_path.empty()) {
      int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
        ::close(fd);
      }
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && status_ < 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void ChildProcess::Kill(int signal) {
  if (pid_ > 0 && status_ < 0) ::kill(pid_, signal);
}

int ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  if (status_ >= 0) return status_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool ChildProcess::Running() { return Wait(std::chrono::milliseconds(0)) < 0; }

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

// The state letter and the parent of `pid`, from /proc/<pid>/stat; nullopt when it is gone.
std::optional<std::pair<char, pid_t>> ProcStat(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return std::nullopt;
  char state = 0;
  pid_t parent = -1;
  if (std::sscanf(stat.c_str() + paren + 1, " %c %d", &state, &parent) != 2) return std::nullopt;
  return std::make_pair(state, parent);
}

}  // namespace

bool ProcessRunning(pid_t pid) {
  std::optional<std::pair<char, pid_t>> stat = ProcStat(pid);
  return stat && stat->first != 'Z';
}

bool ProcessGone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

pid_t ParentPid(pid_t pid) {
  std::optional<std::pair<char, pid_t>> stat = ProcStat(pid);
  return stat ? stat->second : -1;
}

std::optional<std::string> LineAfter(std::string_view text, std::string_view prefix) {
  for (size_t start = 0, nl; (nl = text.find('\n', start)) != std::string_view::npos;
       start = nl + 1) {
    std::string_view line = text.substr(start, nl - start);
    if (line.substr(0, prefix.size()) == prefix) return std::string(line.substr(prefix.size()));
  }
  return std::nullopt;
}

std::optional<std::string> WaitForLine(const std::string& path, std::string_view prefix,
                                       std::chrono::milliseconds timeout, ChildProcess* process) {
  std::optional<std::string> found;
  WaitUntil(
      [&] {
        found = LineAfter(ReadFile(path), prefix);
        return found.has_value() || (process != nullptr && !process->Running());
      },
      timeout);
  return found;
}

}  // namespace airt::testing
