#include "worker/internal/node_config.h"

#include <cstdlib>
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "tests/testing/test_support.h"
#include "worker/internal/host.h"

namespace airt::worker {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

HostFacts Host(int gpus = 0) {
  HostFacts host;
  host.cpu_count = 16;
  host.physical_memory = 64 * kGiB;
  host.detect_gpus = [gpus](const std::string&) { return std::vector<GpuDeviceInfo>(gpus); };
  return host;
}

Result<NodeConfig> Parse(std::vector<std::string> args, const HostFacts& host = Host()) {
  args.insert(args.begin(), "airt-node");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseNodeConfig(static_cast<int>(argv.size()), argv.data(), host);
}

std::map<std::string, double> Totals(const NodeConfig& config) {
  std::map<std::string, double> out;
  for (const ResourceAmount& r : config.total) out[r.name] = r.amount;
  return out;
}

std::string ErrorOf(std::vector<std::string> args, const HostFacts& host = Host()) {
  auto config = Parse(std::move(args), host);
  if (config.ok()) return "parsed";
  EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
  return config.status().message();
}

TEST(NodeConfig, DeclaresGpuIdsZeroToNWhenNumGpusGiven) {
  bool asked = false;
  HostFacts host = Host();
  host.detect_gpus = [&](const std::string&) {
    asked = true;
    return std::vector<GpuDeviceInfo>{};
  };
  auto config = Parse({"--head-address", "127.0.0.1:6379", "--num-gpus", "4"}, host);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->gpu_ids, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(config->gpu_visible_names, (std::vector<std::string>{"0", "1", "2", "3"}));
  EXPECT_EQ(Totals(*config)["GPU"], 4.0);
  EXPECT_TRUE(asked) << "detection still names the GPUs it sees";
  EXPECT_EQ(config->gpu_memory, (std::vector<uint64_t>(4, 0))) << "unknown without --gpu-memory";
}

TEST(NodeConfig, DefaultsComeFromTheHost) {
  std::string plugin_asked = "unset";
  HostFacts host = Host();
  host.detect_gpus = [&](const std::string& path) {
    plugin_asked = path;
    return std::vector<GpuDeviceInfo>(2);
  };
  auto config = Parse({"--head-address=head.example:6379", "--gpu-plugin=/opt/p.so"}, host);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(plugin_asked, "/opt/p.so");
  std::map<std::string, double> totals = Totals(*config);
  EXPECT_EQ(totals["CPU"], 16.0);
  EXPECT_EQ(totals["GPU"], 2.0);
  EXPECT_EQ(config->gpu_ids, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(config->object_store_memory, kGiB);
  EXPECT_EQ(totals["object_store_memory"], static_cast<double>(kGiB));
  EXPECT_EQ(totals["memory"], static_cast<double>(64 * kGiB / 10 * 7 - kGiB));
  EXPECT_EQ(totals["node:127.0.0.1"], 1.0);
  EXPECT_EQ(config->node_address, "127.0.0.1");
  EXPECT_EQ(config->temp_dir, "/tmp/airt");
  EXPECT_EQ(config->port, 0);
  EXPECT_EQ(config->head_address, "head.example:6379");
  // Built-ins first, in Ray's order.
  ASSERT_GE(config->total.size(), 5u);
  EXPECT_EQ(config->total[0].name, "CPU");
  EXPECT_EQ(config->total[1].name, "GPU");
}

TEST(NodeConfig, ZeroAmountsAreLeftOutAsRayDoes) {
  auto config = Parse({"--head-address=h:1", "--num-cpus=0", "--num-gpus=0", "--memory=0",
                       "--resources={\"spare\": 0, \"TPU\": 1}"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  std::map<std::string, double> totals = Totals(*config);
  EXPECT_EQ(totals.count("CPU"), 0u);
  EXPECT_EQ(totals.count("GPU"), 0u);
  EXPECT_EQ(totals.count("memory"), 0u);
  EXPECT_EQ(totals.count("spare"), 0u);
  EXPECT_EQ(totals["TPU"], 1.0);
  EXPECT_TRUE(config->gpu_ids.empty());
}

TEST(NodeConfig, CustomResourcesAndLabelsFromJsonInOrder) {
  auto config = Parse({"--head-address=10.0.0.1:6379", "--num-cpus=8", "--memory=8G",
                       "--object-store-memory=256M", "--node-address=10.0.0.2", "--resources",
                       R"({"custom": 2, "TPU": 0.5})", "--labels",
                       R"({"accelerator_type": "A10", "zone": "us-east-1a"})"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  std::vector<ResourceAmount> expected = {
      {"CPU", 8},           {"memory", 8.0 * kGiB}, {"object_store_memory", 256.0 * (1 << 20)},
      {"node:10.0.0.2", 1}, {"custom", 2},          {"TPU", 0.5},
      {"accelerator_type:A10", 1}};
  EXPECT_EQ(config->total, expected);
  std::vector<std::pair<std::string, std::string>> labels = {{"ray.io/accelerator-type", "A10"},
                                                             {"zone", "us-east-1a"}};
  EXPECT_EQ(config->labels, labels);
}

TEST(NodeConfig, GpuIdsFollowCudaVisibleDevicesAsRay) {
  HostFacts host = Host(2);
  host.cuda_visible_devices = "2,3";
  auto detected = Parse({"--head-address=h:1"}, host);
  ASSERT_TRUE(detected.ok()) << detected.status().ToString();
  EXPECT_EQ(detected->gpu_ids, (std::vector<uint32_t>{2, 3}));
  auto fewer = Parse({"--head-address=h:1", "--num-gpus=1"}, host);
  ASSERT_TRUE(fewer.ok());
  EXPECT_EQ(fewer->gpu_ids, (std::vector<uint32_t>{2}));
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--num-gpus=4"}, host),
            "--num-gpus: 4 GPUs asked for, but CUDA_VISIBLE_DEVICES='2,3' lists 2");
  host.cuda_visible_devices = "GPU-8d3c5f2a,MIG-1b2c";
  auto uuids = Parse({"--head-address=h:1"}, host);
  ASSERT_TRUE(uuids.ok()) << uuids.status().ToString();
  EXPECT_EQ(uuids->gpu_ids, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(uuids->gpu_visible_names, (std::vector<std::string>{"GPU-8d3c5f2a", "MIG-1b2c"}));
  host.cuda_visible_devices = "first";
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--num-gpus=1"}, host),
            "CUDA_VISIBLE_DEVICES='first' is not a list of device indices (e.g. 0,1) or UUIDs "
            "(GPU-..., MIG-...)");
}

TEST(NodeConfig, RejectsMissingOrMalformedHeadAddress) {
  EXPECT_EQ(ErrorOf({}), "--head-address: required (HOST:PORT)");
  for (std::string bad :
       {"localhost", ":6379", "h:", "h:0", "h:65536", "h:12x", "::1:5", "[::1:5"}) {
    EXPECT_EQ(ErrorOf({"--head-address", bad}),
              "--head-address: '" + bad + "' is not HOST:PORT (e.g. 10.0.0.1:6379)");
  }
  EXPECT_TRUE(Parse({"--head-address", "[::1]:6379"}).ok());
}

TEST(NodeConfig, LabelsAsKeyValuePairsAsRayStart) {
  auto config = Parse({"--head-address=h:1", "--labels=accelerator_type=H100,zone=us-east-1a"});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  std::vector<std::pair<std::string, std::string>> labels = {{"ray.io/accelerator-type", "H100"},
                                                             {"zone", "us-east-1a"}};
  EXPECT_EQ(config->labels, labels);
  EXPECT_EQ(Totals(*config)["accelerator_type:H100"], 1.0);
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--labels=zone"}),
            "--labels: 'zone' is not key=value (e.g. ray.io/accelerator-type=A10,zone=a)");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--labels=a=1,a=2"}), "--labels: label 'a' is given twice");
}

TEST(NodeConfig, DetectedGpusNameTheAcceleratorTypeAndTheirMemory) {
  HostFacts host = Host();
  host.detect_gpus = [](const std::string&) {
    GpuDeviceInfo h100{"NVIDIA H100 80GB HBM3", "GPU-1234", "0000:3B:00.0", 80 * kGiB, false};
    return std::vector<GpuDeviceInfo>{h100, h100};
  };
  auto config = Parse({"--head-address=h:1"}, host);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->labels, (std::vector<std::pair<std::string, std::string>>{
                                {"ray.io/accelerator-type", "H100"}}));
  EXPECT_EQ(Totals(*config)["accelerator_type:H100"], 1.0);
  EXPECT_EQ(config->gpu_memory, (std::vector<uint64_t>{80 * kGiB, 80 * kGiB}));
  EXPECT_EQ(config->gpu_uuids, (std::vector<std::string>{"GPU-1234", "GPU-1234"}));
  EXPECT_EQ(config->gpu_memory_margin, 4 * kGiB) << "5% of the device by default";
  auto declared = Parse({"--head-address=h:1", "--labels=accelerator_type=A10"}, host);
  ASSERT_TRUE(declared.ok());
  EXPECT_EQ(declared->labels[0].second, "A10") << "--labels wins over detection";
  auto sized = Parse({"--head-address=h:1", "--num-gpus=2", "--gpu-memory=16G"});
  ASSERT_TRUE(sized.ok());
  EXPECT_EQ(sized->gpu_memory, (std::vector<uint64_t>{16 * kGiB, 16 * kGiB}));
  EXPECT_TRUE(sized->labels.empty());
}

TEST(NodeConfig, InvalidJsonNamesTheFlagAndTheColumn) {
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--resources", R"({"custom": 2,})"}),
            "--resources: expected a string key at column 14, got '}'");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--labels", R"({"accelerator_type": A10})"}),
            "--labels: expected a number or a string for key \"accelerator_type\" at column 22, "
            "got 'A10'");
}

TEST(NodeConfig, RejectsResourcesThatAreNotCustom) {
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--resources", R"({"GPU": 2})"}),
            "--resources: 'GPU' is a built-in resource: use --num-gpus instead");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--resources", R"({"memory": 2})"}),
            "--resources: 'memory' is a built-in resource: use --memory instead");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--resources", R"({"accelerator_type": 1})"}),
            "--resources: 'accelerator_type' is a label: use --labels "
            "'{\"accelerator_type\": ...}'");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--resources", R"({"node:1.2.3.4": 1})"}),
            "--resources: 'node:1.2.3.4' is reserved: the node adds node:<address> itself");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--resources", R"({"my res": 1})"}),
            "--resources: resource name 'my res' must be non-empty, without spaces, control "
            "characters or ,{}");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--resources", R"({"TPU": "two"})"}),
            "--resources: the amount of 'TPU' must be a number, got the string \"two\"");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--resources", R"({"TPU": -1})"}),
            "--resources: the amount of 'TPU' must be 0, or between 0.0001 and 1e14, got -1");
}

TEST(NodeConfig, RejectsLabelsThatAreNotStrings) {
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--labels", R"({"rack": 7})"}),
            "--labels: the value of 'rack' must be a string, e.g. \"A10\"");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--labels", R"({"accelerator_type": "A 10"})"}),
            "--labels: ray.io/accelerator-type 'A 10' must be letters, digits and -_.: (e.g. A10, "
            "H100)");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--labels", R"({"": "x"})"}),
            "--labels: label key '' must be non-empty, without spaces, control characters or ,{}");
}

TEST(NodeConfig, BadCountsSizesAndPortsNameTheFlag) {
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--num-gpus=two"}),
            "--num-gpus: 'two' is not a non-negative integer");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--num-cpus=-1"}),
            "--num-cpus: '-1' is not a non-negative integer");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--num-cpus=1.5"}),
            "--num-cpus: '1.5' is not a non-negative integer");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--memory=8X"}),
            "--memory: '8X' has an unknown size suffix (bytes, or a number with K, M, G or T)");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--object-store-memory=0"}),
            "--object-store-memory: must not be 0");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--port=70000"}),
            "--port: 70000 is not a port (0-65535)");
  EXPECT_EQ(ErrorOf({"--head-address=h:1", "--num-gpu=1"}), "unknown flag --num-gpu");
}

TEST(NodeConfig, HelpReturnsTheUsage) {
  auto config = Parse({"--help"});
  ASSERT_EQ(config.status().code(), Code::kCancelled);
  EXPECT_NE(config.status().message().find("--head-address"), std::string::npos);
  EXPECT_NE(config.status().message().find("--num-gpus"), std::string::npos);
}

TEST(NodeConfig, LeaseAndWorkerFlagsHaveDefaultsAndBounds) {
  auto defaults = Parse({"--head-address", "127.0.0.1:6379"});
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->worker_binary, "");
  EXPECT_EQ(defaults->worker_code_search_path, "");
  EXPECT_EQ(defaults->infeasible_grace_ms, 10000u);
  EXPECT_EQ(defaults->worker_register_timeout_ms, 30000u);
  EXPECT_EQ(defaults->idle_worker_timeout_ms, 60000u);
  EXPECT_EQ(defaults->worker_stop_grace_ms, 2000u);
  EXPECT_EQ(defaults->cluster_view_interval_ms, 1000u);
  EXPECT_EQ(defaults->preemption_grace_ms, 30000u);
  EXPECT_EQ(defaults->preemption_reason, "preemption notice (SIGUSR1)");

  auto set = Parse({"--head-address", "127.0.0.1:6379", "--worker-binary", "/opt/w",
                    "--worker-code-search-path", "/opt/lib:/srv/lib", "--infeasible-grace-ms", "0",
                    "--worker-register-timeout-ms", "500", "--idle-worker-timeout-ms", "700",
                    "--worker-stop-grace-ms", "0", "--cluster-view-interval-ms", "50",
                    "--preemption-grace-ms", "3600000", "--preemption-reason",
                    "preempted by Slurm"});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->worker_binary, "/opt/w");
  EXPECT_EQ(set->worker_code_search_path, "/opt/lib:/srv/lib");
  EXPECT_EQ(set->infeasible_grace_ms, 0u);
  EXPECT_EQ(set->worker_register_timeout_ms, 500u);
  EXPECT_EQ(set->idle_worker_timeout_ms, 700u);
  EXPECT_EQ(set->worker_stop_grace_ms, 0u);
  EXPECT_EQ(set->cluster_view_interval_ms, 50u);
  EXPECT_EQ(set->preemption_grace_ms, 3600000u);
  EXPECT_EQ(set->preemption_reason, "preempted by Slurm");

  EXPECT_EQ(ErrorOf({"--head-address", "h:1", "--worker-register-timeout-ms", "0"}),
            "--worker-register-timeout-ms: must be 1 to 3600000, got 0");
  EXPECT_EQ(ErrorOf({"--head-address", "h:1", "--infeasible-grace-ms", "3600001"}),
            "--infeasible-grace-ms: must be 0 to 3600000, got 3600001");
  EXPECT_EQ(ErrorOf({"--head-address", "h:1", "--cluster-view-interval-ms", "0"}),
            "--cluster-view-interval-ms: must be 1 to 3600000, got 0");
  EXPECT_EQ(ErrorOf({"--head-address", "h:1", "--preemption-reason", ""}),
            "--preemption-reason: must be 1 to 4096 bytes");
}

TEST(NodeConfig, PythonIsTheFlagThenAirtPythonThenTheHostsDefault) {
  ::unsetenv("AIRT_PYTHON");
  int asked = 0;
  HostFacts host = Host();
  host.default_python = [&]() -> Result<std::string> {
    ++asked;
    return std::string("/opt/py/bin/python3");
  };
  auto flag = Parse({"--head-address", "h:1", "--python-executable", "/flag/python3"}, host);
  ASSERT_TRUE(flag.ok()) << flag.status().ToString();
  EXPECT_EQ(flag->python_executable, "/flag/python3");
  ::setenv("AIRT_PYTHON", "/env/python3", 1);
  auto env = Parse({"--head-address", "h:1"}, host);
  ::unsetenv("AIRT_PYTHON");
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ(env->python_executable, "/env/python3");
  EXPECT_EQ(asked, 0) << "the default is looked for only when neither names one";
  auto fallback = Parse({"--head-address", "h:1"}, host);
  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  EXPECT_EQ(fallback->python_executable, "/opt/py/bin/python3");
  EXPECT_EQ(asked, 1);

  host.default_python = []() -> Result<std::string> { return NotFound("no python3 on PATH"); };
  auto none = Parse({"--head-address", "h:1"}, host);
  ASSERT_TRUE(none.ok()) << "a node without Python workers still starts";
  EXPECT_EQ(none->python_executable, "");
  EXPECT_EQ(Parse({"--head-address", "h:1"}, Host())->python_executable, "");
}

// Debian's python3 (behind a link in a folder of its own, the only one on PATH) imports no airt
// unless PYTHONPATH names one; an empty folder has no python3.
TEST(NodeHost, DefaultPythonIsThePython3OnPathOnlyWhenItImportsAirt) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "skipped: no /usr/bin/python3";
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("bin"));
  std::filesystem::create_directories(dir.File("empty"));
  std::filesystem::create_symlink("/usr/bin/python3", dir.File("bin/python3"));
  const char* old_path = std::getenv("PATH");
  std::string saved_path = old_path ? old_path : "";
  const char* old_pythonpath = std::getenv("PYTHONPATH");
  std::string saved_pythonpath = old_pythonpath ? old_pythonpath : "";
  ::unsetenv("PYTHONPATH");

  ::setenv("PATH", dir.File("empty").c_str(), 1);
  Result<std::string> missing = FindDefaultPython();
  EXPECT_EQ(missing.status().code(), Code::kNotFound) << missing.status().ToString();

  ::setenv("PATH", (dir.File("empty") + ":" + dir.File("bin")).c_str(), 1);
  Result<std::string> refused = FindDefaultPython();
  if (refused.ok()) {
    ::setenv("PATH", saved_path.c_str(), 1);
    GTEST_SKIP() << "skipped: Debian's python3 imports an airt of its own here";
  }
  EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find(dir.File("bin/python3")), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("No module named 'airt'"), std::string::npos)
      << refused.status().message();

#if defined(AIRT_PYTHON_PACKAGE_DIR)
  // With this build's package on PYTHONPATH it imports airt: the probe runs in this process's
  // environment, the one workers inherit.
  ::setenv("PYTHONPATH", AIRT_PYTHON_PACKAGE_DIR, 1);
  Result<std::string> found = FindDefaultPython();
  EXPECT_EQ(found.ok() ? *found : found.status().ToString(), dir.File("bin/python3"));
#endif

  ::setenv("PATH", saved_path.c_str(), 1);
  if (old_pythonpath) {
    ::setenv("PYTHONPATH", saved_pythonpath.c_str(), 1);
  } else {
    ::unsetenv("PYTHONPATH");
  }
}

TEST(NodeHost, LooksForTheWorkerBesideTheBinaryNeverInACheckout) {
  std::vector<std::string> paths = DefaultWorkerBinaryPaths();
  ASSERT_EQ(paths.size(), 2u);
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  EXPECT_EQ(paths[0], (self.parent_path() / "airt-worker").string());
  EXPECT_EQ(paths[1], (self.parent_path().parent_path() / "api" / "airt-worker").string());
}

TEST(NodeHost, LooksForThePluginBesideTheBinaryNeverInACheckout) {
  std::vector<std::string> paths = DefaultGpuPluginPaths();
  ASSERT_EQ(paths.size(), 3u);
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  EXPECT_EQ(paths[0], (self.parent_path() / "libairt_gpu_plugin.so").string());
  EXPECT_EQ(paths[1],
            (self.parent_path().parent_path() / "gpu" / "libairt_gpu_plugin.so").string());
  EXPECT_EQ(paths[2],
            (self.parent_path().parent_path() / "lib" / "libairt_gpu_plugin.so").string());
  EXPECT_TRUE(DetectGpus("/nonexistent/libairt_gpu_plugin.so").empty());
}

TEST(NodeHost, DetectsThisMachine) {
  HostFacts host = DetectHost();
  EXPECT_GE(host.cpu_count, 1u);
  EXPECT_GT(host.physical_memory, 0u);
  EXPECT_TRUE(static_cast<bool>(host.detect_gpus));
}

TEST(NodeConfig, ObjectStoreFallbackLimitComesFromTheFlagElseTheEnvironment) {
  ::unsetenv("AIRT_OBJECT_STORE_FALLBACK_LIMIT");
  auto unlimited = Parse({"--head-address=127.0.0.1:6379"});
  ASSERT_TRUE(unlimited.ok()) << unlimited.status().ToString();
  EXPECT_EQ(unlimited->object_store_fallback_limit, ~uint64_t{0});
  auto off = Parse({"--head-address=127.0.0.1:6379", "--object-store-fallback-limit=0"});
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->object_store_fallback_limit, 0u);
  ::setenv("AIRT_OBJECT_STORE_FALLBACK_LIMIT", "2G", 1);
  auto from_env = Parse({"--head-address=127.0.0.1:6379"});
  auto flag_wins = Parse({"--head-address=127.0.0.1:6379", "--object-store-fallback-limit=5M"});
  auto bad = Parse({"--head-address=127.0.0.1:6379", "--object-store-fallback-limit=lots"});
  ::unsetenv("AIRT_OBJECT_STORE_FALLBACK_LIMIT");
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
  EXPECT_EQ(from_env->object_store_fallback_limit, 2ull << 30);
  ASSERT_TRUE(flag_wins.ok());
  EXPECT_EQ(flag_wins->object_store_fallback_limit, 5ull << 20);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("object-store-fallback-limit"), std::string::npos)
      << bad.status().ToString();
}

}  // namespace
}  // namespace airt::worker
