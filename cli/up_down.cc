// airt up cluster.yaml / airt down cluster.yaml (docs/autoscaler.md "airt up").
#include "cli/up_down.h"

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "autoscaler/config.h"
#include "autoscaler/provider.h"
#include "cli/session.h"
#include "common/daemon_process.h"
#include "common/flags.h"

namespace airt::cli {
namespace {

int Fail(const Status& s) {
  std::cerr << "airt: " << s.message() << "\n";
  return 1;
}

std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", v);
  return text;
}

// airt-node's flags for the head's node: its type's resources and labels.
std::vector<std::string> HeadNodeArgs(const autoscaler::NodeTypeConfig& type) {
  std::vector<std::string> args;
  auto amount = [&](const char* name) {
    auto it = type.resources.find(name);
    return it == type.resources.end() ? 0.0 : it->second;
  };
  args.push_back("--num-cpus=" + Number(amount("CPU")));
  args.push_back("--num-gpus=" + Number(amount("GPU")));
  if (amount("memory") > 0) args.push_back("--memory=" + Number(amount("memory")));
  std::string custom;
  for (const auto& [name, value] : type.resources) {
    if (name == "CPU" || name == "GPU" || name == "memory") continue;
    custom += (custom.empty() ? "" : ", ") + ("\"" + name + "\": " + Number(value));
  }
  if (!custom.empty()) args.push_back("--resources={" + custom + "}");
  std::string labels = "airt.io/node-type=" + type.name;
  for (const auto& [key, value] : type.labels) labels += "," + key + "=" + value;
  args.push_back("--labels=" + labels);
  return args;
}

struct UpFlags {
  std::string temp_dir = "/tmp/airt", port = "0", python_executable, node_address = "127.0.0.1";
  std::string infeasible_grace_ms;
  std::vector<std::string> words;
};

Result<UpFlags> ParseUpFlags(const char* name, int argc, char** argv, bool up) {
  UpFlags parsed;
  FlagSet flags(name);
  flags.AddString("temp-dir", &parsed.temp_dir, "where sessions, logs and sockets go");
  if (up) {
    flags.AddString("port", &parsed.port, "the head's port (0: any free port)");
    flags.AddString("python-executable", &parsed.python_executable,
                    "the python3 that runs Python tasks on every node");
    flags.AddString("node-address", &parsed.node_address,
                    "address the head and the nodes bind and announce");
    flags.AddString("infeasible-grace-ms", &parsed.infeasible_grace_ms,
                    "every node's wait before a shape no node or node type holds is infeasible");
  }
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') {
      rest.push_back(argv[i]);
    } else if (i > 1 && argv[i - 1][0] == '-' && std::string(argv[i - 1]).find('=') ==
                                                      std::string::npos) {
      rest.push_back(argv[i]);  // the value of "--flag value"
    } else {
      parsed.words.push_back(argv[i]);
    }
  }
  AIRT_RETURN_IF_ERROR(flags.Parse(static_cast<int>(rest.size()), rest.data()));
  if (parsed.words.size() != 1) {
    return InvalidArgument(std::string("usage: ") + name + " CLUSTER.yaml [flags]");
  }
  return parsed;
}

}  // namespace

int UpCommand(int argc, char** argv) {
  Result<UpFlags> flags = ParseUpFlags("airt up", argc, argv, /*up=*/true);
  if (!flags.ok()) return Fail(flags.status());
  std::error_code ec;
  std::string config_path = std::filesystem::absolute(flags->words[0], ec).string();
  Result<autoscaler::ClusterConfig> config = autoscaler::LoadClusterConfig(config_path);
  if (!config.ok()) return Fail(config.status());
  if (Status checked = autoscaler::CheckProviderOptions(config->provider); !checked.ok()) {
    return Fail(checked.WithContext(config_path));
  }
  Session session(flags->temp_dir);
  if (session.HeadAddress()) {
    return Fail(FailedPrecondition("a head was started here already (" + *session.HeadAddress() +
                                   "); run `airt down` or `airt stop` first"));
  }
  auto dirs = DaemonSearchDirs({});
  Result<std::string> head_binary = FindDaemonBinary("airt-head", dirs);
  if (!head_binary.ok()) return Fail(head_binary.status());
  Result<std::string> node_binary = FindDaemonBinary("airt-node", dirs);
  if (!node_binary.ok()) return Fail(node_binary.status());
  Result<std::string> autoscaler_binary = FindDaemonBinary("airt-autoscaler", dirs);
  if (!autoscaler_binary.ok()) return Fail(autoscaler_binary.status());
  const std::string& temp = flags->temp_dir;
  auto address = session.Launch("head",
                                {*head_binary, "--port=" + flags->port,
                                 "--bind-address=" + flags->node_address, "--temp-dir=" + temp},
                                temp + "/logs/head.out", "head ready ", std::chrono::seconds(30));
  auto undo = [&](const Status& s) {
    session.StopAll(std::chrono::seconds(10));
    return Fail(s);
  };
  if (!address.ok()) return undo(address.status());
  if (Status s = session.SaveHeadAddress(*address); !s.ok()) return undo(s);
  std::vector<std::string> node_argv = {*node_binary, "--head-address=" + *address,
                                        "--temp-dir=" + temp,
                                        "--node-address=" + flags->node_address};
  for (std::string& arg : HeadNodeArgs(config->node_types.at(config->head_node_type))) {
    node_argv.push_back(std::move(arg));
  }
  if (!flags->python_executable.empty()) {
    node_argv.push_back("--python-executable=" + flags->python_executable);
  }
  if (!flags->infeasible_grace_ms.empty()) {
    node_argv.push_back("--infeasible-grace-ms=" + flags->infeasible_grace_ms);
  }
  auto node_id = session.Launch("node-head", node_argv, temp + "/logs/node-head.out",
                                "node ready ", std::chrono::seconds(30));
  if (!node_id.ok()) return undo(node_id.status());
  std::vector<std::string> autoscaler_argv = {
      *autoscaler_binary, "--config=" + config_path, "--head-address=" + *address,
      "--temp-dir=" + temp, "--node-binary=" + *node_binary,
      "--node-address=" + flags->node_address};
  if (!flags->python_executable.empty()) {
    autoscaler_argv.push_back("--python-executable=" + flags->python_executable);
  }
  if (!flags->infeasible_grace_ms.empty()) {
    autoscaler_argv.push_back("--infeasible-grace-ms=" + flags->infeasible_grace_ms);
  }
  auto ready = session.Launch("autoscaler", autoscaler_argv, temp + "/logs/autoscaler.out",
                              "autoscaler ready ", std::chrono::seconds(30));
  if (!ready.ok()) return undo(ready.status());
  std::cout << "Cluster " << config->cluster_name << " is up: head at " << *address
            << ", head node " << *node_id << " (" << config->head_node_type << "), autoscaler "
            << "(provider " << config->provider.type << ", max_workers " << config->max_workers
            << ").\n"
            << "  Connect:  airt.init(address=\"" << *address << "\")\n"
            << "  Watch:    airt status --temp-dir " << temp << "\n"
            << "  Stop:     airt down " << flags->words[0] << " --temp-dir " << temp << "\n";
  return 0;
}

int DownCommand(int argc, char** argv) {
  Result<UpFlags> flags = ParseUpFlags("airt down", argc, argv, /*up=*/false);
  if (!flags.ok()) return Fail(flags.status());
  Result<autoscaler::ClusterConfig> config = autoscaler::LoadClusterConfig(flags->words[0]);
  if (!config.ok()) return Fail(config.status());
  int stopped = Session(flags->temp_dir).StopAll(std::chrono::seconds(10));
  std::cout << "Cluster " << config->cluster_name << " is down: stopped " << stopped
            << " airt process" << (stopped == 1 ? "" : "es")
            << " (the autoscaler stopped the nodes it launched).\n";
  return 0;
}

}  // namespace airt::cli
