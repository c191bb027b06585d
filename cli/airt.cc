// airt: the command line, with Ray's verbs.
//   airt start --head [--port P] [node flags]    a head and a node on this machine
//   airt start --address HOST:PORT [node flags]  a node joining that head
//   airt status [--address HOST:PORT]            nodes, alive/dead, resources, GPU ids in use
//   airt stop                                    stops what `airt start` started here
//   airt up CLUSTER.yaml [--temp-dir DIR]        a head, its node and the autoscaler
//   airt down CLUSTER.yaml [--temp-dir DIR]      stops what `airt up` started
//   airt gpu return NODE GPU [--address ...]     re-tests a quarantined GPU, back in service if
//                                                it passes (NODE: an id prefix from `status`)
//   airt drain NODE [--deadline S] [--reason T]  drains a node: no new leases, its work runs
//                [--wait]                        for at most S seconds, then it leaves
// Node flags: --num-cpus N --num-gpus N --memory BYTES --resources '{"name": n}'
//             --labels ray.io/accelerator-type=A10,zone=a --object-store-memory BYTES
//             --object-store-fallback-limit BYTES (objects on disk when memory is full)
//             --gpu-memory BYTES --gpu-fault-spec SPEC (docs/gpu.md)
//             --code-search-path DIRS (where workers load AIRT_REMOTE code from)
//             --python-executable PY (runs Python tasks; default $AIRT_PYTHON, which the
//             pip-installed `airt` sets to its own interpreter, else the python3 on PATH if it
//             imports airt: docs/install.md)
// Common: --temp-dir DIR (default /tmp/airt), --node-address ADDR (default 127.0.0.1).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>
#include <sstream>

#include <capnp/ez-rpc.h>

#include "cli/drain.h"
#include "cli/session.h"
#include "cli/up_down.h"
#include "common/daemon_process.h"
#include "common/flags.h"
#include "common/ids.h"
#include "common/process.h"
#include "common/proto/cluster.capnp.h"
#include "common/proto/node.capnp.h"
#include "common/rpc_status.h"

namespace airt::cli {
namespace {

struct NodeFlags {
  std::string num_cpus, num_gpus, memory, resources, labels, object_store_memory, code_search_path;
  std::string python_executable, gpu_memory, gpu_fault_spec, object_store_fallback_limit;
  std::string node_address = "127.0.0.1";

  void Register(FlagSet* flags) {
    flags->AddString("num-cpus", &num_cpus, "CPUs this node offers (default: all)");
    flags->AddString("num-gpus", &num_gpus, "GPUs this node offers (default: detected)");
    flags->AddString("memory", &memory, "memory this node offers to tasks, e.g. 8G");
    flags->AddString("resources", &resources, "custom resources as JSON, e.g. '{\"TPU\": 2}'");
    flags->AddString("labels", &labels, "labels, e.g. ray.io/accelerator-type=A10,zone=a");
    flags->AddString("gpu-memory", &gpu_memory, "bytes of each declared GPU, e.g. 16G");
    flags->AddString("gpu-fault-spec", &gpu_fault_spec,
                     "inject GPU failures (drills; docs/gpu.md), e.g. gpu=0:xid=79");
    flags->AddString("object-store-memory", &object_store_memory, "the node's object store size");
    flags->AddString("object-store-fallback-limit", &object_store_fallback_limit,
                     "bytes of objects the node's store may keep in fallback files on disk when "
                     "memory is full, e.g. 10G (0: none; default: airt-node's)");
    flags->AddString("code-search-path", &code_search_path,
                     "folders (or .so files) with AIRT_REMOTE code, ':'-separated, for workers");
    flags->AddString("node-address", &node_address,
                     "address this node's services bind and announce");
    flags->AddString("python-executable", &python_executable,
                     "the python3 that runs Python tasks (default: $AIRT_PYTHON, else the python3 "
                     "on PATH if it imports airt)");
  }
  // Which interpreter the node runs Python tasks with, for the user.
  std::string PythonNote() const {
    if (!python_executable.empty()) return python_executable;
    if (const char* env = std::getenv("AIRT_PYTHON"); env && *env) return env;
    return "the python3 on PATH, if it imports airt (else they are refused: see "
           "--python-executable)";
  }
  std::vector<std::string> Args() const {
    std::vector<std::string> args;
    auto add = [&](const char* name, const std::string& v) {
      if (!v.empty()) args.push_back(std::string("--") + name + "=" + v);
    };
    add("num-cpus", num_cpus);
    add("num-gpus", num_gpus);
    add("memory", memory);
    add("resources", resources);
    add("labels", labels);
    add("object-store-memory", object_store_memory);
    add("object-store-fallback-limit", object_store_fallback_limit);
    add("worker-code-search-path", code_search_path);
    add("node-address", node_address);
    add("python-executable", python_executable);
    add("gpu-memory", gpu_memory);
    add("gpu-fault-spec", gpu_fault_spec);
    return args;
  }
};

int Fail(const Status& s) {
  std::cerr << "airt: " << s.message() << "\n";
  return 1;
}

Result<std::string> StartNode(Session& session, const std::string& head_address,
                              const NodeFlags& node, const std::string& temp_dir) {
  AIRT_ASSIGN_OR_RETURN(std::string binary, FindDaemonBinary("airt-node", DaemonSearchDirs({})));
  std::vector<std::string> argv = {binary, "--head-address=" + head_address,
                                   "--temp-dir=" + temp_dir};
  for (std::string& a : node.Args()) argv.push_back(std::move(a));
  std::string name = "node-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand());
  return session.Launch(name, argv, temp_dir + "/logs/" + name + ".out", "node ready ",
                        std::chrono::seconds(30));
}

int StartCommand(int argc, char** argv) {
  bool head = false;
  std::string address, temp_dir = "/tmp/airt", port = "6379";
  NodeFlags node;
  FlagSet flags("airt start");
  flags.AddBool("head", &head, "start a head (and a node) on this machine");
  flags.AddString("address", &address, "join the head at HOST:PORT");
  flags.AddString("port", &port, "the head's port (0: any free port)");
  flags.AddString("temp-dir", &temp_dir, "where sessions, logs and sockets go");
  node.Register(&flags);
  if (Status s = flags.Parse(argc, argv); !s.ok()) {
    if (s.code() == Code::kCancelled) return std::cout << flags.Usage(), 0;
    return Fail(s);
  }
  if (head == !address.empty()) return Fail(InvalidArgument("give either --head or --address"));
  Session session(temp_dir);
  if (head) {
    if (session.HeadAddress()) {
      return Fail(FailedPrecondition("a head was started here already (" + *session.HeadAddress() +
                                     "); run `airt stop` first"));
    }
    Result<std::string> binary = FindDaemonBinary("airt-head", DaemonSearchDirs({}));
    if (!binary.ok()) return Fail(binary.status());
    std::vector<std::string> head_argv = {
        *binary, "--port=" + port, "--bind-address=" + node.node_address, "--temp-dir=" + temp_dir};
    auto ready = session.Launch("head", head_argv, temp_dir + "/logs/head.out", "head ready ",
                                std::chrono::seconds(30));
    if (!ready.ok()) return Fail(ready.status());
    address = *ready;
    if (Status s = session.SaveHeadAddress(address); !s.ok()) return Fail(s);
  }
  auto node_id = StartNode(session, address, node, temp_dir);
  if (!node_id.ok()) return Fail(node_id.status());
  if (head) {
    std::cout << "Started the head at " << address << " and node " << *node_id << ".\n"
              << "  Add a node on another machine:  airt start --address " << address << "\n"
              << "  See the cluster:                airt status\n"
              << "  Stop what was started here:     airt stop\n"
              << "  Python tasks run with:          " << node.PythonNote() << "\n";
  } else {
    std::cout << "Started node " << *node_id << ", joined " << address << ".\n"
              << "  Python tasks run with: " << node.PythonNote() << "\n";
  }
  return 0;
}

std::string FormatAmount(const std::string& name, double v) {
  std::ostringstream out;
  if (name == "memory" || name == "object_store_memory") {
    out.precision(3);
    if (v >= (1 << 30)) {
      out << v / (1 << 30) << "GiB";
    } else {
      out << v / (1 << 20) << "MiB";
    }
  } else {
    out << v;
  }
  return out.str();
}

// The node's quarantined GPUs and cordon, asked of the node itself.
void PrintGpuHealth(const std::string& host, uint16_t port) {
  Status s = CatchKj([&] {
    capnp::EzRpcClient client(host, port);
    auto reply = client.getMain<proto::Node>().gpuHealthRequest().send().wait(
        client.getWaitScope());
    if (reply.getCordoned().size() > 0) {
      std::printf("%-10s CORDONED since %s: %s\n", "",
                  FormatUtc(reply.getCordonedSinceMs()).c_str(), reply.getCordoned().cStr());
    }
    for (auto gpu : reply.getGpus()) {
      if (!gpu.getQuarantined()) continue;
      std::printf("%-10s GPU %u%s QUARANTINED since %s: %s\n", "", gpu.getGpuId(),
                  gpu.getUuid().size() ? (" (" + std::string(gpu.getUuid().cStr()) + ")").c_str()
                                       : "",
                  FormatUtc(gpu.getSinceMs()).c_str(), gpu.getReason().cStr());
    }
  });
  if (!s.ok()) std::printf("%-10s GPU health: %s\n", "", s.message().c_str());
}

// The head's placement groups not REMOVED: state, strategy, each bundle with its node, and why a
// pending one waits (an infeasible one is marked so).
void PrintPlacementGroups(proto::Head::Client& head, kj::WaitScope& wait) {
  static const char* const kStrategies[] = {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"};
  static const char* const kStates[] = {"PENDING", "CREATED", "REMOVED", "RESCHEDULING"};
  auto groups = head.listPlacementGroupsRequest().send().wait(wait).getGroups();
  int removed = 0;
  for (auto g : groups) removed += g.getState() == proto::PlacementGroupState::REMOVED ? 1 : 0;
  std::printf("Placement groups: %d, %d removed\n", static_cast<int>(groups.size()) - removed,
              removed);
  for (auto g : groups) {
    auto state = static_cast<unsigned>(g.getState());
    auto strategy = static_cast<unsigned>(g.getStrategy());
    if (g.getState() == proto::PlacementGroupState::REMOVED) continue;
    std::string id = g.getGroupId().size() == PlacementGroupId::kSize
                         ? PlacementGroupId::FromRaw(g.getGroupId().begin()).Hex()
                         : "?";
    std::printf("  group %s%s%s  %s  %s%s\n", id.c_str(), g.getName().size() ? "  " : "",
                g.getName().cStr(), state < 4 ? kStates[state] : "?",
                strategy < 4 ? kStrategies[strategy] : "?", g.getInfeasible() ? "  INFEASIBLE" : "");
    auto nodes = g.getBundleNodes();
    auto selectors = g.getBundleLabelSelector();
    for (uint i = 0; i < g.getBundles().size(); ++i) {
      std::string bundle;
      for (auto r : g.getBundles()[i].getResources()) {
        std::string name = r.getName().cStr();
        bundle += (bundle.empty() ? "" : ", ") + name + ": " + FormatAmount(name, r.getAmount());
      }
      std::string labels;
      if (i < selectors.size()) {
        for (auto e : selectors[i].getExpressions()) {
          static const char* const kOps[] = {"in", "not in", "exists", "does not exist"};
          auto op = static_cast<unsigned>(e.getOp());
          labels += (labels.empty() ? "" : ", ") + std::string(e.getKey().cStr()) + " " +
                    (op < 4 ? kOps[op] : "?");
          std::string values;
          for (auto v : e.getValues()) values += (values.empty() ? "" : ",") + std::string(v.cStr());
          if (!values.empty()) labels += " (" + values + ")";
        }
      }
      std::string node = i < nodes.size() && nodes[i].size() == NodeId::kSize
                             ? NodeId::FromRaw(nodes[i].begin()).Hex().substr(0, 8)
                             : "-";
      std::printf("      bundle %u {%s}%s%s  node %s\n", i, bundle.c_str(),
                  labels.empty() ? "" : "  labels ", labels.c_str(), node.c_str());
    }
    if (g.getState() == proto::PlacementGroupState::PENDING && g.getPendingReason().size()) {
      std::printf("      pending: %s\n", g.getPendingReason().cStr());
    }
  }
}

int PrintStatus(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    return Fail(InvalidArgument("address '" + address + "' is not host:port"));
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 1ull << 30;
  Status s = CatchKj([&] {
    capnp::EzRpcClient client(address.substr(0, colon),
                              static_cast<uint>(std::stoul(address.substr(colon + 1))), options);
    auto head = client.getMain<proto::Head>();
    auto view = head.clusterViewRequest().send().wait(client.getWaitScope());
    auto nodes = view.getNodes();
    int alive = 0;
    for (auto n : nodes) alive += n.getAlive() ? 1 : 0;
    std::printf("======== airt cluster: head %s ========\n", address.c_str());
    std::printf("Nodes: %d alive, %d dead\n\n", alive, static_cast<int>(nodes.size()) - alive);
    std::printf("%-10s %-22s %-6s %-52s %s\n", "node", "address", "state",
                "resources (available/total)", "GPU ids in use");
    for (auto n : nodes) {
      auto info = n.getInfo();
      auto id_bytes = info.getNodeId();
      std::string full_id =
          id_bytes.size() == NodeId::kSize ? NodeId::FromRaw(id_bytes.begin()).Hex() : "";
      std::string id = full_id.empty() ? "?" : full_id.substr(0, 8);
      std::map<std::string, double> available;
      for (auto r : n.getAvailable()) available[r.getName().cStr()] = r.getAmount();
      std::string resources;
      for (auto r : info.getTotal()) {
        std::string name = r.getName().cStr();
        if (name == "node:" + full_id) continue;  // the node's own: its id is in the first column
        if (!resources.empty()) resources += "  ";
        resources += name + " " + FormatAmount(name, available[name]) + "/" +
                     FormatAmount(name, r.getAmount());
      }
      std::string gpus;
      for (auto g : n.getGpuIdsInUse()) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
      std::string addr =
          std::string(info.getAddress().cStr()) + ":" + std::to_string(info.getNodePort());
      const char* state = !n.getAlive() ? "DEAD" : n.getDraining() ? "DRAIN" : "alive";
      std::printf("%-10s %-22s %-6s %-52s %s\n", id.c_str(), addr.c_str(), state,
                  resources.c_str(), gpus.empty() ? "-" : gpus.c_str());
      if (n.getAlive() && n.getDraining()) {
        std::printf("%-10s DRAINING until %s: %s\n", "",
                    FormatUtc(n.getDrainDeadlineMs()).c_str(), n.getDrainReason().cStr());
      }
      std::string labels;
      for (auto l : info.getLabels()) {
        labels += (labels.empty() ? "" : ", ") + std::string(l.getKey().cStr()) + "=" +
                  l.getValue().cStr();
      }
      if (!labels.empty()) std::printf("%-10s labels: %s\n", "", labels.c_str());
      if (n.getAlive() && info.getGpuIds().size() > 0) {
        PrintGpuHealth(std::string(info.getAddress().cStr()), info.getNodePort());
      }
      if (!n.getAlive() && n.getDeathCause().size() > 0) {
        std::string when;
        if (n.getDeathTimeMs() > 0) {
          std::time_t t = static_cast<std::time_t>(n.getDeathTimeMs() / 1000);
          char buf[32];
          std::tm tm{};
          gmtime_r(&t, &tm);
          std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
          when = std::string(" at ") + buf;
        }
        std::printf("%-10s died%s: %s\n", "", when.c_str(), n.getDeathCause().cStr());
      }
    }
    // The running jobs, each with the libraries its workers load (the head's library table), and
    // the actors alive.
    auto jobs = head.listJobsRequest().send().wait(client.getWaitScope()).getJobs();
    int running = 0;
    for (auto j : jobs) running += j.getAlive() ? 1 : 0;
    std::printf("\nJobs: %d running, %d finished\n", running,
                static_cast<int>(jobs.size()) - running);
    for (auto j : jobs) {
      if (!j.getAlive() || j.getJobId().size() != JobId::kSize) continue;
      std::printf("  job %s  driver pid %d  code: %s\n",
                  JobId::FromRaw(j.getJobId().begin()).Hex().c_str(), j.getDriverPid(),
                  j.getCodeSearchPath().size() ? j.getCodeSearchPath().cStr() : "-");
    }
    auto actors = head.listActorsRequest().send().wait(client.getWaitScope()).getActors();
    int live = 0;
    for (auto a : actors) live += a.getState() != proto::ActorState::DEAD ? 1 : 0;
    std::printf("Actors: %d alive or starting, %d dead\n", live,
                static_cast<int>(actors.size()) - live);
    PrintPlacementGroups(head, client.getWaitScope());
    // What the autoscaler, when one runs, is doing (it keeps this current in the head's KV).
    auto get = head.kvGetRequest();
    get.setNamespace("autoscaler");
    get.setKey("status");
    auto status = get.send().wait(client.getWaitScope());
    if (status.getFound()) {
      auto value = status.getValue();
      std::printf("\n%.*s", static_cast<int>(value.size()),
                  reinterpret_cast<const char*>(value.begin()));
    }
  });
  if (!s.ok()) return Fail(s.WithContext("asking the head at " + address));
  return 0;
}

int StatusCommand(int argc, char** argv) {
  std::string address, temp_dir = "/tmp/airt";
  FlagSet flags("airt status");
  flags.AddString("address", &address,
                  "the head, HOST:PORT (default: the one started here, "
                  "else AIRT_ADDRESS)");
  flags.AddString("temp-dir", &temp_dir, "the temp folder `airt start` used");
  if (Status s = flags.Parse(argc, argv); !s.ok()) {
    if (s.code() == Code::kCancelled) return std::cout << flags.Usage(), 0;
    return Fail(s);
  }
  address = ResolveHeadAddress(address, temp_dir);
  if (address.empty()) {
    return Fail(NotFound("no cluster started here; pass --address or set AIRT_ADDRESS"));
  }
  return PrintStatus(address);
}

// airt gpu return NODE GPU: the node (an id prefix, as `airt status` shows it) re-tests its
// quarantined GPU and returns it to service if it passes.
int GpuCommand(int argc, char** argv) {
  std::string address, temp_dir = "/tmp/airt";
  FlagSet flags("airt gpu return NODE GPU");
  flags.AddString("address", &address, "the head, HOST:PORT (default: as airt status)");
  flags.AddString("temp-dir", &temp_dir, "the temp folder `airt start` used");
  std::vector<std::string> words;
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') {
      rest.push_back(argv[i]);
    } else {
      words.push_back(argv[i]);
    }
  }
  if (Status s = flags.Parse(static_cast<int>(rest.size()), rest.data()); !s.ok()) {
    if (s.code() == Code::kCancelled) return std::cout << flags.Usage(), 0;
    return Fail(s);
  }
  if (words.size() != 3 || words[0] != "return") {
    return Fail(InvalidArgument("usage: airt gpu return NODE GPU [--address HOST:PORT]"));
  }
  const std::string& prefix = words[1];
  uint32_t gpu = 0;
  try {
    size_t used = 0;
    unsigned long value = std::stoul(words[2], &used);
    if (used != words[2].size() || value > 0xFFFFFFFFul) throw std::invalid_argument("range");
    gpu = static_cast<uint32_t>(value);
  } catch (const std::exception&) {
    return Fail(InvalidArgument("GPU '" + words[2] + "' is not a GPU id (e.g. 0)"));
  }
  address = ResolveHeadAddress(address, temp_dir);
  if (address.empty()) {
    return Fail(NotFound("no cluster started here; pass --address or set AIRT_ADDRESS"));
  }
  Result<AliveNode> node = FindAliveNode(address, prefix);
  if (!node.ok()) return Fail(node.status());
  Status s = CatchKj([&] {
    capnp::EzRpcClient client(node->host, node->port);
    auto ask = client.getMain<proto::Node>().returnGpuRequest();
    ask.setGpuId(gpu);
    ask.send().wait(client.getWaitScope());
  });
  if (!s.ok()) return Fail(s);
  std::cout << "GPU " << gpu << " of node " << prefix << " passed its check and is back in service.\n";
  return 0;
}

int StopCommand(int argc, char** argv) {
  std::string temp_dir = "/tmp/airt";
  FlagSet flags("airt stop");
  flags.AddString("temp-dir", &temp_dir, "the temp folder `airt start` used");
  if (Status s = flags.Parse(argc, argv); !s.ok()) {
    if (s.code() == Code::kCancelled) return std::cout << flags.Usage(), 0;
    return Fail(s);
  }
  int stopped = Session(temp_dir).StopAll(std::chrono::seconds(10));
  std::cout << "Stopped " << stopped << " airt process" << (stopped == 1 ? "" : "es") << ".\n";
  return 0;
}

}  // namespace
}  // namespace airt::cli

int main(int argc, char** argv) {
  airt::InitProcess("airt");
  const char* usage =
      "usage: airt <command> [flags]\n"
      "  start --head | --address HOST:PORT   start a head and a node, or a node\n"
      "  status [--address HOST:PORT]         show the cluster\n"
      "  stop                                 stop what `airt start` started here\n"
      "  gpu return NODE GPU                  re-test a quarantined GPU, back in service if ok\n"
      "  drain NODE [--deadline S] [--reason TEXT]  stop new work on a node, then it leaves\n"
      "  up CLUSTER.yaml                      start a head, its node and the autoscaler\n"
      "  down CLUSTER.yaml                    stop what `airt up` started\n"
      "Each command takes --help.\n";
  if (argc < 2) return std::cerr << usage, 2;
  std::string verb = argv[1];
  if (verb == "start") return airt::cli::StartCommand(argc - 1, argv + 1);
  if (verb == "status") return airt::cli::StatusCommand(argc - 1, argv + 1);
  if (verb == "stop") return airt::cli::StopCommand(argc - 1, argv + 1);
  if (verb == "gpu") return airt::cli::GpuCommand(argc - 1, argv + 1);
  if (verb == "drain") return airt::cli::DrainCommand(argc - 1, argv + 1);
  if (verb == "up") return airt::cli::UpCommand(argc - 1, argv + 1);
  if (verb == "down") return airt::cli::DownCommand(argc - 1, argv + 1);
  if (verb == "--help" || verb == "-h" || verb == "help") return std::cout << usage, 0;
  std::cerr << "airt: unknown command '" << verb << "'\n" << usage;
  return 2;
}
