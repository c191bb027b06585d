// The Autoscaler's loop against a real HeadServer over the RPC stack on loopback (a node played
// by the test through registerNode and heartbeat), a provider that records what it is asked and
// a manual clock: a queued GPU shape launches the GPU type at once (no poll: waitDemand answers
// the heartbeat), the launched node is known by its launch id when it registers, the status
// reaches the head's KV, and the node is stopped once idle past the timeout. An idle node with
// primary objects is evacuated first, and spared while they cannot be moved.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

#include <capnp/ez-rpc.h>
#include <kj/async-io.h>
#include <gtest/gtest.h>

#include "autoscaler/autoscaler.h"
#include "common/ids.h"
#include "head/head.h"
#include "head/metadata_store.h"
#include "tests/head/head_doubles.h"

namespace airt::autoscaler {
namespace {

class RecordingProvider final : public NodeProvider {
 public:
  Status Launch(const NodeTypeConfig& type, const std::string& id) override {
    launched.push_back({id, type.name});
    running.insert(id);
    return Status::Ok();
  }
  Status Terminate(const std::string& id) override {
    running.erase(id);
    terminated.push_back(id);
    return Status::Ok();
  }
  std::vector<InstanceState> Poll() override {
    std::vector<InstanceState> states;
    for (const std::string& id : running) states.push_back({id, InstanceState::Phase::kRunning, ""});
    return states;
  }
  std::vector<std::pair<std::string, std::string>> launched;  // id, type
  std::set<std::string> running;
  std::vector<std::string> terminated;
};

int64_t now_ms = 1000;

// A real HeadServer on loopback, a client of it, and the test playing nodes.
class AutoscalerLoop : public ::testing::Test {
 protected:
  AutoscalerLoop()
      : server_(Open(store_, clock_), "127.0.0.1", 0),
        wait(server_.getWaitScope()),
        client_("127.0.0.1", server_.getPort().wait(wait)),
        head(client_.getMain<proto::Head>()),
        timer(server_.getIoProvider().getTimer()) {
    config.cluster_name = "loop";
    config.max_workers = 4;
    config.idle_timeout_minutes = 0.01;  // 600 ms of the manual clock
    config.provider.type = "local";
    config.node_types["cpu"] = {"cpu", {{"CPU", 1}}, {}, 0, 4, {}};
    config.node_types["gpu"] = {"gpu", {{"CPU", 1}, {"GPU", 1}}, {}, 0, 2, {}};
    config.head_node_type = "cpu";
    options.tick_ms = 5;
  }
  ~AutoscalerLoop() noexcept override {}
  static kj::Own<head::HeadServer> Open(head::InMemoryMetadataStore& store,
                                        head::testing::ManualClock& clock) {
    auto opened = head::HeadServer::Open(head::HeadOptions{}, store, clock);
    KJ_REQUIRE(opened.ok());
    return kj::mv(*opened);
  }
  bool Pump(const std::function<bool()>& done) {
    for (int i = 0; i < 5000 && !done(); ++i) timer.afterDelay(kj::MILLISECONDS).wait(wait);
    return done();
  }
  // Registers node `id` (its Node service at 127.0.0.1:`port`), a GPU node of `launch` when set.
  void Node(const NodeId& id, double gpus, const std::string& launch, uint16_t port = 0) {
    auto request = head.registerNodeRequest();
    auto info = request.initInfo();
    info.setNodeId(capnp::Data::Reader(id.data(), NodeId::kSize));
    info.setAddress("127.0.0.1");
    info.setNodePort(port);
    auto total = info.initTotal(gpus > 0 ? 2 : 1);
    total[0].setName("CPU");
    total[0].setAmount(1);
    if (gpus > 0) {
      total[1].setName("GPU");
      total[1].setAmount(gpus);
    }
    auto labels = info.initLabels(launch.empty() ? 0 : 2);
    if (!launch.empty()) {
      labels[0].setKey(kLaunchIdLabel);
      labels[0].setValue(launch);
      labels[1].setKey(kNodeTypeLabel);
      labels[1].setValue("gpu");
    }
    request.send().wait(wait);
  }
  void Heartbeat(const NodeId& id, double gpus, uint32_t queued_gpu, uint64_t primaries = 0) {
    auto request = head.heartbeatRequest();
    request.setNodeId(capnp::Data::Reader(id.data(), NodeId::kSize));
    auto available = request.initAvailable(gpus > 0 ? 2 : 1);
    available[0].setName("CPU");
    available[0].setAmount(1);
    if (gpus > 0) {
      available[1].setName("GPU");
      available[1].setAmount(gpus);
    }
    auto queued = request.initQueued(queued_gpu > 0 ? 1 : 0);
    if (queued_gpu > 0) {
      auto resources = queued[0].initResources(1);
      resources[0].setName("GPU");
      resources[0].setAmount(1);
      queued[0].setCount(queued_gpu);
    }
    request.setNumPrimaryObjects(primaries);
    request.send().wait(wait);
  }

  head::InMemoryMetadataStore store_;
  head::testing::ManualClock clock_;
  capnp::EzRpcServer server_;
  kj::WaitScope& wait;
  capnp::EzRpcClient client_;
  proto::Head::Client head;
  kj::Timer& timer;
  ClusterConfig config;
  AutoscalerOptions options;
  RecordingProvider provider;
};

TEST_F(AutoscalerLoop, LaunchesForAQueuedShapeKnowsTheNodeAndStopsItWhenIdle) {
  Autoscaler autoscaler(config, provider, head, timer, [] { return now_ms; }, options);
  kj::Promise<void> running = autoscaler.Run().eagerlyEvaluate(nullptr);

  // The head's node: no GPU; one {GPU: 1} request queued on it.
  NodeId head_node = NodeId::FromRandom();
  Node(head_node, 0, "");
  Heartbeat(head_node, 0, 1);
  ASSERT_TRUE(Pump([&] { return provider.launched.size() == 1; }));
  EXPECT_EQ(provider.launched[0].second, "gpu");
  // Launching counts: more rounds launch nothing more for the same demand.
  for (int i = 0; i < 20; ++i) timer.afterDelay(kj::MILLISECONDS).wait(wait);
  EXPECT_EQ(provider.launched.size(), 1u);

  NodeId gpu_node = NodeId::FromRandom();
  Node(gpu_node, 1, provider.launched[0].first);
  Heartbeat(gpu_node, 1, 0);
  Heartbeat(head_node, 0, 0);  // the request spilled to it and ran
  ASSERT_TRUE(Pump([&] {
    AutoscalerSnapshot s = autoscaler.Snapshot();
    return s.launches.size() == 1 && !s.launches[0].node_id.empty();
  }));
  EXPECT_EQ(autoscaler.Snapshot().launches[0].node_id, gpu_node.Hex());
  EXPECT_TRUE(provider.terminated.empty());  // idle, but not for long yet

  now_ms += 700;  // past idle_timeout_minutes
  ASSERT_TRUE(Pump([&] { return provider.terminated.size() == 1; }));
  EXPECT_EQ(provider.terminated[0], provider.launched[0].first);
  AutoscalerSnapshot s = autoscaler.Snapshot();
  ASSERT_EQ(s.stopped.size(), 1u);
  EXPECT_NE(s.stopped[0].reason.find("idle for"), std::string::npos) << s.stopped[0].reason;

  ASSERT_TRUE(Pump([&] {
    auto request = head.kvGetRequest();
    request.setNamespace("autoscaler");
    request.setKey("status");
    auto reply = request.send().wait(wait);
    if (!reply.getFound()) return false;
    std::string text(reinterpret_cast<const char*>(reply.getValue().begin()),
                     reply.getValue().size());
    return text.find("idle for") != std::string::npos;
  }));
  auto types = head.kvGetRequest();
  types.setNamespace("autoscaler");
  types.setKey("node_types");
  EXPECT_TRUE(types.send().wait(wait).getFound());
}

// A port of this host where nothing listens (bound, then closed).
uint16_t DeadPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

TEST_F(AutoscalerLoop, SparesAnIdleNodeWithPrimaryObjectsUntilTheyAreMoved) {
  std::unique_ptr<NodeConnector> nodes = MakeTcpNodeConnector(server_.getIoProvider().getNetwork());
  options.nodes = nodes.get();
  options.evacuation_retry_ms = 100;
  Autoscaler autoscaler(config, provider, head, timer, [] { return now_ms; }, options);
  kj::Promise<void> running = autoscaler.Run().eagerlyEvaluate(nullptr);
  NodeId head_node = NodeId::FromRandom();
  Node(head_node, 0, "");
  Heartbeat(head_node, 0, 1);
  ASSERT_TRUE(Pump([&] { return provider.launched.size() == 1; }));
  // The GPU node holds primary objects, and its Node service cannot be reached: the evacuation
  // fails, so it is spared however long it stays idle.
  NodeId gpu_node = NodeId::FromRandom();
  Node(gpu_node, 1, provider.launched[0].first, DeadPort());
  Heartbeat(gpu_node, 1, 0, /*primaries=*/3);
  Heartbeat(head_node, 0, 0);
  ASSERT_TRUE(Pump([&] {
    AutoscalerSnapshot s = autoscaler.Snapshot();
    return s.launches.size() == 1 && !s.launches[0].node_id.empty();
  }));
  now_ms += 700;  // past idle_timeout_minutes
  ASSERT_TRUE(Pump([&] { return !autoscaler.Snapshot().spared.empty(); }));
  EXPECT_NE(autoscaler.Snapshot().spared[0].find("evacuating its primary objects failed"),
            std::string::npos)
      << autoscaler.Snapshot().spared[0];
  now_ms += 700;
  ASSERT_TRUE(Pump([&] { return autoscaler.Snapshot().spared.size() >= 2; }));  // tried again
  EXPECT_TRUE(provider.terminated.empty());
  EXPECT_NE(autoscaler.StatusText().find("Spared"), std::string::npos);

  // Its objects are gone elsewhere (its heartbeat says none): it stops as any idle node.
  Heartbeat(gpu_node, 1, 0, /*primaries=*/0);
  now_ms += 700;
  ASSERT_TRUE(Pump([&] { return provider.terminated.size() == 1; }));
  EXPECT_EQ(provider.terminated[0], provider.launched[0].first);
}

}  // namespace
}  // namespace airt::autoscaler
