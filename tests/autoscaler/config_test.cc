// The cluster config's reader: a good config in full, and each bad one failing with its key and
// the reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autoscaler/config.h"

namespace airt::autoscaler {
namespace {

using ::testing::HasSubstr;

constexpr const char* kGood = R"(
cluster_name: demo
max_workers: 8
idle_timeout_minutes: 0.02
provider:
  type: slurm
  sbatch_args: --qos=normal
available_node_types:
  cpu_node:
    resources: {CPU: 2}
    min_workers: 1
  gpu_node:
    resources: {CPU: 4, GPU: 1, memory: 8G, TPU_like: 2}
    labels: {accelerator_type: H100}
    max_workers: 2
    node_config: {partition: gpu, time: "01:00:00"}
head_node_type: cpu_node
)";

TEST(ClusterConfig, ReadsEveryKeyOfAGoodConfig) {
  Result<ClusterConfig> config = ParseClusterConfig(kGood);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->cluster_name, "demo");
  EXPECT_EQ(config->max_workers, 8u);
  EXPECT_DOUBLE_EQ(config->idle_timeout_minutes, 0.02);
  EXPECT_EQ(config->idle_timeout_ms(), 1200);
  EXPECT_EQ(config->provider.type, "slurm");
  EXPECT_EQ(config->provider.options.at("sbatch_args"), "--qos=normal");
  ASSERT_EQ(config->node_types.size(), 2u);
  const NodeTypeConfig& cpu = config->node_types.at("cpu_node");
  EXPECT_EQ(cpu.min_workers, 1u);
  EXPECT_EQ(cpu.max_workers, 8u);  // the cluster's by default
  const NodeTypeConfig& gpu = config->node_types.at("gpu_node");
  EXPECT_DOUBLE_EQ(gpu.resources.at("GPU"), 1);
  EXPECT_DOUBLE_EQ(gpu.resources.at("memory"), 8.0 * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(gpu.resources.at("TPU_like"), 2);
  EXPECT_EQ(gpu.labels.at("accelerator_type"), "H100");
  EXPECT_EQ(gpu.max_workers, 2u);
  EXPECT_EQ(gpu.node_config.at("time"), "01:00:00");
  EXPECT_EQ(config->head_node_type, "cpu_node");
}

struct BadCase {
  const char* yaml;
  const char* key;
  const char* reason;
};

TEST(ClusterConfig, RejectsBadConfigsNamingTheKeyAndTheReason) {
  const std::string types = R"(
available_node_types: {cpu: {resources: {CPU: 1}}}
head_node_type: cpu
)";
  const std::vector<BadCase> cases = {
      {"cluster_name: [", "not valid YAML", ""},
      {"- a\n- b\n", "must be a mapping", ""},
      {"provider: {type: local}\n", "cluster_name", "missing"},
      {"cluster_name: a b\nprovider: {type: local}\n", "cluster_name", "only letters"},
      {"cluster_name: c\nprovider: {type: aws}\n", "provider.type", "must be local, slurm"},
      {"cluster_name: c\nprovider: {}\n", "provider.type", "missing"},
      {"cluster_name: c\nprovider: {type: local}\nmax_worker: 2\n", "max_worker",
       "unknown key"},
      {"cluster_name: c\nmax_workers: -1\nprovider: {type: local}\n", "max_workers",
       "whole number"},
      {"cluster_name: c\nidle_timeout_minutes: soon\nprovider: {type: local}\n",
       "idle_timeout_minutes", "must be a number"},
      {"cluster_name: c\nprovider: {type: local}\nhead_node_type: x\n", "available_node_types",
       "missing"},
      {"cluster_name: c\nprovider: {type: local}\navailable_node_types: "
       "{cpu: {resources: {CPU: -2}}}\nhead_node_type: cpu\n",
       "available_node_types.cpu.resources.CPU", "must be >= 0"},
      {"cluster_name: c\nprovider: {type: local}\navailable_node_types: "
       "{cpu: {resources: {CPU: lots}}}\nhead_node_type: cpu\n",
       "available_node_types.cpu.resources.CPU", "must be a number"},
      {"cluster_name: c\nprovider: {type: local}\navailable_node_types: "
       "{cpu: {min_workers: 1}}\nhead_node_type: cpu\n",
       "available_node_types.cpu.resources", "missing"},
      {"cluster_name: c\nprovider: {type: local}\navailable_node_types: "
       "{cpu: {resources: {CPU: 1}, min_workers: 3, max_workers: 2}}\nhead_node_type: cpu\n",
       "available_node_types.cpu.min_workers", "above max_workers"},
      {"cluster_name: c\nprovider: {type: local}\navailable_node_types: "
       "{cpu: {resources: {CPU: 1}, gpus: 1}}\nhead_node_type: cpu\n",
       "available_node_types.cpu.gpus", "unknown key"},
      {"cluster_name: c\nprovider: {type: local}\navailable_node_types: "
       "{cpu: {resources: {CPU: 1}}}\nhead_node_type: gpu\n",
       "head_node_type", "not one of available_node_types"},
      {"cluster_name: c\nprovider: {type: local}\navailable_node_types: "
       "{cpu: {resources: {CPU: 1}}}\n",
       "head_node_type", "missing"},
  };
  (void)types;
  for (const BadCase& c : cases) {
    Result<ClusterConfig> config = ParseClusterConfig(c.yaml);
    ASSERT_FALSE(config.ok()) << c.yaml;
    EXPECT_EQ(config.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(config.status().message(), HasSubstr(c.key)) << c.yaml;
    EXPECT_THAT(config.status().message(), HasSubstr(c.reason)) << c.yaml;
  }
}

TEST(ClusterConfig, LoadNamesAFileThatCannotBeRead) {
  Result<ClusterConfig> config = LoadClusterConfig("/nonexistent/cluster.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), Code::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr("/nonexistent/cluster.yaml"));
}

}  // namespace
}  // namespace airt::autoscaler
