// The node table with a manual clock: registration, heartbeats, liveness, persistence.
#include "head/internal/node_table.h"

#include <gtest/gtest.h>

#include "head/internal/wire.h"
#include "tests/head/head_doubles.h"

namespace airt::head::internal {
namespace {

constexpr uint32_t kTimeoutMs = 1000;

NodeInfo Node(const std::string& address, std::vector<uint32_t> gpus = {}) {
  NodeInfo info;
  info.id = NodeId::FromRandom();
  info.address = address;
  info.node_port = 7000;
  info.total = {{"CPU", 8}, {"memory", 1e9}};
  if (!gpus.empty()) info.total.push_back({"GPU", static_cast<double>(gpus.size())});
  info.gpu_ids = std::move(gpus);
  return info;
}

class NodeTableTest : public ::testing::Test {
 protected:
  NodeTable::Options Options(size_t max_dead = 100) { return {kTimeoutMs, max_dead}; }

  InMemoryMetadataStore backing_;
  testing::FaultInjectingMetadataStore store_{backing_};
  testing::Committer commit_{store_};
  testing::ManualClock clock_;
  NodeTable table_{Options(), store_, clock_};
};

TEST_F(NodeTableTest, RegisteredNodeIsAliveWithAvailableEqualToTotal) {
  NodeInfo a = Node("10.0.0.1", {0, 1});
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  auto view = table_.Find(a.id);
  ASSERT_TRUE(view.has_value());
  EXPECT_TRUE(view->alive);
  EXPECT_EQ(view->info, a);
  EXPECT_EQ(view->load.available, a.total);
  EXPECT_TRUE(view->load.gpu_ids_in_use.empty());
  EXPECT_EQ(view->ms_since_heartbeat, 0u);
}

TEST_F(NodeTableTest, NodeIsDeadWhenNoHeartbeatForTheTimeout) {
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  clock_.AdvanceMs(kTimeoutMs - 1);
  EXPECT_TRUE(commit_(table_.CheckLiveness())->empty());
  EXPECT_TRUE(table_.Find(a.id)->alive);
  clock_.AdvanceMs(1);
  EXPECT_EQ(*commit_(table_.CheckLiveness()), std::vector<NodeId>{a.id});
  EXPECT_FALSE(table_.Find(a.id)->alive);
  EXPECT_EQ(table_.Find(a.id)->ms_since_heartbeat, kTimeoutMs);
  EXPECT_TRUE(commit_(table_.CheckLiveness())->empty()) << "a death is reported once";
}

TEST_F(NodeTableTest, HeartbeatsKeepNodeAlivePastTheTimeout) {
  NodeInfo a = Node("10.0.0.1", {0, 1});
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  for (int i = 0; i < 5; ++i) {
    clock_.AdvanceMs(kTimeoutMs / 2);
    NodeLoad load{{{"CPU", 6}}, {1}, {0}};
    auto known = table_.Heartbeat(a.id, load);
    ASSERT_TRUE(known.ok()) << known.status().ToString();
    EXPECT_TRUE(*known);
  }
  EXPECT_TRUE(commit_(table_.CheckLiveness())->empty());
  auto view = table_.Find(a.id);
  EXPECT_TRUE(view->alive);
  EXPECT_EQ(view->load, (NodeLoad{{{"CPU", 6}}, {1}, {0}}));
  clock_.AdvanceMs(7);
  EXPECT_EQ(table_.Find(a.id)->ms_since_heartbeat, 7u);
}

TEST_F(NodeTableTest, HeartbeatAnswersUnknownWhenNodeNeverRegistered) {
  auto known = table_.Heartbeat(NodeId::FromRandom(), {});
  ASSERT_TRUE(known.ok());
  EXPECT_FALSE(*known);
  EXPECT_EQ(table_.size(), 0u);
}

TEST_F(NodeTableTest, LateHeartbeatAnswersUnknownAndDeclaresNodeDead) {
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  clock_.AdvanceMs(kTimeoutMs);
  EXPECT_FALSE(*table_.Heartbeat(a.id, {}));  // overdue: dead even before CheckLiveness ran
  EXPECT_FALSE(table_.Find(a.id)->alive);
  EXPECT_FALSE(*table_.Heartbeat(a.id, {})) << "a dead node stays dead until it registers";
}

TEST_F(NodeTableTest, ReRegisteringAnAliveNodeReplacesItsEntryInItsOldPlace) {
  NodeInfo a = Node("10.0.0.1");
  NodeInfo b = Node("10.0.0.2");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  ASSERT_TRUE(commit_(table_.Register(b)).ok());
  clock_.AdvanceMs(kTimeoutMs / 2);
  NodeInfo a2 = a;
  a2.node_port = 7001;
  a2.total = {{"CPU", 2}};
  ASSERT_TRUE(commit_(table_.Register(a2)).ok());
  EXPECT_TRUE(*table_.Heartbeat(a.id, {}));
  auto view = table_.View();
  ASSERT_EQ(view.size(), 2u);
  EXPECT_EQ(view[0].info, a2) << "re-registering replaces the entry in place";
  EXPECT_TRUE(view[0].alive);
  EXPECT_TRUE(view[1].alive);
}

TEST_F(NodeTableTest, ADeadNodeRegisteringAgainIsRefusedNamingTheCause) {
  NodeInfo a = Node("10.0.0.1");
  NodeInfo b = Node("10.0.0.2");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  ASSERT_TRUE(commit_(table_.Register(b)).ok());
  clock_.AdvanceMs(kTimeoutMs);
  // Overdue but not yet recorded dead: refused already.
  Status early = commit_(table_.Register(a));
  EXPECT_EQ(early.code(), Code::kFailedPrecondition);
  EXPECT_NE(early.message().find("no heartbeat for 1000 ms"), std::string::npos) << early.message();
  ASSERT_EQ(commit_(table_.CheckLiveness())->size(), 2u);
  Status refused = commit_(table_.Register(a));
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition);
  EXPECT_NE(refused.message().find(a.id.Hex()), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("restart it clean"), std::string::npos) << refused.message();
  EXPECT_FALSE(table_.Find(a.id)->alive);
  EXPECT_FALSE(*table_.Heartbeat(a.id, {}));
}

TEST_F(NodeTableTest, DeathsRecordTheirCauseAndWallTimeInTheStore) {
  NodeInfo a = Node("10.0.0.1");
  NodeInfo b = Node("10.0.0.2");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  ASSERT_TRUE(commit_(table_.Register(b)).ok());
  int64_t wall = clock_.WallMs();
  ASSERT_TRUE(commit_(table_.MarkDead(a.id, "its connection to the head dropped")).ok());
  EXPECT_TRUE(commit_(table_.MarkDead(a.id, "again")).ok()) << "dead already: no change";
  clock_.AdvanceMs(kTimeoutMs - 1);
  EXPECT_TRUE(*table_.Heartbeat(b.id, {}));
  clock_.AdvanceMs(kTimeoutMs - 1);
  std::optional<NodeView> shown = table_.Find(a.id);
  EXPECT_FALSE(shown->alive);
  EXPECT_EQ(shown->death_cause, "its connection to the head dropped");
  EXPECT_EQ(shown->death_time_ms, static_cast<uint64_t>(wall));
  EXPECT_TRUE(table_.Find(b.id)->alive);
  EXPECT_TRUE(table_.Find(b.id)->death_cause.empty());
  clock_.AdvanceMs(1);
  EXPECT_EQ(table_.Find(b.id)->death_cause,
            "no heartbeat for 1000 ms (the head's node timeout is 1000 ms)")
      << "an overdue node shows why before its death is recorded";

  NodeTable restarted(Options(), store_, clock_);
  ASSERT_TRUE(restarted.Load().ok());
  std::optional<NodeView> loaded = restarted.Find(a.id);
  EXPECT_FALSE(loaded->alive);
  EXPECT_EQ(loaded->death_cause, "its connection to the head dropped");
  EXPECT_EQ(loaded->death_time_ms, static_cast<uint64_t>(wall));
  EXPECT_EQ(commit_(restarted.Register(a)).code(), Code::kFailedPrecondition)
      << "a restarted head still refuses a node declared dead";
}

TEST_F(NodeTableTest, MarkDeadOfAnUnknownNodeIsNotFound) {
  EXPECT_EQ(commit_(table_.MarkDead(NodeId::FromRandom(), "gone")).code(), Code::kNotFound);
}

TEST_F(NodeTableTest, ViewListsNodesInRegistrationOrderWithMsSinceHeartbeat) {
  std::vector<NodeInfo> nodes;
  for (int i = 0; i < 5; ++i) {
    nodes.push_back(Node("10.0.0." + std::to_string(i)));
    ASSERT_TRUE(commit_(table_.Register(nodes.back())).ok());
    clock_.AdvanceMs(10);
  }
  auto view = table_.View();
  ASSERT_EQ(view.size(), nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(view[i].info.id, nodes[i].id);
    EXPECT_EQ(view[i].ms_since_heartbeat, 10 * (nodes.size() - i));
  }
}

TEST_F(NodeTableTest, UnregisteredNodeIsDeadAtOnce) {
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  ASSERT_TRUE(commit_(table_.Unregister(a.id)).ok());
  EXPECT_FALSE(table_.Find(a.id)->alive);
  EXPECT_FALSE(*table_.Heartbeat(a.id, {}));
  EXPECT_TRUE(commit_(table_.Unregister(a.id)).ok()) << "unregistering twice is harmless";
  EXPECT_EQ(commit_(table_.Unregister(NodeId::FromRandom())).code(), Code::kNotFound);
}

TEST_F(NodeTableTest, HeartbeatRejectsGpuIdsTheNodeDoesNotOwn) {
  NodeInfo a = Node("10.0.0.1", {0, 1});
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  auto in_use = table_.Heartbeat(a.id, NodeLoad{{}, {2}, {}});
  EXPECT_EQ(in_use.status().code(), Code::kInvalidArgument);
  EXPECT_NE(in_use.status().message().find("gpuIdsInUse: GPU 2"), std::string::npos)
      << in_use.status().message();
  auto quarantined = table_.Heartbeat(a.id, NodeLoad{{}, {}, {5}});
  EXPECT_NE(quarantined.status().message().find("quarantinedGpuIds: GPU 5"), std::string::npos);
  EXPECT_TRUE(table_.Find(a.id)->load.gpu_ids_in_use.empty()) << "a rejected heartbeat is ignored";
}

TEST_F(NodeTableTest, ForgetsEarliestRegisteredDeadNodesBeyondTheLimit) {
  NodeTable table(Options(/*max_dead=*/2), store_, clock_);
  std::vector<NodeInfo> nodes;
  for (int i = 0; i < 4; ++i) {
    nodes.push_back(Node("10.0.0." + std::to_string(i)));
    ASSERT_TRUE(commit_(table.Register(nodes.back())).ok());
  }
  ASSERT_TRUE(commit_(table.Unregister(nodes[2].id)).ok());
  ASSERT_TRUE(commit_(table.Unregister(nodes[0].id)).ok());
  ASSERT_TRUE(commit_(table.Unregister(nodes[3].id)).ok());
  auto view = table.View();
  ASSERT_EQ(view.size(), 3u);
  EXPECT_EQ(view[0].info.id, nodes[1].id);
  EXPECT_EQ(view[1].info.id, nodes[2].id);
  EXPECT_EQ(view[2].info.id, nodes[3].id);
  EXPECT_EQ(backing_.Scan("node:")->size(), 3u) << "the forgotten node's row is deleted";
}

TEST_F(NodeTableTest, LoadRestoresNodesInOrderAndGivesAliveOnesAFreshTimeout) {
  NodeInfo a = Node("10.0.0.1", {0});
  NodeInfo b = Node("10.0.0.2");
  NodeInfo c = Node("10.0.0.3");
  for (const NodeInfo& n : {c, a, b}) ASSERT_TRUE(commit_(table_.Register(n)).ok());
  ASSERT_TRUE(commit_(table_.Unregister(a.id)).ok());
  clock_.AdvanceMs(kTimeoutMs - 1);

  NodeTable restarted(Options(), store_, clock_);
  ASSERT_TRUE(restarted.Load().ok());
  auto view = restarted.View();
  ASSERT_EQ(view.size(), 3u);
  EXPECT_EQ(view[0].info, c);
  EXPECT_EQ(view[1].info, a);
  EXPECT_FALSE(view[1].alive);
  EXPECT_EQ(view[2].info, b);
  EXPECT_TRUE(view[2].alive);
  clock_.AdvanceMs(kTimeoutMs - 1);
  EXPECT_TRUE(commit_(restarted.CheckLiveness())->empty());
  EXPECT_FALSE(*restarted.Heartbeat(b.id, {})) << "loaded, not yet registered with this head";
  ASSERT_TRUE(commit_(restarted.Register(b)).ok()) << "an alive node re-registering is welcome";
  EXPECT_TRUE(*restarted.Heartbeat(b.id, {}));
  NodeInfo d = Node("10.0.0.4");
  ASSERT_TRUE(commit_(restarted.Register(d)).ok());
  EXPECT_EQ(restarted.View().back().info.id, d.id) << "new nodes go after the loaded ones";
}

TEST_F(NodeTableTest, LoadSkipsACorruptRow) {
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  testing::PutRow(backing_, "node:0000000000000009:" + NodeId::FromRandom().Hex(), "garbage!");
  testing::PutRow(backing_, "node:junk", "");
  NodeTable restarted(Options(), store_, clock_);
  ASSERT_TRUE(restarted.Load().ok());
  ASSERT_EQ(restarted.size(), 1u);
  EXPECT_EQ(restarted.View()[0].info, a);
}

TEST_F(NodeTableTest, LoadReturnsStoreErrorWhenStoreUnreachable) {
  store_.scan_error = Unavailable("injected: redis went away");
  NodeTable restarted(Options(), store_, clock_);
  EXPECT_EQ(restarted.Load().code(), Code::kUnavailable);
}

TEST_F(NodeTableTest, RegisterFailsAndChangesNothingWhenStorePutFails) {
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  store_.write_error = Unavailable("injected: redis went away");
  NodeInfo b = Node("10.0.0.2");
  Status s = commit_(table_.Register(b));
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_EQ(s.message(), "registering node " + b.id.Hex() + ": injected: redis went away");
  NodeInfo a2 = a;
  a2.address = "10.9.9.9";
  EXPECT_EQ(commit_(table_.Register(a2)).code(), Code::kUnavailable);
  EXPECT_EQ(commit_(table_.Unregister(a.id)).code(), Code::kUnavailable);
  ASSERT_EQ(table_.size(), 1u);
  EXPECT_EQ(table_.View()[0].info, a);
  EXPECT_TRUE(table_.View()[0].alive);
  EXPECT_FALSE(*table_.Heartbeat(b.id, {}));
}

TEST_F(NodeTableTest, ATimedOutNodeShowsDeadAndItsRowIsRecordedOnceTheStoreAnswers) {
  NodeInfo a = Node("10.0.0.1");
  ASSERT_TRUE(commit_(table_.Register(a)).ok());
  store_.write_error = Unavailable("injected: redis went away");
  clock_.AdvanceMs(kTimeoutMs);
  EXPECT_EQ(commit_(table_.CheckLiveness()).status().code(), Code::kUnavailable);
  EXPECT_FALSE(table_.Find(a.id)->alive) << "dead to every caller at once";
  EXPECT_FALSE(*table_.Heartbeat(a.id, {}));
  EXPECT_TRUE(DecodeNodeRow(backing_.Scan("node:")->at(0).value)->alive);
  store_.write_error = Status::Ok();
  EXPECT_EQ(*commit_(table_.CheckLiveness()), std::vector<NodeId>{a.id}) << "retried";
  EXPECT_FALSE(DecodeNodeRow(backing_.Scan("node:")->at(0).value)->alive);
  EXPECT_TRUE(commit_(table_.CheckLiveness())->empty());
}

}  // namespace
}  // namespace airt::head::internal

namespace airt::head::internal {
namespace {

TEST_F(NodeTableTest, DisconnectedNodeIsDeadAfterTheGraceUnlessItRegistersAgain) {
  NodeTable table({kTimeoutMs, 100, /*disconnect_grace_ms=*/100}, store_, clock_);
  NodeInfo a = Node("10.0.0.1");
  NodeInfo b = Node("10.0.0.2");
  ASSERT_TRUE(commit_(table.Register(a)).ok());
  ASSERT_TRUE(commit_(table.Register(b)).ok());
  table.Disconnected(a.id);
  table.Disconnected(b.id);
  EXPECT_FALSE(*table.Heartbeat(a.id, {})) << "it must register again";
  EXPECT_TRUE(table.Find(a.id)->alive) << "within the grace";
  clock_.AdvanceMs(99);
  ASSERT_TRUE(commit_(table.Register(b)).ok()) << "b came back within the grace";
  clock_.AdvanceMs(1);
  EXPECT_EQ(*commit_(table.CheckLiveness()), std::vector<NodeId>{a.id});
  EXPECT_EQ(table.Find(a.id)->death_cause,
            "its connection to the head dropped 100 ms ago and it did not register again (the "
            "head's disconnect grace is 100 ms)");
  EXPECT_TRUE(table.Find(b.id)->alive);
  EXPECT_TRUE(*table.Heartbeat(b.id, {}));
  table.Disconnected(NodeId::FromRandom());  // unknown: ignored
}

}  // namespace
}  // namespace airt::head::internal
