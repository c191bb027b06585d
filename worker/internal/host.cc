#include "worker/internal/host.h"

#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <thread>

#include "common/logging.h"
#include "gpu/gpu_plugin.h"

namespace airt::node {
namespace {

constexpr char kPluginFile[] = "libairt_gpu_plugin.so";
constexpr char kWorkerFile[] = "airt-worker";

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

int CountGpus(const std::string& path) {
  std::string chosen = path;
  if (chosen.empty()) {
    std::vector<std::string> candidates = DefaultGpuPluginPaths();
    for (const std::string& candidate : candidates) {
      std::error_code ec;
      if (std::filesystem::exists(candidate, ec)) {
        chosen = candidate;
        break;
      }
    }
    if (chosen.empty()) {
      std::string looked;
      for (const std::string& c : candidates) looked += (looked.empty() ? "" : ", ") + c;
      AIRT_LOG(INFO) << "no GPU plugin found (looked at " << looked << "): 0 GPUs";
      return 0;
    }
  }
  Result<GpuPlugin> plugin = GpuPlugin::Load(chosen);
  if (!plugin.ok()) {
    AIRT_LOG(WARNING) << plugin.status().ToString() << ": 0 GPUs";
    return 0;
  }
  int count = plugin->DeviceCount();
  AIRT_LOG(INFO) << "GPU plugin " << chosen << " sees " << count << " device(s)";
  return count > 0 ? count : 0;
}

HostFacts DetectHost() {
  HostFacts host;
  host.cpu_count = CpuCount();
  host.physical_memory = PhysicalMemory();
  host.count_gpus = CountGpus;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    host.cuda_visible_devices = std::string(visible);
  }
  return host;
}

}  // namespace airt::node
