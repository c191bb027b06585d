#include "autoscaler/config.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace airt::autoscaler {
namespace {

std::string Join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}

Status Bad(std::string_view key, std::string_view reason) {
  return InvalidArgument("cluster config: " + std::string(key) + ": " + std::string(reason));
}

Status CheckKeys(const YAML::Node& map, std::string_view path,
                 const std::set<std::string>& allowed) {
  for (const auto& entry : map) {
    std::string key = entry.first.as<std::string>();
    if (allowed.count(key) == 0) {
      std::string known;
      for (const std::string& k : allowed) known += (known.empty() ? "" : ", ") + k;
      return Bad(Join(path, key), "unknown key (known: " + known + ")");
    }
  }
  return Status::Ok();
}

Result<std::string> Text(const YAML::Node& node, std::string_view key) {
  if (!node.IsScalar()) return Bad(key, "must be a text value");
  return node.as<std::string>();
}

Result<uint32_t> Count(const YAML::Node& node, std::string_view key) {
  if (!node.IsScalar()) return Bad(key, "must be a whole number >= 0");
  std::string text = node.as<std::string>();
  try {
    size_t used = 0;
    long long value = std::stoll(text, &used);
    if (used != text.size() || value < 0 || value > 1'000'000) throw std::invalid_argument(text);
    return static_cast<uint32_t>(value);
  } catch (const std::exception&) {
    return Bad(key, "must be a whole number between 0 and 1000000, got '" + text + "'");
  }
}

Result<std::map<std::string, std::string>> Scalars(const YAML::Node& node, std::string_view key) {
  std::map<std::string, std::string> out;
  if (!node || node.IsNull()) return out;
  if (!node.IsMap()) return Bad(key, "must be a mapping");
  for (const auto& entry : node) {
    std::string name = entry.first.as<std::string>();
    if (name.empty()) return Bad(key, "has an empty key");
    if (entry.second.IsSequence()) {
      std::string joined;
      for (const auto& item : entry.second) {
        if (!item.IsScalar()) return Bad(Join(key, name), "must be a text value or a list of them");
        joined += (joined.empty() ? "" : ",") + item.as<std::string>();
      }
      out[name] = joined;
      continue;
    }
    if (!entry.second.IsScalar()) return Bad(Join(key, name), "must be a text value");
    out[name] = entry.second.as<std::string>();
  }
  return out;
}

Result<NodeTypeConfig> ParseNodeType(const std::string& name, const YAML::Node& node,
                                     std::string_view path, uint32_t cluster_max) {
  if (!node.IsMap()) return Bad(path, "must be a mapping");
  AIRT_RETURN_IF_ERROR(CheckKeys(
      node, path, {"resources", "labels", "min_workers", "max_workers", "node_config"}));
  NodeTypeConfig type;
  type.name = name;
  type.max_workers = cluster_max;
  if (!node["resources"]) return Bad(Join(path, "resources"), "missing (e.g. {CPU: 2})");
  AIRT_ASSIGN_OR_RETURN(auto resources, Scalars(node["resources"], Join(path, "resources")));
  for (const auto& [resource, text] : resources) {
    std::string key = Join(Join(path, "resources"), resource);
    AIRT_ASSIGN_OR_RETURN(double amount, ParseAmount(text, key));
    if (amount > 0) type.resources[resource] = amount;
  }
  if (type.resources.empty()) return Bad(Join(path, "resources"), "must offer some resource");
  AIRT_ASSIGN_OR_RETURN(type.labels, Scalars(node["labels"], Join(path, "labels")));
  AIRT_ASSIGN_OR_RETURN(type.node_config, Scalars(node["node_config"], Join(path, "node_config")));
  if (node["min_workers"]) {
    AIRT_ASSIGN_OR_RETURN(type.min_workers,
                          Count(node["min_workers"], Join(path, "min_workers")));
  }
  if (node["max_workers"]) {
    AIRT_ASSIGN_OR_RETURN(type.max_workers,
                          Count(node["max_workers"], Join(path, "max_workers")));
  }
  if (type.min_workers > type.max_workers) {
    return Bad(Join(path, "min_workers"), std::to_string(type.min_workers) +
                                              " is above max_workers (" +
                                              std::to_string(type.max_workers) + ")");
  }
  return type;
}

}  // namespace

Result<double> ParseAmount(std::string_view text, std::string_view key) {
  std::string s(text);
  double scale = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'K': scale = 1024.0; break;
      case 'M': scale = 1024.0 * 1024; break;
      case 'G': scale = 1024.0 * 1024 * 1024; break;
      case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: break;
    }
    if (scale != 1) s.pop_back();
  }
  try {
    size_t used = 0;
    double value = std::stod(s, &used);
    if (used != s.size() || !std::isfinite(value)) throw std::invalid_argument(s);
    if (value < 0) return Bad(key, "must be >= 0, got " + std::string(text));
    return value * scale;
  } catch (const std::exception&) {
    return Bad(key, "must be a number (e.g. 2, 0.5, 8G), got '" + std::string(text) + "'");
  }
}

Result<ClusterConfig> ParseClusterConfig(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgument("cluster config: not valid YAML: " + std::string(e.what()));
  }
  if (!root.IsMap()) return InvalidArgument("cluster config: must be a mapping of keys");
  try {
    AIRT_RETURN_IF_ERROR(CheckKeys(root, "",
                                   {"cluster_name", "max_workers", "idle_timeout_minutes",
                                    "provider", "available_node_types", "head_node_type"}));
    ClusterConfig config;
    if (!root["cluster_name"]) return Bad("cluster_name", "missing");
    AIRT_ASSIGN_OR_RETURN(config.cluster_name, Text(root["cluster_name"], "cluster_name"));
    if (config.cluster_name.empty()) return Bad("cluster_name", "must not be empty");
    for (char c : config.cluster_name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
        return Bad("cluster_name", "only letters, digits, '-' and '_', got '" +
                                       config.cluster_name + "'");
      }
    }
    if (root["max_workers"]) {
      AIRT_ASSIGN_OR_RETURN(config.max_workers, Count(root["max_workers"], "max_workers"));
    }
    if (root["idle_timeout_minutes"]) {
      AIRT_ASSIGN_OR_RETURN(std::string text,
                            Text(root["idle_timeout_minutes"], "idle_timeout_minutes"));
      AIRT_ASSIGN_OR_RETURN(config.idle_timeout_minutes,
                            ParseAmount(text, "idle_timeout_minutes"));
    }
    const YAML::Node provider = root["provider"];
    if (!provider) return Bad("provider", "missing (e.g. {type: local})");
    AIRT_ASSIGN_OR_RETURN(config.provider.options, Scalars(provider, "provider"));
    auto type = config.provider.options.find("type");
    if (type == config.provider.options.end()) return Bad("provider.type", "missing");
    config.provider.type = type->second;
    config.provider.options.erase(type);
    if (config.provider.type != "local" && config.provider.type != "slurm" &&
        config.provider.type != "fault") {
      return Bad("provider.type", "must be local, slurm or fault, got '" +
                                      config.provider.type + "'");
    }
    const YAML::Node types = root["available_node_types"];
    if (!types) return Bad("available_node_types", "missing");
    if (!types.IsMap() || types.size() == 0) {
      return Bad("available_node_types", "must map node type names to their resources");
    }
    for (const auto& entry : types) {
      std::string name = entry.first.as<std::string>();
      AIRT_ASSIGN_OR_RETURN(NodeTypeConfig node_type,
                            ParseNodeType(name, entry.second,
                                          Join("available_node_types", name), config.max_workers));
      config.node_types[name] = std::move(node_type);
    }
    if (!root["head_node_type"]) return Bad("head_node_type", "missing");
    AIRT_ASSIGN_OR_RETURN(config.head_node_type, Text(root["head_node_type"], "head_node_type"));
    if (config.node_types.count(config.head_node_type) == 0) {
      return Bad("head_node_type", "'" + config.head_node_type +
                                       "' is not one of available_node_types");
    }
    return config;
  } catch (const YAML::Exception& e) {
    return InvalidArgument("cluster config: " + std::string(e.what()));
  }
}

Result<ClusterConfig> LoadClusterConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cluster config " + path + " cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  Result<ClusterConfig> config = ParseClusterConfig(text.str());
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

}  // namespace airt::autoscaler
