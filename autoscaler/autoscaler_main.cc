// airt-autoscaler: the autoscaler of one cluster (docs/autoscaler.md), started by `airt up` beside
// the head. Reads the cluster config, connects to the head, and launches and stops nodes through
// the config's provider until SIGTERM or SIGINT (then it stops every node it launched) or until
// the head's connection drops (likewise). Prints "autoscaler ready <cluster name>" once running.
//   airt-autoscaler --config cluster.yaml --head-address HOST:PORT [--temp-dir DIR]
//                   [--node-binary PATH] [--python-executable PY] [--node-address ADDR]
//                   [--infeasible-grace-ms MS]
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <kj/async-unix.h>

#include "autoscaler/autoscaler.h"
#include "autoscaler/config.h"
#include "autoscaler/provider.h"
#include "common/daemon_process.h"
#include "common/flags.h"
#include "common/logging.h"
#include "common/process.h"
#include "common/rpc_status.h"

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int Fail(const std::string& message) {
  std::cerr << "airt-autoscaler: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  airt::InitProcess("airt-autoscaler");
  std::string config_path, head_address, temp_dir = "/tmp/airt", node_binary, python, node_address;
  uint64_t tick_ms = 250, launch_timeout_ms = 120000;
  std::string infeasible_grace_ms;
  airt::FlagSet flags("airt-autoscaler");
  flags.AddString("config", &config_path, "the cluster config (YAML)");
  flags.AddString("head-address", &head_address, "the head, HOST:PORT");
  flags.AddString("temp-dir", &temp_dir, "where node logs go (<temp-dir>/logs)");
  flags.AddString("node-binary", &node_binary, "airt-node's path (default: found as airt does)");
  flags.AddString("python-executable", &python, "passed to each node it starts");
  flags.AddString("node-address", &node_address, "passed to each node it starts");
  flags.AddString("infeasible-grace-ms", &infeasible_grace_ms, "passed to each node it starts");
  flags.AddUint64("tick-ms", &tick_ms, "how often idle nodes and launches are checked");
  flags.AddUint64("launch-timeout-ms", &launch_timeout_ms,
                  "a node not registered this long after its launch is a failed launch");
  if (airt::Status s = flags.Parse(argc, argv); !s.ok()) {
    if (s.code() == airt::Code::kCancelled) return std::cout << flags.Usage(), 0;
    return Fail(s.message());
  }
  if (config_path.empty() || head_address.empty()) {
    return Fail("give --config and --head-address");
  }
  auto config = airt::autoscaler::LoadClusterConfig(config_path);
  if (!config.ok()) return Fail(config.status().message());
  if (node_binary.empty()) {
    auto found = airt::FindDaemonBinary("airt-node", airt::DaemonSearchDirs({}));
    if (!found.ok()) return Fail(found.status().message());
    node_binary = *found;
  }
  airt::autoscaler::LaunchContext context;
  context.head_address = head_address;
  context.node_binary = node_binary;
  context.temp_dir = temp_dir;
  if (!node_address.empty()) context.node_address = node_address;
  if (!python.empty()) context.extra_node_args.push_back("--python-executable=" + python);
  if (!infeasible_grace_ms.empty()) {
    context.extra_node_args.push_back("--infeasible-grace-ms=" + infeasible_grace_ms);
  }

  std::unique_ptr<airt::autoscaler::CommandRunner> runner = airt::autoscaler::MakeProcessRunner();
  std::unique_ptr<airt::autoscaler::NodeProvider> provider;
  const std::string& type = config->provider.type;
  airt::Status checked = airt::autoscaler::CheckProviderOptions(config->provider);
  if (!checked.ok()) return Fail(checked.message());
  if (type == "local") {
    provider = airt::autoscaler::MakeLocalProvider(context);
  } else if (type == "fault") {
    provider = airt::autoscaler::MakeFaultProvider(
        airt::autoscaler::MakeLocalProvider(context),
        *airt::autoscaler::ParseFaultOptions(config->provider.options), &NowMs);
  } else {
    provider = airt::autoscaler::MakeSlurmProvider(
        context, *runner, *airt::autoscaler::ParseSlurmOptions(config->provider.options));
  }

  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  kj::AsyncIoContext io = kj::setupAsyncIo();
  auto colon = head_address.rfind(':');
  if (colon == std::string::npos) return Fail("--head-address '" + head_address + "' is not host:port");
  kj::Own<kj::AsyncIoStream> stream;
  airt::Status connected = airt::CatchKj([&] {
    stream = io.provider->getNetwork()
                 .parseAddress(head_address.substr(0, colon),
                               static_cast<uint>(std::stoul(head_address.substr(colon + 1))))
                 .wait(io.waitScope)
                 ->connect()
                 .wait(io.waitScope);
  });
  if (!connected.ok()) return Fail("cannot reach the head at " + head_address + ": " +
                                   connected.message());
  capnp::TwoPartyClient client(*stream);
  airt::proto::Head::Client head = client.bootstrap().castAs<airt::proto::Head>();

  airt::autoscaler::AutoscalerOptions options;
  options.tick_ms = static_cast<int64_t>(tick_ms);
  options.launch_timeout_ms = static_cast<int64_t>(launch_timeout_ms);
  std::unique_ptr<airt::autoscaler::NodeConnector> nodes =
      airt::autoscaler::MakeTcpNodeConnector(io.provider->getNetwork());
  options.nodes = nodes.get();
  airt::autoscaler::Autoscaler autoscaler(*config, *provider, head, io.provider->getTimer(),
                                          &NowMs, options);
  kj::Promise<void> running = autoscaler.Run();
  std::printf("autoscaler ready %s\n", config->cluster_name.c_str());
  std::fflush(stdout);
  AIRT_LOG(INFO) << "autoscaler of cluster " << config->cluster_name << " (provider " << type
                 << ") serving head " << head_address;
  std::string why;
  airt::Status ran = airt::CatchKj([&] {
    why = io.unixEventPort.onSignal(SIGTERM)
              .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
              .then([](siginfo_t info) {
                return std::string(info.si_signo == SIGTERM ? "SIGTERM" : "SIGINT");
              })
              .exclusiveJoin(client.onDisconnect().then(
                  [] { return std::string("the head's connection dropped"); }))
              .exclusiveJoin(running.then([] { return std::string("the autoscaler ended"); }))
              .wait(io.waitScope);
  });
  if (!ran.ok()) why = ran.message();
  AIRT_LOG(INFO) << "autoscaler stopping (" << why << "): stopping the nodes it launched";
  autoscaler.TerminateAll();
  return 0;
}
