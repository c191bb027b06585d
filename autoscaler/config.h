// The cluster config (`airt up cluster.yaml`), shaped like Ray's cluster YAML:
//
//   cluster_name: demo
//   max_workers: 8                 # worker nodes in all, the head's node not counted
//   idle_timeout_minutes: 0.5      # fractions allowed
//   provider: {type: local}        # local | slurm | fault (docs/autoscaler.md "Providers")
//   available_node_types:
//     cpu_node: {resources: {CPU: 2}, min_workers: 0, max_workers: 4}
//     gpu_node:
//       resources: {CPU: 4, GPU: 1, memory: 8G}
//       labels: {accelerator_type: H100}
//       max_workers: 2
//       node_config: {partition: gpu}   # the provider's own keys
//   head_node_type: cpu_node
//
// Read with yaml-cpp; every check names the key (as a path: "available_node_types.gpu_node.
// resources.GPU") and the reason.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "common/status.h"

namespace airt::autoscaler {

struct NodeTypeConfig {
  std::string name;
  std::map<std::string, double> resources;  // CPU, GPU, memory (bytes), custom names
  std::map<std::string, std::string> labels;
  uint32_t min_workers = 0;
  uint32_t max_workers = 0;  // default: the cluster's max_workers
  std::map<std::string, std::string> node_config;  // provider-specific, scalars as text
};

struct ProviderConfig {
  std::string type;  // "local", "slurm" or "fault"
  std::map<std::string, std::string> options;  // the provider's other keys, scalars as text
};

struct ClusterConfig {
  std::string cluster_name;
  uint32_t max_workers = 2;  // Ray's default
  double idle_timeout_minutes = 5;
  ProviderConfig provider;
  std::map<std::string, NodeTypeConfig> node_types;
  std::string head_node_type;

  int64_t idle_timeout_ms() const {
    return static_cast<int64_t>(idle_timeout_minutes * 60'000.0);
  }
};

// kInvalidArgument naming the key and the reason: not YAML, an unknown key, a missing one
// (cluster_name, provider.type, available_node_types, head_node_type), a value of the wrong kind,
// a negative or non-finite amount, min_workers above max_workers, a head_node_type not among the
// node types.
Result<ClusterConfig> ParseClusterConfig(std::string_view yaml);
// kNotFound when the file cannot be read; else ParseClusterConfig's errors, with the path.
Result<ClusterConfig> LoadClusterConfig(const std::string& path);

// "1.5", "8G" (powers of 1024: K, M, G, T), "2" as a number; kInvalidArgument otherwise.
Result<double> ParseAmount(std::string_view text, std::string_view key);

}  // namespace airt::autoscaler
