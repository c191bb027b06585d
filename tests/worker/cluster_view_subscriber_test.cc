// The node's ClusterViewSubscriber against a real HeadServer over EzRpc on loopback: it hands on
// the full view first, then each node that joins or whose heartbeat changes what it has free,
// without asking again in between; when the head restarts (a new incarnation over the same store)
// it subscribes again and gets the new head's full view. Against a head without the change feed it
// polls (the lease tests' FakeHead covers that).
#include "worker/internal/cluster_view_subscriber.h"

#include <chrono>
#include <functional>
#include <memory>

#include <capnp/ez-rpc.h>
#include <gtest/gtest.h>

#include "head/head.h"
#include "head/metadata_store.h"

namespace airt::worker {
namespace {

class FixedClock final : public head::Clock {
 public:
  int64_t MonotonicMs() override { return 1'000'000; }
  int64_t WallMs() override { return 1'700'000'000'000; }
};

class ClusterViewSubscriberTest : public ::testing::Test {
 protected:
  void SetUp() override { StartHead(0); }
  void TearDown() override {
    subscriber_.reset();
    connector_.reset();
    cap_.reset();
    client_.reset();
    server_.reset();
  }

  void StartHead(uint port) {
    auto opened = head::HeadServer::Open(head::HeadOptions{}, store_, clock_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    server_ = std::make_unique<capnp::EzRpcServer>(kj::mv(*opened), "127.0.0.1", port);
    port_ = server_->getPort().wait(server_->getWaitScope());
    client_ = std::make_unique<capnp::EzRpcClient>("127.0.0.1", port_);
    cap_ = std::make_unique<proto::Head::Client>(client_->getMain<proto::Head>());
  }

  void Subscribe() {
    connector_ = std::make_unique<EzRpcHeadConnector>("127.0.0.1:" + std::to_string(port_));
    subscriber_ = std::make_unique<ClusterViewSubscriber>(
        *connector_, timer(), ClusterViewSubscriberOptions{20 * kj::MILLISECONDS, kj::SECONDS},
        [this](RemoteNodes view) { last_ = std::move(view); });
    subscriber_->Start();
  }

  kj::Timer& timer() { return server_->getIoProvider().getTimer(); }

  bool PumpUntil(const std::function<bool()>& condition) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!condition()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      timer().afterDelay(2 * kj::MILLISECONDS).wait(server_->getWaitScope());
    }
    return true;
  }

  void Register(const NodeId& id) {
    auto request = cap_->registerNodeRequest();
    auto info = request.initInfo();
    info.setNodeId(capnp::Data::Reader(id.data(), NodeId::kSize));
    info.setAddress("127.0.0.1");
    info.setNodePort(7000);
    auto total = info.initTotal(1);
    total[0].setName("CPU");
    total[0].setAmount(8);
    request.send().wait(client_->getWaitScope());
  }

  void Heartbeat(const NodeId& id, double cpus_free) {
    auto request = cap_->heartbeatRequest();
    request.setNodeId(capnp::Data::Reader(id.data(), NodeId::kSize));
    auto available = request.initAvailable(1);
    available[0].setName("CPU");
    available[0].setAmount(cpus_free);
    request.send().wait(client_->getWaitScope());
  }

  // The CPUs the last view handed on shows free at `id`; -1 when it does not list the node.
  double Free(const NodeId& id) const {
    for (const auto& node : last_.view.nodes) {
      if (node.id == id) return node.available.Get("CPU").ToDouble();
    }
    return -1;
  }

  head::InMemoryMetadataStore store_;
  FixedClock clock_;
  uint port_ = 0;
  std::unique_ptr<capnp::EzRpcServer> server_;
  std::unique_ptr<capnp::EzRpcClient> client_;
  std::unique_ptr<proto::Head::Client> cap_;
  std::unique_ptr<EzRpcHeadConnector> connector_;
  std::unique_ptr<ClusterViewSubscriber> subscriber_;
  RemoteNodes last_;
};

TEST_F(ClusterViewSubscriberTest, HandsOnEachJoinAndHeartbeatChangeOfARealHead) {
  NodeId a = NodeId::FromRandom();
  Register(a);
  Subscribe();
  ASSERT_TRUE(PumpUntil([&] { return Free(a) == 8; }));
  EXPECT_FALSE(subscriber_->polling());
  uint64_t views = subscriber_->views();

  NodeId b = NodeId::FromRandom();
  Register(b);
  ASSERT_TRUE(PumpUntil([&] { return Free(b) == 8; }));
  EXPECT_EQ(Free(a), 8);  // kept from the earlier answer
  Heartbeat(a, 3);
  ASSERT_TRUE(PumpUntil([&] { return Free(a) == 3; }));
  EXPECT_EQ(last_.view.nodes.size(), 2u);
  EXPECT_EQ(last_.addresses.at(b), "127.0.0.1:7000");
  // One answer per change, no polling in between.
  EXPECT_LE(subscriber_->views(), views + 2);
  EXPECT_EQ(subscriber_->failures(), 0u);
}

TEST_F(ClusterViewSubscriberTest, SubscribesAgainWithTheFullViewAfterTheHeadRestarts) {
  NodeId a = NodeId::FromRandom();
  Register(a);
  Subscribe();
  ASSERT_TRUE(PumpUntil([&] { return Free(a) == 8; }));
  Heartbeat(a, 5);
  ASSERT_TRUE(PumpUntil([&] { return Free(a) == 5; }));

  // The head goes; a new one on the same port reads node a back from the store (available =
  // total until it heartbeats to this head). The subscriber, kept, sees its call fail, connects
  // again and gets the new head's full view.
  uint port = port_;
  cap_.reset();
  client_.reset();
  server_.reset();  // the subscriber's connection keeps this thread's EzRpc loop
  StartHead(port);
  ASSERT_EQ(port_, port);
  ASSERT_TRUE(PumpUntil([&] { return Free(a) == 8; }));
  EXPECT_GE(subscriber_->failures(), 1u);
  NodeId b = NodeId::FromRandom();
  Register(b);
  ASSERT_TRUE(PumpUntil([&] { return Free(b) == 8; }));
  EXPECT_EQ(last_.view.nodes.size(), 2u);
}

}  // namespace
}  // namespace airt::worker
