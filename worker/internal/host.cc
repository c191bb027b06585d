#include "worker/internal/host.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "gpu/gpu_plugin.h"

namespace airt::worker {
namespace {

constexpr char kPluginFile[] = "libairt_gpu_plugin.so";
constexpr char kWorkerFile[] = "airt-worker";
constexpr char kPythonFile[] = "python3";

uint64_t CpuCount() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
    return static_cast<uint64_t>(CPU_COUNT(&set));
  }
  unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? n : 1;
}

uint64_t PhysicalMemory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

}  // namespace

std::vector<std::string> DefaultGpuPluginPaths() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  fs::path dir = self.parent_path();
  return {(dir / kPluginFile).string(), (dir.parent_path() / "gpu" / kPluginFile).string(),
          (dir.parent_path() / "lib" / kPluginFile).string()};
}

std::vector<std::string> DefaultWorkerBinaryPaths() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  fs::path dir = self.parent_path();
  return {(dir / kWorkerFile).string(), (dir.parent_path() / "api" / kWorkerFile).string()};
}

std::string DefaultWorkerBinary() {
  std::vector<std::string> candidates = DefaultWorkerBinaryPaths();
  for (const std::string& candidate : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  }
  std::string looked;
  for (const std::string& c : candidates) looked += (looked.empty() ? "" : ", ") + c;
  AIRT_LOG(WARNING) << "no " << kWorkerFile << " found (looked at " << looked
                    << "): leases will fail until --worker-binary names one";
  return candidates.empty() ? std::string(kWorkerFile) : candidates.front();
}

std::string ChooseGpuPlugin(const std::string& path) {
  if (!path.empty()) return path;
  std::vector<std::string> candidates = DefaultGpuPluginPaths();
  for (const std::string& candidate : candidates) {
    std::error_code ec;
    if (std::filesystem::exists(candidate, ec)) return candidate;
  }
  std::string looked;
  for (const std::string& c : candidates) looked += (looked.empty() ? "" : ", ") + c;
  AIRT_LOG(INFO) << "no GPU plugin found (looked at " << looked << "): 0 GPUs";
  return "";
}

std::vector<GpuDeviceInfo> DetectGpus(const std::string& path) {
  std::string chosen = ChooseGpuPlugin(path);
  if (chosen.empty()) return {};
  Result<GpuPlugin> plugin = GpuPlugin::Load(chosen);
  if (!plugin.ok()) {
    AIRT_LOG(WARNING) << plugin.status().ToString() << ": 0 GPUs";
    return {};
  }
  std::vector<GpuDeviceInfo> devices;
  int count = plugin->DeviceCount();
  for (int d = 0; d < count; ++d) {
    Result<GpuDeviceInfo> info = plugin->DeviceInfo(d);
    if (!info.ok()) {
      AIRT_LOG(WARNING) << "GPU " << d << ": " << info.status().ToString()
                        << " (counted, without a name or memory)";
      devices.push_back(GpuDeviceInfo{});
      continue;
    }
    AIRT_LOG(INFO) << "GPU " << d << ": " << info->name << " " << info->uuid << " at "
                   << info->pci_bus_id << ", " << (info->total_memory >> 20) << " MiB"
                   << (info->is_mig ? " (MIG instance)" : "");
    devices.push_back(std::move(*info));
  }
  AIRT_LOG(INFO) << "GPU plugin " << chosen << " sees " << count << " device(s)";
  return devices;
}

Result<std::string> FindDefaultPython() {
  namespace fs = std::filesystem;
  const char* path_env = std::getenv("PATH");
  std::string path = path_env ? path_env : "";
  std::string python;
  for (size_t start = 0; start <= path.size() && python.empty();) {
    size_t colon = std::min(path.find(':', start), path.size());
    std::string dir = path.substr(start, colon - start);
    start = colon + 1;
    if (dir.empty()) continue;
    std::error_code ec;
    fs::path candidate = fs::absolute(fs::path(dir) / kPythonFile, ec);
    if (!ec && fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) {
      python = candidate.lexically_normal().string();
    }
  }
  if (python.empty()) return NotFound(std::string("no ") + kPythonFile + " on PATH (" + path + ")");

  // Its output goes to a pipe: the last line of a failure says why (ModuleNotFoundError ...).
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;  // the node blocks its stop signals and SIGCHLD; the child must not
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGCHLD, SIGINT, SIGTERM}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string code = "import airt";
  std::vector<char*> argv = {python.data(), const_cast<char*>("-c"), code.data(), nullptr};
  pid_t pid = -1;
  int spawned = ::posix_spawn(&pid, python.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(out[0]);
    return ErrnoStatus("starting " + python, spawned);
  }
  std::string output;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{out[0], POLLIN, 0};
    int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = true;
      break;
    }
    char buffer[4096];
    ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EOF: it exited (or closed its output)
    if (output.size() < (64 << 10)) output.append(buffer, static_cast<size_t>(n));
  }
  ::close(out[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return DeadlineExceeded(python + " -c '" + code + "' did not finish within 30 s");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return python;
  std::string last = output.substr(0, output.find_last_not_of("\r\n") + 1);  // npos + 1 == 0
  last = last.substr(last.rfind('\n') + 1);
  return FailedPrecondition(python + " (the python3 on PATH) cannot import airt" +
                            (last.empty() ? std::string() : ": " + last));
}

HostFacts DetectHost() {
  HostFacts host;
  host.cpu_count = CpuCount();
  host.physical_memory = PhysicalMemory();
  host.detect_gpus = DetectGpus;
  host.default_python = FindDefaultPython;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    host.cuda_visible_devices = std::string(visible);
  }
  return host;
}

}  // namespace airt::worker
