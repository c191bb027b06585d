#include "worker/internal/child_processes.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>

#include "common/logging.h"

extern char** environ;

namespace airt::worker {
namespace {

// Writes from the child, where only async-signal-safe calls are allowed.
void ChildWrite(const char* text, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, text, n);
    if (w <= 0) return;
    text += w;
    n -= static_cast<size_t>(w);
  }
}

std::vector<std::string> ChildEnvironment(const ChildCommand& command) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto& [name, value] : command.env) {
      if (entry.size() > name.size() && entry.starts_with(name) && entry[name.size()] == '=') {
        replaced = true;
      }
    }
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [name, value] : command.env) env.emplace_back(name).append("=").append(value);
  return env;
}

}  // namespace

Result<pid_t> ForkExecLauncher::Launch(const ChildCommand& command) {
  if (::access(command.binary.c_str(), X_OK) != 0) {
    return FailedPrecondition("cannot run the worker binary '" + command.binary +
                              "': " + std::strerror(errno) + " (set --worker-binary)");
  }
  int log = ::open(command.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return ErrnoStatus("cannot open the worker log " + command.log_path, errno);

  // Everything the child needs, built before fork.
  std::vector<std::string> argv_strings = {command.binary};
  argv_strings.insert(argv_strings.end(), command.args.begin(), command.args.end());
  std::vector<char*> argv;
  argv.reserve(argv_strings.size() + 1);
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = ChildEnvironment(command);
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string exec_failed = "airt-node: cannot exec " + command.binary + "\n";
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    ::close(log);
    return ErrnoStatus("fork for " + command.binary, err);
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the node died before the prctl
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGCHLD, SIG_DFL);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    ::close_range(3, ~0U, 0);  // no descriptor of the node's leaks into the worker
    ::execve(argv[0], argv.data(), envp.data());
    ChildWrite(exec_failed.data(), exec_failed.size());
    ::_exit(127);
  }
  ::close(log);
  return pid;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) +
           (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

Result<std::unique_ptr<ChildReaper>> ChildReaper::Open(kj::LowLevelAsyncIoProvider& io,
                                                       kj::Timer& timer,
                                                       kj::Duration sweep_interval) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigset_t current;
  if (::pthread_sigmask(SIG_BLOCK, nullptr, &current) == 0 && !sigismember(&current, SIGCHLD)) {
    AIRT_LOG(WARNING) << "SIGCHLD is not blocked on the node's event loop thread: worker exits "
                         "are noticed only by the periodic sweep";
  }
  int fd = ::signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return ErrnoStatus("signalfd for SIGCHLD", errno);
  using Flags = kj::LowLevelAsyncIoProvider;
  auto stream =
      io.wrapInputFd(fd, Flags::TAKE_OWNERSHIP | Flags::ALREADY_CLOEXEC | Flags::ALREADY_NONBLOCK);
  auto reaper =
      std::unique_ptr<ChildReaper>(new ChildReaper(kj::mv(stream), timer, sweep_interval));
  reaper->run_ = reaper->Loop().eagerlyEvaluate([](kj::Exception&& e) {
    AIRT_LOG(ERROR) << "the child reaper stopped: " << e.getDescription().cStr();
  });
  return reaper;
}

ChildReaper::ChildReaper(kj::Own<kj::AsyncInputStream> signals, kj::Timer& timer,
                         kj::Duration sweep)
    : signals_(kj::mv(signals)), timer_(timer), sweep_(sweep) {}

ChildReaper::~ChildReaper() { run_ = nullptr; }

void ChildReaper::Watch(pid_t pid, OnExit on_exit) { watched_[pid] = std::move(on_exit); }

void ChildReaper::Forget(pid_t pid) { watched_.erase(pid); }

kj::Promise<void> ChildReaper::Loop() {
  // A signal or the sweep, whichever comes first; either way every watched pid is checked.
  kj::Promise<size_t> signal = signals_->tryRead(buffer_, sizeof buffer_, sizeof buffer_);
  kj::Promise<size_t> sweep = timer_.afterDelay(sweep_).then([] { return size_t{0}; });
  return signal.exclusiveJoin(kj::mv(sweep)).then([this](size_t) {
    ReapExited();
    return Loop();
  });
}

void ChildReaper::ReapExited() {
  std::vector<pid_t> pids;
  for (const auto& [pid, fn] : watched_) pids.push_back(pid);
  for (pid_t pid : pids) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == 0) continue;
    auto it = watched_.find(pid);
    if (it == watched_.end()) continue;  // forgotten by an earlier callback
    OnExit on_exit = std::move(it->second);
    watched_.erase(it);
    if (r < 0) {
      // ECHILD: someone else reaped it; it is gone all the same.
      AIRT_LOG(WARNING) << "waitpid(" << pid << "): " << std::strerror(errno);
      status = 0;
    }
    on_exit(status);
  }
}

}  // namespace airt::worker
