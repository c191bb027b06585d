#include "cli/session.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/wait.h>

#include "common/daemon_process.h"

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

}  // namespace

Result<std::string> Session::Launch(const std::string& name, const std::vector<std::string>& argv,
                                    const std::string& log_path, const std::string& ready_prefix,
                                    std::chrono::seconds timeout) {
  std::error_code ec;
  fs::create_directories(dir_ + "/pids", ec);
  if (ec) return ErrnoStatus("create " + dir_ + "/pids", ec.value());
  DaemonCommand command{argv, log_path, DaemonLifetime::kDetached};
  command.argv.at(0) = fs::weakly_canonical(argv.at(0), ec).string();
  AIRT_ASSIGN_OR_RETURN(pid_t pid, StartDaemon(command));
  {
    std::ofstream pidfile(dir_ + "/pids/" + name + ".pid");
    pidfile << pid << "\n" << command.argv[0] << "\n";
  }
  Result<std::string> ready = WaitForReadyLine(command, pid, ready_prefix, timeout);
  // One that exited is forgotten; one not ready yet stays recorded, for `airt stop`.
  if (ready.status().code() == Code::kUnavailable) {
    ::unlink((dir_ + "/pids/" + name + ".pid").c_str());
  }
  return ready;
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
  // The autoscaler first (it stops the nodes it launched), then the nodes, so they can tell the
  // head they are leaving.
  for (const Daemon& d : daemons) {
    if (d.name == "autoscaler") running += StopOne(d, deadline);
  }
  for (const Daemon& d : daemons) {
    if (d.name != "head" && d.name != "autoscaler") running += StopOne(d, deadline);
  }
  for (const Daemon& d : daemons) {
    if (d.name == "head") running += StopOne(d, deadline);
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
  return running;
}

}  // namespace airt::cli
