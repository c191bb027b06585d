#include "common/daemon_process.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <sys/prctl.h>
#include <sys/wait.h>

namespace airt {
namespace {

using Clock = std::chrono::steady_clock;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The last `n` non-empty lines of `text`, each indented, for an error message.
std::string LastLines(const std::string& text, size_t n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) {
    out += "\n  | " + lines[i];
  }
  return out;
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  if (WEXITSTATUS(status) == 127) return "exit 127: could not exec";
  return "exit " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

std::vector<std::string> DaemonSearchDirs(std::initializer_list<const void*> code) {
  namespace fs = std::filesystem;
  std::vector<std::string> dirs;
  auto add = [&dirs](const fs::path& dir) {
    std::string d = dir.lexically_normal().string();
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    if (!d.empty() && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  };
  if (const char* bin = std::getenv("AIRT_BIN_DIR"); bin && *bin) add(bin);
  std::vector<fs::path> homes;
  std::error_code ec;
  if (fs::path self = fs::read_symlink("/proc/self/exe", ec); !ec) {
    homes.push_back(self.parent_path());
  }
  for (const void* address : code) {
    Dl_info info;
    if (::dladdr(address, &info) != 0 && info.dli_fname != nullptr && *info.dli_fname != '\0') {
      homes.push_back(fs::absolute(info.dli_fname, ec).parent_path());
    }
  }
  for (const fs::path& home : homes) add(home);
  // The build tree: a binary in build/<dir>/ or a library in build/api/core_worker/ finds
  // build/head/, build/worker/ and build/autoscaler/.
  for (const fs::path& home : homes) {
    for (const fs::path& up : {home.parent_path(), home.parent_path().parent_path()}) {
      add(up / "head");
      add(up / "worker");
      add(up / "autoscaler");
    }
  }
  // An install (cmake --install): libairt_driver.so in lib/ finds the daemons in bin/.
  for (const fs::path& home : homes) add(home.parent_path() / "bin");
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest = path;
    while (!rest.empty()) {
      size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) add(std::string(dir));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
  }
  return dirs;
}

Result<std::string> FindDaemonBinary(const std::string& name,
                                     const std::vector<std::string>& dirs) {
  std::string looked;
  for (const std::string& dir : dirs) {
    std::string candidate = dir + "/" + name;
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    looked += (looked.empty() ? "" : ", ") + dir;
  }
  return NotFound("no " + name + " found; looked in " + (looked.empty() ? "no folder" : looked) +
                  " ($AIRT_BIN_DIR first, then beside the program and airt's libraries, then "
                  "$PATH): set AIRT_BIN_DIR to the folder that holds airt-head and airt-node");
}

Result<pid_t> StartDaemon(const DaemonCommand& command) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(command.log_path).parent_path(), ec);
  int log = ::open(command.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) return ErrnoStatus("open " + command.log_path, errno);
  int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0) {
    int err = errno;
    ::close(log);
    return ErrnoStatus("open /dev/null", err);
  }
  // Everything the child needs, built before fork.
  std::vector<std::string> strings = command.argv;
  std::vector<char*> argv;
  for (std::string& a : strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  const bool detached = command.lifetime == DaemonLifetime::kDetached;
  const pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid == 0) {
    if (detached) {
      ::setsid();  // outlive the starter and its terminal
    } else {
      ::setpgid(0, 0);  // the terminal's Ctrl-C reaches the driver, which decides
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the starter died before the prctl
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(null, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::close_range(3, ~0U, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int err = errno;
  ::close(log);
  ::close(null);
  if (pid < 0) return ErrnoStatus("fork for " + command.argv.at(0), err);
  return pid;
}

Result<std::string> WaitForReadyLine(const DaemonCommand& command, pid_t pid,
                                     std::string_view ready_prefix,
                                     std::chrono::milliseconds timeout) {
  const std::string& name = command.argv.at(0);
  auto deadline = Clock::now() + timeout;
  for (;;) {
    std::string log = ReadAll(command.log_path);
    for (size_t start = 0, nl; (nl = log.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(log.data() + start, nl - start);
      if (line.starts_with(ready_prefix)) return std::string(line.substr(ready_prefix.size()));
    }
    int status = 0;
    pid_t reaped = ::waitpid(pid, &status, WNOHANG);
    if (reaped == pid || (reaped < 0 && errno == ECHILD)) {  // ECHILD: reaped by someone else
      std::string how = reaped == pid ? DescribeExit(status) : "reaped elsewhere";
      return Unavailable(name + " exited (" + how + ") before it was ready; from " +
                         command.log_path + ":" + LastLines(ReadAll(command.log_path), 5));
    }
    if (Clock::now() >= deadline) {
      return DeadlineExceeded(name + " was not ready after " +
                              std::to_string(timeout.count() / 1000) + " s; see " +
                              command.log_path);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool StopChild(pid_t pid, Clock::time_point deadline) {
  ::kill(pid, SIGTERM);
  for (;;) {
    pid_t reaped = ::waitpid(pid, nullptr, WNOHANG);
    if (reaped == pid || (reaped < 0 && errno != EINTR)) return true;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  return false;
}

}  // namespace airt
