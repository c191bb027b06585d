// Scheduling strategies from the C++ API over three airt-node processes labelled zone=a/b/c:
// SPREAD puts three tasks on three nodes, node affinity hard and soft (a dead node's id in the
// error), label selectors and NodeLabelSchedulingStrategy pick and exclude nodes, for tasks and
// actors alike. The schedulers decide them (the nodes' lease policy, the head's placement).
#include <chrono>
#include <csignal>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "airt/api.h"
#include "tests/e2e/actor_functions.h"
#include "tests/e2e/multinode_cluster.h"

int NodePid();

namespace airt {
namespace {

constexpr int64_t kLong = 60'000;

class Strategies : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<e2e::MultiNodeCluster>(
        std::vector<std::string>{"--num-cpus=2", "--object-store-memory=64M"});
    for (const char* name : {"a", "b", "c"}) {
      ASSERT_NO_FATAL_FAILURE(cluster_->AddNode(
          name, {"--labels=zone=" + std::string(name),
                 "--resources={\"" + std::string(name) + "_only\": 1}"}));
    }
    cluster_->Init();
    for (const internal::NodeInfo& node : internal::ClusterNodes()) {
      for (const char* name : {"a", "b", "c"}) {
        if (node.total.count(std::string(name) + "_only")) ids_[name] = node.node_id;
      }
    }
    ASSERT_EQ(ids_.size(), 3u);
    // The driver's node knows the other two (its view is polled from the head) once a task
    // only they can run has run there.
    for (const char* zone : {"b", "c"}) Get(Task(NodePid).SetLabelSelector({{"zone", zone}}).Remote(), kLong);
  }
  int Pid(const std::string& name) { return cluster_->node(name).pid(); }
  std::unique_ptr<e2e::MultiNodeCluster> cluster_;
  std::map<std::string, std::string> ids_;  // node name -> hex id
};

TEST_F(Strategies, SpreadPutsThreeTasksOnThreeNodes) {
  std::vector<ObjectRef<int>> refs;
  for (int i = 0; i < 3; ++i) {
    refs.push_back(Task(NodePid).SetSchedulingStrategy(SpreadSchedulingStrategy{}).Remote());
  }
  std::set<int> pids;
  for (auto& ref : refs) pids.insert(*Get(ref, kLong));
  EXPECT_EQ(pids, (std::set<int>{Pid("a"), Pid("b"), Pid("c")}));
}

TEST_F(Strategies, NodeAffinityAndLabelsPickTheirNodeForTasksAndActors) {
  for (const char* name : {"a", "b", "c"}) {
    NodeAffinitySchedulingStrategy hard{ids_[name]};
    EXPECT_EQ(*Get(Task(NodePid).SetSchedulingStrategy(hard).Remote(), kLong), Pid(name)) << name;
    auto actor = Actor(Counter::Create).SetSchedulingStrategy(hard).Remote(0);
    EXPECT_EQ(*Get(actor.Task(&Counter::NodePid).Remote(), kLong), Pid(name)) << name;
  }
  EXPECT_EQ(*Get(Task(NodePid).SetLabelSelector({{"zone", "b"}}).Remote(), kLong), Pid("b"));
  EXPECT_EQ(*Get(Task(NodePid).SetLabelSelector({{"zone", "!in(a,b)"}}).Remote(), kLong),
            Pid("c"));
  EXPECT_EQ(*Get(Task(NodePid)
                     .SetSchedulingStrategy(NodeLabelSchedulingStrategy{{LabelNotIn("zone", {"a", "c"})}, {}})
                     .Remote(),
                 kLong),
            Pid("b"));
  auto labelled = Actor(Counter::Create).SetLabelSelector({{"zone", "c"}}).Remote(0);
  EXPECT_EQ(*Get(labelled.Task(&Counter::NodePid).Remote(), kLong), Pid("c"));
  try {
    Get(Task(NodePid).SetLabelSelector({{"zone", "mars"}}).Remote(), kLong);
    ADD_FAILURE() << "a label no node has was scheduled";
  } catch (const InfeasibleError& e) {
    EXPECT_NE(std::string(e.what()).find("zone in (mars)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Task(NodePid).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{"zz"}).Remote(),
               InvalidArgumentError);
}

TEST_F(Strategies, HardAffinityToADeadNodeFailsNamingItAndSoftFallsBack) {
  std::string dead = ids_["c"];
  cluster_->node("c").Kill(SIGKILL);
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        for (const internal::NodeInfo& node : internal::ClusterNodes()) {
          if (node.node_id == dead && !node.alive) return true;
        }
        return false;
      },
      std::chrono::seconds(60)));
  try {
    Get(Task(NodePid).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{dead}).Remote(), kLong);
    ADD_FAILURE() << "a task ran on a dead node";
  } catch (const InfeasibleError& e) {
    EXPECT_NE(std::string(e.what()).find(dead), std::string::npos) << e.what();
  }
  int pid = *Get(
      Task(NodePid).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{dead, true}).Remote(),
      kLong);
  EXPECT_TRUE(pid == Pid("a") || pid == Pid("b")) << pid;
  auto actor =
      Actor(Counter::Create).SetSchedulingStrategy(NodeAffinitySchedulingStrategy{dead}).Remote(0);
  try {
    Get(actor.Task(&Counter::NodePid).Remote(), kLong);
    ADD_FAILURE() << "an actor was placed on a dead node";
  } catch (const Exception& e) {
    EXPECT_NE(std::string(e.what()).find(dead), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace airt
