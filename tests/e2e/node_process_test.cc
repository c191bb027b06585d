// Real airt-node processes against a fake head served in this test process (on a thread of its
// own): what a node registers, its heartbeats, registering again when the head forgets it or
// restarts, living through a head outage, and leaving cleanly on SIGTERM. Every node is a child
// process killed by pid; each test has its own temp folder and ports; waits have deadlines.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/ids.h"
#include "objectstore/object_store.h"
#include "tests/testing/test_support.h"
#include "tests/worker/fake_head.h"

#ifdef AIRT_GPU_PLUGIN_PATH
#include "gpu/gpu_plugin.h"
#endif

namespace airt::e2e {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::FakeHeadState;
using testing::FakeHeadThread;
using testing::ReadFile;
using testing::RecordedNode;
using testing::WaitUntil;

constexpr uint64_t kMiB = 1 << 20;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

bool TcpConnects(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

class NodeProcess : public ::testing::Test {
 protected:
  struct Node {
    std::string log;
    std::unique_ptr<ChildProcess> process;
  };

  NodeProcess() {
    ::unsetenv("CUDA_VISIBLE_DEVICES");  // GPU ids 0..N-1 in these tests, as on a CPU machine
    state_->heartbeat_interval_ms = 50;
    temp_ = dir_.File("airt");
  }

  void TearDown() override {
    if (HasFailure()) {
      for (const auto& node : nodes_) {
        std::cerr << "---- " << node->log << " ----\n" << ReadFile(node->log);
      }
    }
  }

  // Serves a fresh fake head (state_) on `port` (0: any); keeps the port for later restarts.
  void StartHead(uint16_t port = 0) {
    head_ = std::make_unique<FakeHeadThread>(state_, port == 0 ? head_port_ : port);
    ASSERT_NE(head_->port(), 0) << "could not serve the fake head";
    head_port_ = head_->port();
  }
  void StopHead() { head_.reset(); }
  std::string HeadAddress() const { return "127.0.0.1:" + std::to_string(head_port_); }

  // Starts airt-node against the head with small defaults and `flags` after them.
  Node* StartNode(std::vector<std::string> flags) {
    std::vector<std::string> argv = {AIRT_NODE_BIN,           "--head-address=" + HeadAddress(),
                                     "--temp-dir=" + temp_,   "--object-store-memory=16M",
                                     "--num-cpus=2",          "--head-retry-max-ms=200",
                                     "--head-timeout-ms=2000"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto node = std::make_unique<Node>();
    node->log = dir_.File("node-" + std::to_string(nodes_.size()) + ".log");
    node->process = std::make_unique<ChildProcess>(argv, node->log);
    nodes_.push_back(std::move(node));
    return nodes_.back().get();
  }

  // The id printed on the node's "node ready <hex>" line, waiting for it; nil past the deadline.
  NodeId WaitReady(Node* node, std::chrono::milliseconds timeout = 20s) {
    std::string hex =
        airt::testing::WaitForLine(node->log, "node ready ", timeout, node->process.get())
            .value_or("");
    auto id = NodeId::FromHex(hex);
    return id.ok() ? *id : NodeId::Nil();
  }

  // The last registration of `id` the head saw.
  std::optional<RecordedNode> Registration(const NodeId& id) const {
    std::optional<RecordedNode> found;
    for (const RecordedNode& r : state_->Registrations()) {
      if (r.id == id) found = r;
    }
    return found;
  }

  bool WaitForLog(Node* node, const std::string& text, size_t times,
                  std::chrono::milliseconds timeout = 20s) {
    return WaitUntil([&] { return Count(ReadFile(node->log), text) >= times; }, timeout);
  }

  testing::TempDir dir_;
  std::string temp_;
  std::shared_ptr<FakeHeadState> state_ = std::make_shared<FakeHeadState>();
  std::unique_ptr<FakeHeadThread> head_;
  uint16_t head_port_ = 0;
  std::vector<std::unique_ptr<Node>> nodes_;
};

TEST_F(NodeProcess, RegistersItsResourcesLabelsGpuIdsAndServices) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* node = StartNode({"--num-cpus", "3", "--num-gpus", "4", "--memory", "1G", "--resources",
                          R"({"custom": 2, "TPU": 1})", "--labels",
                          R"({"accelerator_type": "A10", "zone": "a"})"});
  NodeId id = WaitReady(node);
  ASSERT_FALSE(id.IsNil()) << "no ready line";
  std::optional<RecordedNode> reg = Registration(id);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->total, (std::map<std::string, double>{{"CPU", 3},
                                                       {"GPU", 4},
                                                       {"memory", 1024.0 * kMiB},
                                                       {"object_store_memory", 16.0 * kMiB},
                                                       {"node:127.0.0.1", 1},
                                                       {"node:" + id.Hex(), 1},
                                                       {"custom", 2},
                                                       {"TPU", 1},
                                                       {"accelerator_type:A10", 1}}));
  EXPECT_EQ(reg->labels, (std::map<std::string, std::string>{{"ray.io/accelerator-type", "A10"},
                                                             {"zone", "a"}}));
  EXPECT_EQ(reg->gpu_ids, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(reg->pid, node->process->pid());
  EXPECT_EQ(reg->address, "127.0.0.1");
  // Its folder under --temp-dir, named by the id, with the store's socket and logs/.
  EXPECT_EQ(reg->temp_dir, temp_ + "/node-" + id.Hex().substr(0, 12));
  EXPECT_EQ(reg->store_socket, reg->temp_dir + "/store.sock");
  EXPECT_TRUE(std::filesystem::is_directory(reg->temp_dir + "/logs"));
  // The store it hosts, with the capacity asked for; the transfer and node services listen.
  auto store = objectstore::StoreClient::Connect(reg->store_socket);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto stats = (*store)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->capacity_bytes, 16 * kMiB);
  ASSERT_NE(reg->transfer_port, 0);
  EXPECT_TRUE(TcpConnects(reg->transfer_port));
  ASSERT_NE(reg->node_port, 0);
  EXPECT_TRUE(TcpConnects(reg->node_port));
}

TEST_F(NodeProcess, HeartbeatsArriveAtTheIntervalTheHeadAsks) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* node = StartNode({"--num-gpus", "1"});
  NodeId id = WaitReady(node);
  ASSERT_FALSE(id.IsNil());
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil([&] { return state_->NumKnownHeartbeats(id) >= 5; }, 20s));
  // Five 50 ms intervals at the least.
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  testing::RecordedHeartbeat beat = state_->Heartbeats().back();
  EXPECT_EQ(beat.available, Registration(id)->total) << "nothing leased: all available";
  EXPECT_EQ(state_->NumUnknownHeartbeats(), 0u);
}

TEST_F(NodeProcess, RegistersAgainWhenTheHeadForgetsIt) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* node = StartNode({});
  NodeId id = WaitReady(node);
  ASSERT_FALSE(id.IsNil());
  ASSERT_EQ(state_->NumRegistrations(), 1u);
  state_->ForgetAll();
  ASSERT_TRUE(WaitUntil([&] { return state_->NumRegistrations() == 2; }, 20s));
  EXPECT_EQ(state_->Registrations()[1].id, id);
  EXPECT_GE(state_->NumUnknownHeartbeats(), 1u);
  ASSERT_TRUE(WaitUntil([&] { return state_->NumKnownHeartbeats(id) >= 1; }, 20s));
  EXPECT_EQ(Count(ReadFile(node->log), "node ready "), 1u) << "ready once, not per registration";
  EXPECT_TRUE(node->process->Running());
}

TEST_F(NodeProcess, SigtermUnregistersAndExitsZero) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* node = StartNode({});
  NodeId id = WaitReady(node);
  ASSERT_FALSE(id.IsNil());
  std::string folder = Registration(id)->temp_dir;
  node->process->Kill(SIGTERM);
  EXPECT_EQ(node->process->Wait(10s), 0);
  std::vector<NodeId> gone = state_->Unregistrations();
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], id);
  EXPECT_FALSE(std::filesystem::exists(folder + "/spill"));
  EXPECT_TRUE(std::filesystem::exists(folder + "/logs")) << "logs outlive the node";
}

TEST_F(NodeProcess, SigtermExitsZeroPromptlyWhileTheHeadIsDown) {
  head_port_ = testing::UnusedPort();
  ASSERT_NE(head_port_, 0);
  Node* node = StartNode({});
  ASSERT_TRUE(WaitForLog(node, "retrying in", 1));
  auto start = std::chrono::steady_clock::now();
  node->process->Kill(SIGTERM);
  EXPECT_EQ(node->process->Wait(10s), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(NodeProcess, KeepsRunningThroughAHeadOutageAndRegistersWithTheRestartedHead) {
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* node = StartNode({});
  NodeId id = WaitReady(node);
  ASSERT_FALSE(id.IsNil());
  StopHead();
  // Several failed retries, backing off, and the node still up.
  ASSERT_TRUE(WaitForLog(node, "retrying in", 4));
  EXPECT_TRUE(node->process->Running());

  auto first = state_;
  state_ = std::make_shared<FakeHeadState>();  // a restarted head knows no node
  state_->heartbeat_interval_ms = 50;
  ASSERT_NO_FATAL_FAILURE(StartHead(head_port_));
  ASSERT_TRUE(WaitUntil([&] { return Registration(id).has_value(); }, 20s));
  ASSERT_TRUE(WaitUntil([&] { return state_->NumKnownHeartbeats(id) >= 2; }, 20s));
  EXPECT_EQ(Registration(id)->pid, node->process->pid());
  EXPECT_EQ(first->NumRegistrations(), 1u);
  EXPECT_EQ(Count(ReadFile(node->log), "node ready "), 1u);
}

TEST_F(NodeProcess, StartsBeforeTheHeadAndRegistersWhenItComesUp) {
  head_port_ = testing::UnusedPort();
  ASSERT_NE(head_port_, 0);
  Node* node = StartNode({"--num-gpus", "2"});
  ASSERT_TRUE(WaitForLog(node, "retrying in", 3));
  EXPECT_TRUE(node->process->Running());
  EXPECT_EQ(Count(ReadFile(node->log), "node ready "), 0u);
  ASSERT_NO_FATAL_FAILURE(StartHead(head_port_));
  NodeId id = WaitReady(node);
  ASSERT_FALSE(id.IsNil());
  EXPECT_EQ(Registration(id)->gpu_ids, (std::vector<uint32_t>{0, 1}));
}

TEST_F(NodeProcess, BadFlagsExitTwoNamingTheFlag) {
  head_port_ = 1;  // never contacted
  Node* node = StartNode({"--resources", R"({"custom": 2,})"});
  EXPECT_EQ(node->process->Wait(10s), 2);
  EXPECT_NE(ReadFile(node->log).find("--resources: expected a string key at column 14, got '}'"),
            std::string::npos);
  Node* no_head = StartNode({"--head-address", "nowhere"});
  EXPECT_EQ(no_head->process->Wait(10s), 2);
  EXPECT_NE(ReadFile(no_head->log).find("--head-address: 'nowhere' is not HOST:PORT"),
            std::string::npos);
}

// Without --num-gpus the node asks the GPU plugin beside its build tree (build/gpu/): 0 devices
// on a machine without a GPU or without the plugin, the device count on a GPU machine.
TEST_F(NodeProcess, CountsGpusThroughThePluginWhenNumGpusIsOmitted) {
  int expected = 0;
#ifdef AIRT_GPU_PLUGIN_PATH
  auto plugin = GpuPlugin::Load(AIRT_GPU_PLUGIN_PATH);
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  expected = plugin->DeviceCount();
#endif
  ASSERT_NO_FATAL_FAILURE(StartHead());
  Node* node = StartNode({});
  NodeId id = WaitReady(node);
  ASSERT_FALSE(id.IsNil());
  std::optional<RecordedNode> reg = Registration(id);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->gpu_ids.size(), static_cast<size_t>(expected));
  EXPECT_EQ(reg->total.count("GPU") ? reg->total.at("GPU") : 0.0, static_cast<double>(expected));
#ifdef AIRT_GPU_PLUGIN_PATH
  EXPECT_NE(ReadFile(node->log).find("sees " + std::to_string(expected) + " device(s)"),
            std::string::npos);
#endif
}

}  // namespace
}  // namespace airt::e2e
