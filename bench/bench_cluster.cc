#include "bench/bench_cluster.h"

#include <cstdio>

namespace airt::bench {

ClusterFlags::ClusterFlags()
    : head_binary(AIRT_HEAD_BIN),
      node_binary(AIRT_NODE_BIN),
      worker_binary(AIRT_WORKER_BIN),
      functions(AIRT_MICROBENCH_FUNCTIONS) {}

std::optional<int> ParseClusterFlags(const std::string& program, int argc, char** argv,
                                     const std::string& functions_help,
                                     const std::string& quick_help, ClusterFlags* out,
                                     const std::function<void(FlagSet&)>& more) {
  FlagSet flags(program);
  flags.AddString("head-binary", &out->head_binary, "the airt-head to start");
  flags.AddString("node-binary", &out->node_binary, "the airt-node to start");
  flags.AddString("worker-binary", &out->worker_binary, "the airt-worker the nodes start");
  flags.AddString("functions", &out->functions, functions_help);
  flags.AddBool("quick", &out->quick, quick_help);
  if (more) more(flags);
  Status s = flags.Parse(argc, argv);
  if (s.ok()) return std::nullopt;
  std::fprintf(stderr, "%s\n%s", s.message().c_str(), flags.Usage().c_str());
  return s.code() == Code::kCancelled ? 0 : 2;
}

LocalCluster::LocalCluster(ClusterFlags flags) : flags_(std::move(flags)) {}

Result<std::string> LocalCluster::StartHead(std::chrono::seconds timeout) {
  head_ = std::make_unique<DaemonProcess>(
      std::vector<std::string>{flags_.head_binary, "--port=0", "--temp-dir=" + dir_.path()},
      dir_.path() + "/head.log");
  AIRT_ASSIGN_OR_RETURN(address_, head_->WaitForLine("head ready ", timeout));
  return address_;
}

void LocalCluster::StartNode(const std::string& name, const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {flags_.node_binary, "--head-address=" + address_,
                                   "--temp-dir=" + dir_.path() + "/" + name,
                                   "--worker-binary=" + flags_.worker_binary,
                                   "--worker-code-search-path=" + flags_.functions};
  argv.insert(argv.end(), flags.begin(), flags.end());
  nodes_.emplace_back(name,
                      std::make_unique<DaemonProcess>(argv, dir_.path() + "/" + name + ".log"));
}

Result<std::string> LocalCluster::WaitForNode(const std::string& name,
                                              std::chrono::seconds timeout) {
  for (auto& [node_name, node] : nodes_) {
    if (node_name != name) continue;
    AIRT_RETURN_IF_ERROR(node->WaitForLine("node ready ", timeout).status());
    AIRT_ASSIGN_OR_RETURN(std::string socket, NodeStoreSocket(dir_.path() + "/" + name));
    AIRT_RETURN_IF_ERROR(WaitForWarmStore(socket));
    return socket;
  }
  return NotFound("no airt-node named '" + name + "' was started");
}

std::string LocalCluster::LogTail(const std::string& name, size_t bytes) const {
  std::string log = ReadFile(dir_.path() + "/" + name + ".log");
  return log.size() > bytes ? log.substr(log.size() - bytes) : log;
}

}  // namespace airt::bench
