#include "api/local_cluster.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <future>
#include <limits>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "airt/internal/function_registry.h"
#include "common/daemon_process.h"

namespace airt {
namespace {

namespace fs = std::filesystem;

constexpr auto kReadyTimeout = std::chrono::seconds(30);
constexpr auto kStopGrace = std::chrono::seconds(10);

// The custom resources as the node's --resources JSON: {"name": amount, ...}.
std::string ResourcesJson(const std::map<std::string, double>& resources) {
  std::string json = "{";
  for (const auto& [name, amount] : resources) {
    if (json.size() > 1) json += ", ";
    json += '"';
    for (char c : name) {
      if (c == '"' || c == '\\') {
        json += '\\';
        json += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned char>(c));
        json += escaped;
      } else {
        json += c;
      }
    }
    char number[32];
    std::snprintf(number, sizeof number, "%.17g", amount);
    json += "\": ";
    json += number;
  }
  return json + "}";
}

Status CheckOptions(const LocalClusterOptions& options) {
  if (options.num_cpus && *options.num_cpus < 0) {
    return InvalidArgument("num_cpus is " + std::to_string(*options.num_cpus) + ": must be >= 0");
  }
  if (options.num_gpus && *options.num_gpus < 0) {
    return InvalidArgument("num_gpus is " + std::to_string(*options.num_gpus) + ": must be >= 0");
  }
  for (const auto& [name, amount] : options.resources) {
    if (!std::isfinite(amount)) {
      return InvalidArgument("resource '" + name + "' has an amount that is not a number");
    }
  }
  return Status::Ok();
}

// A whole non-negative integer, or nothing.
std::optional<uint64_t> ParseCount(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return value;
}

Result<std::string> MakeTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/airt-session-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return ErrnoStatus("mkdtemp " + pattern, errno);
  return pattern;
}

}  // namespace

Status ApplyHeadArgs(const std::vector<std::string>& args, LocalClusterOptions* options) {
  static const char* kTaken = "airt's local cluster takes --num-cpus, --num-gpus, --resources and "
                              "--object-store-memory";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      return InvalidArgument("head_args: '" + arg + "' is not a flag (" + kTaken + ")");
    }
    std::string flag = arg, value;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
      value = args[++i];
    } else {
      return InvalidArgument("head_args: " + arg + " has no value (" + kTaken + ")");
    }
    if (value.size() >= 2 && (value.front() == '\'' || value.front() == '"') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    std::replace(flag.begin(), flag.end(), '_', '-');
    auto bad = [&](const std::string& want) {
      return InvalidArgument("head_args: " + flag + "=" + value + ": " + want);
    };
    if (flag == "--num-cpus" || flag == "--num-gpus") {
      std::optional<uint64_t> n = ParseCount(value);
      if (!n || *n > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
        return bad("must be a whole number >= 0");
      }
      (flag == "--num-cpus" ? options->num_cpus : options->num_gpus) = static_cast<int>(*n);
    } else if (flag == "--object-store-memory") {
      std::optional<uint64_t> n = ParseCount(value);
      if (!n || *n == 0) return bad("must be a number of bytes above 0");
      options->object_store_memory = *n;
    } else if (flag == "--resources") {
      nlohmann::json parsed = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_object()) return bad("must be a JSON object, e.g. '{\"x\": 1}'");
      for (const auto& [name, amount] : parsed.items()) {
        if (!amount.is_number() || !std::isfinite(amount.get<double>()) ||
            amount.get<double>() < 0) {
          return bad("the amount of '" + name + "' must be a number >= 0");
        }
        options->resources[name] = amount.get<double>();
      }
    } else {
      return InvalidArgument("head_args: " + flag + " is not supported (" + kTaken + ")");
    }
  }
  return Status::Ok();
}

// Forks the daemons on a thread that lives as long as the cluster: PR_SET_PDEATHSIG fires when
// the thread that forked exits, not the process.
class LocalCluster::StarterThread {
 public:
  StarterThread() : thread_([this] { Run(); }) {}
  ~StarterThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

  // StartDaemon(command), run on this thread.
  Result<pid_t> Start(const DaemonCommand& command) {
    std::packaged_task<Result<pid_t>()> job([&command] { return StartDaemon(command); });
    std::future<Result<pid_t>> started = job.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
    return started.get();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [this] { return done_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      std::packaged_task<Result<pid_t>()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<Result<pid_t>()>> jobs_;  // guarded by mu_
  bool done_ = false;                                     // guarded by mu_
  std::thread thread_;                                    // last: starts once the rest exists
};

LocalCluster::LocalCluster(std::string temp_dir)
    : temp_dir_(std::move(temp_dir)),
      owner_(::getpid()),
      starter_(std::make_unique<StarterThread>()) {}

LocalCluster::~LocalCluster() {
  if (::getpid() != owner_) {
    // A fork of the driver that exits: the cluster is the driver's, and the starter's thread
    // does not exist in this process.
    (void)starter_.release();
    return;
  }
  auto deadline = std::chrono::steady_clock::now() + kStopGrace;
  // The node first, so that it can tell the head it leaves.
  for (auto pid = pids_.rbegin(); pid != pids_.rend(); ++pid) StopChild(*pid, deadline);
  starter_.reset();
  if (!keep_temp_dir_) {
    std::error_code ec;
    fs::remove_all(temp_dir_, ec);
  }
}

Result<std::unique_ptr<LocalCluster>> LocalCluster::Start(const LocalClusterOptions& options) {
  AIRT_RETURN_IF_ERROR(CheckOptions(options));
  std::vector<std::string> dirs =
      DaemonSearchDirs({reinterpret_cast<const void*>(&LocalCluster::Start),
                        reinterpret_cast<const void*>(&internal::FunctionRegistry::Global)});
  AIRT_ASSIGN_OR_RETURN(std::string head_binary, FindDaemonBinary("airt-head", dirs));
  AIRT_ASSIGN_OR_RETURN(std::string node_binary, FindDaemonBinary("airt-node", dirs));
  AIRT_ASSIGN_OR_RETURN(std::string temp_dir, MakeTempDir());
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(temp_dir));
  cluster->keep_temp_dir_ = true;  // until both are ready: a failure names a log in it

  std::vector<std::string> head = {head_binary, "--port=0", "--bind-address=127.0.0.1",
                                   "--temp-dir=" + temp_dir};
  AIRT_ASSIGN_OR_RETURN(cluster->head_address_,
                        cluster->Launch("head", std::move(head), "head ready "));
  std::vector<std::string> node = {node_binary, "--head-address=" + cluster->head_address_,
                                   "--node-address=127.0.0.1", "--temp-dir=" + temp_dir};
  if (options.num_cpus) node.push_back("--num-cpus=" + std::to_string(*options.num_cpus));
  if (options.num_gpus) node.push_back("--num-gpus=" + std::to_string(*options.num_gpus));
  if (options.object_store_memory) {
    node.push_back("--object-store-memory=" + std::to_string(*options.object_store_memory));
  }
  if (!options.resources.empty()) node.push_back("--resources=" + ResourcesJson(options.resources));
  std::string code = options.code_search_path;
  if (code.empty()) {
    std::error_code ec;
    code = fs::read_symlink("/proc/self/exe", ec).parent_path().string();
  }
  if (!code.empty()) node.push_back("--worker-code-search-path=" + code);
  AIRT_RETURN_IF_ERROR(cluster->Launch("node", std::move(node), "node ready ").status());
  cluster->keep_temp_dir_ = false;
  return cluster;
}

Result<std::string> LocalCluster::Launch(const std::string& name, std::vector<std::string> argv,
                                         const std::string& ready_prefix) {
  DaemonCommand command{std::move(argv), temp_dir_ + "/logs/" + name + ".out",
                        DaemonLifetime::kStarterThread};
  AIRT_ASSIGN_OR_RETURN(pid_t pid, starter_->Start(command));
  pids_.push_back(pid);
  Result<std::string> ready = WaitForReadyLine(command, pid, ready_prefix, kReadyTimeout);
  if (ready.status().code() == Code::kUnavailable) pids_.pop_back();  // exited, and reaped
  return ready;
}

}  // namespace airt
