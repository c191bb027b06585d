#include "cli/session.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <sys/wait.h>

namespace airt::cli {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

bool IsRunning(const Daemon& d) {
  if (d.pid <= 0 || ::kill(d.pid, 0) != 0) return false;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/" + std::to_string(d.pid) + "/exe", ec);
  if (ec) return false;
  // A binary rebuilt while running shows as "<path> (deleted)".
  std::string shown = exe.string();
  return shown == d.binary || shown == d.binary + " (deleted)";
}

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

}  // namespace

Result<std::string> Session::Launch(const std::string& name, const std::vector<std::string>& argv,
                                    const std::string& log_path, const std::string& ready_prefix,
                                    std::chrono::seconds timeout) {
  std::error_code ec;
  fs::create_directories(dir_ + "/pids", ec);
  if (ec) return ErrnoStatus("create " + dir_ + "/pids", ec.value());
  fs::create_directories(fs::path(log_path).parent_path(), ec);
  std::string binary = fs::weakly_canonical(argv.at(0), ec).string();
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", errno);
  if (pid == 0) {
    ::setsid();  // outlive this command and its terminal
    int out = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || null < 0) ::_exit(127);
    ::dup2(null, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(binary.c_str(), args.data());
    ::_exit(127);
  }
  {
    std::ofstream pidfile(dir_ + "/pids/" + name + ".pid");
    pidfile << pid << "\n" << binary << "\n";
  }
  auto deadline = Clock::now() + timeout;
  for (;;) {
    std::string log = ReadAll(log_path);
    for (size_t start = 0, nl; (nl = log.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string line = log.substr(start, nl - start);
      if (line.rfind(ready_prefix, 0) == 0) return line.substr(ready_prefix.size());
    }
    int status;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      ::unlink((dir_ + "/pids/" + name + ".pid").c_str());
      return Unavailable(argv[0] + " exited before it was ready; from " + log_path + ":" +
                         LastLines(ReadAll(log_path), 5));
    }
    if (Clock::now() >= deadline) {
      return DeadlineExceeded(argv[0] + " was not ready after " + std::to_string(timeout.count()) +
                              " s; see " + log_path);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status Session::SaveHeadAddress(const std::string& address) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  std::ofstream out(dir_ + "/head_address");
  out << address << "\n";
  return out ? Status::Ok() : Internal("cannot write " + dir_ + "/head_address");
}

std::optional<std::string> Session::HeadAddress() const {
  std::ifstream in(dir_ + "/head_address");
  std::string address;
  if (!(in >> address)) return std::nullopt;
  return address;
}

std::vector<Daemon> Session::Daemons() const {
  std::vector<Daemon> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_ + "/pids", ec)) {
    if (entry.path().extension() != ".pid") continue;
    std::ifstream in(entry.path());
    Daemon d;
    d.name = entry.path().stem().string();
    if (in >> d.pid >> d.binary) out.push_back(d);
  }
  return out;
}

int StopOne(const Daemon& d, Clock::time_point deadline) {
  if (!IsRunning(d)) return 0;
  ::kill(d.pid, SIGTERM);
  while (IsRunning(d) && Clock::now() < deadline) {
    ::waitpid(d.pid, nullptr, WNOHANG);  // reaps it when it is our child (tests)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (IsRunning(d)) ::kill(d.pid, SIGKILL);
  return 1;
}

int Session::StopAll(std::chrono::seconds grace) {
  std::vector<Daemon> daemons = Daemons();
  auto deadline = Clock::now() + grace;
  int running = 0;
  // Nodes first, so they can tell the head they are leaving.
  for (const Daemon& d : daemons) {
    if (d.name != "head") running += StopOne(d, deadline);
  }
  for (const Daemon& d : daemons) {
    if (d.name == "head") running += StopOne(d, deadline);
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
  return running;
}

}  // namespace airt::cli
