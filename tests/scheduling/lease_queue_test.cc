#include <random>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "tests/scheduling/scheduling_test_util.h"
#include "worker/scheduling/scheduling.h"

namespace airt::worker::scheduling {
namespace {

using namespace std::chrono_literals;
using testing::At;
using testing::IdOf;
using testing::Node;
using testing::Set;
using testing::Shape;
using testing::View;

const NodeId kLocal = IdOf(0x10);

LeaseQueue Queue(Duration grace = 10s) {
  return LeaseQueue(
      LeasePolicy(LeasePolicyOptions{.local_node = kLocal, .infeasible_grace = grace}));
}

LeaseRequest Request(uint64_t id, std::string_view shape, TimePoint since = At(0)) {
  return LeaseRequest{.id = id, .shape = Shape(shape), .waiting_since = since};
}

// "3:grant", "4:spill back to 20202020", ... for each dispatched lease.
std::vector<std::string> Describe(const std::vector<DispatchedLease>& leases) {
  std::vector<std::string> out;
  for (const auto& l : leases) {
    std::string d = ToString(l.decision);
    out.push_back(std::to_string(l.request.id) + ":" + d.substr(0, d.find(" (")));
  }
  return out;
}

// Acquires every grant on `local`, as the daemon does; returns the allocations.
std::vector<Allocation> ApplyGrants(const std::vector<DispatchedLease>& leases,
                                    NodeResources& local) {
  std::vector<Allocation> out;
  for (const auto& l : leases) {
    if (!std::holds_alternative<GrantLocally>(l.decision)) continue;
    Result<Allocation> a = local.Acquire(l.request.shape);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    if (a.ok()) out.push_back(*a);
  }
  return out;
}

TEST(LeaseQueue, GrantsQueuedRequestsInFifoOrderPerShapeAfterRelease) {
  NodeResources local = Node("CPU: 4, GPU: 1");
  Result<Allocation> busy = local.Acquire(Shape("GPU: 1"));
  ASSERT_TRUE(busy.ok());
  LeaseQueue queue = Queue();
  for (uint64_t id : {1, 2, 3}) ASSERT_TRUE(queue.Enqueue(Request(id, "GPU: 0.5")).ok());
  EXPECT_TRUE(queue.Dispatch(local, {}, At(1)).empty());
  EXPECT_EQ(queue.size(), 3u);

  ASSERT_TRUE(local.Release(*busy).ok());
  std::vector<DispatchedLease> out = queue.Dispatch(local, {}, At(2));
  EXPECT_EQ(Describe(out), (std::vector<std::string>{"1:grant", "2:grant"}));
  std::vector<Allocation> granted = ApplyGrants(out, local);
  ASSERT_EQ(granted.size(), 2u);
  EXPECT_EQ(queue.size(), 1u);

  ASSERT_TRUE(local.Release(granted[0]).ok());
  EXPECT_EQ(Describe(queue.Dispatch(local, {}, At(3))), (std::vector<std::string>{"3:grant"}));
  EXPECT_EQ(queue.size(), 0u);
}

TEST(LeaseQueue, ABlockedShapeDoesNotBlockOtherShapes) {
  NodeResources local = Node("CPU: 4, GPU: 2");
  ASSERT_TRUE(local.Acquire(Shape("GPU: 1")).ok());
  LeaseQueue queue = Queue();
  ASSERT_TRUE(queue.Enqueue(Request(1, "GPU: 2")).ok());  // waits for the whole node
  ASSERT_TRUE(queue.Enqueue(Request(2, "CPU: 1")).ok());
  ASSERT_TRUE(queue.Enqueue(Request(3, "GPU: 2")).ok());
  ASSERT_TRUE(queue.Enqueue(Request(4, "GPU: 1")).ok());
  std::vector<DispatchedLease> out = queue.Dispatch(local, {}, At(1));
  EXPECT_EQ(Describe(out), (std::vector<std::string>{"2:grant", "4:grant"}));
  EXPECT_EQ(queue.size(), 2u);
}

TEST(LeaseQueue, DispatchOrdersShapesByArrival) {
  NodeResources local = Node("CPU: 2");
  ASSERT_TRUE(local.Acquire(Shape("CPU: 2")).ok());
  LeaseQueue queue = Queue();
  ASSERT_TRUE(queue.Enqueue(Request(1, "CPU: 1")).ok());
  ASSERT_TRUE(queue.Enqueue(Request(2, "CPU: 0.5")).ok());
  ASSERT_TRUE(queue.Enqueue(Request(3, "CPU: 1")).ok());
  ASSERT_TRUE(queue.Enqueue(Request(4, "CPU: 0.5")).ok());
  NodeResources freed = Node("CPU: 2");
  // 1 (1) + 2 (0.5) leaves 0.5: 3 does not fit, 4 does; 3's shape is then blocked.
  EXPECT_EQ(Describe(queue.Dispatch(freed, {}, At(1))),
            (std::vector<std::string>{"1:grant", "2:grant", "4:grant"}));
}

TEST(LeaseQueue, GrantsAreTriedOnACopySoApplyingThemInOrderSucceeds) {
  NodeResources local = Node("CPU: 8, GPU: 4");
  LeaseQueue queue = Queue();
  for (uint64_t id = 1; id <= 12; ++id) {
    ASSERT_TRUE(queue.Enqueue(Request(id, id % 3 == 0 ? "GPU: 1, CPU: 1" : "GPU: 0.3")).ok());
  }
  std::vector<DispatchedLease> out = queue.Dispatch(local, {}, At(0));
  EXPECT_EQ(local.Available(), Set("CPU: 8, GPU: 4"));  // Dispatch changed nothing
  std::vector<Allocation> granted = ApplyGrants(out, local);
  EXPECT_EQ(granted.size(), out.size());
  EXPECT_FALSE(out.empty());
  EXPECT_EQ(out.size() + queue.size(), 12u);
  for (const auto& l : out) EXPECT_TRUE(std::holds_alternative<GrantLocally>(l.decision));
}

TEST(LeaseQueue, SpillsQueuedRequestsWhenTheViewShowsAFreeNodeButNoMoreThanItHas) {
  NodeResources local = Node("CPU: 4, GPU: 1");
  ASSERT_TRUE(local.Acquire(Shape("GPU: 1")).ok());
  LeaseQueue queue = Queue();
  for (uint64_t id : {1, 2, 3, 4}) ASSERT_TRUE(queue.Enqueue(Request(id, "GPU: 1")).ok());
  ClusterView view{{View(0x20, "GPU: 8", "GPU: 2"), View(0x30, "GPU: 8", "GPU: 1")}};
  std::vector<DispatchedLease> out = queue.Dispatch(local, view, At(1));
  EXPECT_EQ(Describe(out),
            (std::vector<std::string>{"1:spill back to 20202020", "2:spill back to 20202020",
                                      "3:spill back to 30303030"}));
  EXPECT_EQ(queue.size(), 1u);
}

TEST(LeaseQueue, TurnsInfeasibleWhenGraceEndsUnlessANodeJoins) {
  NodeResources local = Node("CPU: 4");
  LeaseQueue queue = Queue(10s);
  Result<LeaseDecision> first = queue.Submit(Request(1, "GPU: 1", At(0)), local, {}, At(0));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(std::holds_alternative<QueueLocally>(*first)) << ToString(*first);
  EXPECT_FALSE(std::get<QueueLocally>(*first).feasible);
  ASSERT_TRUE(queue.Submit(Request(2, "GPU: 1", At(5)), local, {}, At(5)).ok());
  ASSERT_TRUE(queue.Submit(Request(3, "GPU: 2", At(6)), local, {}, At(6)).ok());
  EXPECT_EQ(queue.NextGraceEnd(At(5)), At(10));

  EXPECT_TRUE(queue.Dispatch(local, {}, At(9)).empty());
  std::vector<DispatchedLease> out = queue.Dispatch(local, {}, At(10));
  ASSERT_EQ(Describe(out), (std::vector<std::string>{"1:infeasible"}));
  EXPECT_EQ(std::get<Infeasible>(out[0].decision).message,
            "no node can ever run {GPU: 1}: node 10101010 (this node) has {CPU: 4}");
  EXPECT_EQ(queue.NextGraceEnd(At(10)), At(15));

  // A GPU node joins before request 2's grace ends: it spills there, and 3 waits on it.
  ClusterView view{{View(0x20, "GPU: 2", "GPU: 1")}};
  EXPECT_EQ(Describe(queue.Dispatch(local, view, At(12))),
            (std::vector<std::string>{"2:spill back to 20202020"}));
  EXPECT_TRUE(queue.Dispatch(local, view, At(100)).empty());  // feasible now: no grace applies
  EXPECT_EQ(queue.size(), 1u);
}

TEST(LeaseQueue, SubmitGrantsSpillsOrQueuesBehindTheSameShape) {
  NodeResources local = Node("CPU: 1");
  LeaseQueue queue = Queue();
  Result<LeaseDecision> grant = queue.Submit(Request(1, "CPU: 1"), local, {}, At(0));
  ASSERT_TRUE(grant.ok() && std::holds_alternative<GrantLocally>(*grant));
  ASSERT_TRUE(local.Acquire(Shape("CPU: 1")).ok());
  Result<LeaseDecision> queued = queue.Submit(Request(2, "CPU: 1"), local, {}, At(0));
  ASSERT_TRUE(queued.ok() && std::holds_alternative<QueueLocally>(*queued));
  // A node with room appears; a new request of the same shape still queues behind request 2.
  ClusterView view{{View(0x20, "CPU: 1", "CPU: 1")}};
  Result<LeaseDecision> behind = queue.Submit(Request(3, "CPU: 1"), local, view, At(0));
  ASSERT_TRUE(behind.ok());
  EXPECT_EQ(ToString(*behind), "queue (behind 1 earlier requests for {CPU: 1})");
  EXPECT_EQ(Describe(queue.Dispatch(local, view, At(0))),
            (std::vector<std::string>{"2:spill back to 20202020"}));
  EXPECT_EQ(queue.size(), 1u);
  // Another shape is not held back.
  Result<LeaseDecision> other = queue.Submit(Request(4, "CPU: 0.5"), local, view, At(0));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(ToString(*other), "spill back to 20202020");
  EXPECT_EQ(queue.Submit(Request(3, "GPU: 1"), local, view, At(0)).status().code(),
            Code::kAlreadyExists);
}

TEST(LeaseQueue, PlacedRequestsWaitHereWithoutHoldingBackOthersOfTheirShape) {
  NodeResources local = Node("CPU: 1");
  ASSERT_TRUE(local.Acquire(Shape("CPU: 1")).ok());
  LeaseQueue queue = Queue();
  ClusterView view{{View(0x20, "CPU: 4", "CPU: 4")}};
  LeaseRequest placed = Request(1, "CPU: 1");
  placed.placed = true;
  Result<LeaseDecision> waiting = queue.Submit(placed, local, view, At(0));
  ASSERT_TRUE(waiting.ok() && std::holds_alternative<QueueLocally>(*waiting));
  // An unplaced request of the same shape is not queued behind it: it spills back.
  Result<LeaseDecision> other = queue.Submit(Request(2, "CPU: 1"), local, view, At(0));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(ToString(*other), "spill back to 20202020");
  // Dispatching again leaves the placed one here, however much room the view shows.
  EXPECT_TRUE(queue.Dispatch(local, view, At(1000)).empty());
  EXPECT_EQ(Describe(queue.Dispatch(Node("CPU: 1"), view, At(1000))),
            (std::vector<std::string>{"1:grant"}));
}

TEST(LeaseQueue, CancelRemovesAQueuedRequest) {
  NodeResources local = Node("CPU: 1");
  ASSERT_TRUE(local.Acquire(Shape("CPU: 1")).ok());
  LeaseQueue queue = Queue();
  ASSERT_TRUE(queue.Enqueue(Request(1, "CPU: 1")).ok());
  ASSERT_TRUE(queue.Enqueue(Request(2, "CPU: 1")).ok());
  EXPECT_EQ(queue.Enqueue(Request(2, "CPU: 2")).code(), Code::kAlreadyExists);
  ASSERT_TRUE(queue.Cancel(1).ok());
  EXPECT_EQ(queue.Cancel(1).code(), Code::kNotFound);
  EXPECT_EQ(queue.size(), 1u);
  EXPECT_EQ(Describe(queue.Dispatch(Node("CPU: 1"), {}, At(0))),
            (std::vector<std::string>{"2:grant"}));
}

TEST(LeaseQueue, SnapshotCountsEachShapeOldestFirst) {
  LeaseQueue queue = Queue();
  ASSERT_TRUE(queue.Enqueue(Request(1, "GPU: 1", At(3))).ok());
  ASSERT_TRUE(queue.Enqueue(Request(2, "CPU: 1", At(4))).ok());
  ASSERT_TRUE(queue.Enqueue(Request(3, "GPU: 1", At(1))).ok());
  std::vector<QueuedShape> snapshot = queue.Snapshot();
  ASSERT_EQ(snapshot.size(), 2u);
  EXPECT_EQ(snapshot[0].shape.ToString(), "{GPU: 1}");
  EXPECT_EQ(snapshot[0].count, 2u);
  EXPECT_EQ(snapshot[0].oldest_waiting_since, At(1));
  EXPECT_EQ(snapshot[1].shape.ToString(), "{CPU: 1}");
  EXPECT_EQ(snapshot[1].count, 1u);
}

TEST(LeaseQueue, RandomWorkloadGrantsEverythingEventuallyWithoutOverbooking) {
  const std::vector<std::string> shapes = {"GPU: 1",   "GPU: 0.5, CPU: 1", "GPU: 2", "CPU: 3",
                                           "GPU: 0.3", "GPU: 4, CPU: 2",   "{}"};
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    NodeResources local = Node("CPU: 8, GPU: 4");
    const ResourceSet totals = local.Total();
    LeaseQueue queue = Queue();
    std::vector<Allocation> running;
    uint64_t next_id = 1;
    size_t granted = 0;
    for (int step = 0; step < 500; ++step) {
      if (rng() % 2 == 0) {
        LeaseRequest request = Request(next_id++, shapes[rng() % shapes.size()], At(step));
        Result<LeaseDecision> d = queue.Submit(request, local, {}, At(step));
        ASSERT_TRUE(d.ok());
        ASSERT_FALSE(std::holds_alternative<SpillBack>(*d));   // no other node
        ASSERT_FALSE(std::holds_alternative<Infeasible>(*d));  // every shape fits the totals
        if (std::holds_alternative<GrantLocally>(*d)) {
          Result<Allocation> a = local.Acquire(request.shape);
          ASSERT_TRUE(a.ok()) << a.status().ToString();
          running.push_back(*a);
          ++granted;
        }
      }
      if (!running.empty() && rng() % 2 == 0) {
        size_t i = rng() % running.size();
        ASSERT_TRUE(local.Release(running[i]).ok());
        running.erase(running.begin() + i);
      }
      std::vector<Allocation> more = ApplyGrants(queue.Dispatch(local, {}, At(step)), local);
      granted += more.size();
      running.insert(running.end(), more.begin(), more.end());
      ResourceSet sum = local.Available();
      for (const Allocation& a : running) sum.Add(a.resources);
      ASSERT_EQ(sum, totals) << "seed " << seed << " step " << step;
    }
    while (queue.size() > 0) {
      ASSERT_FALSE(running.empty()) << "requests wait with nothing running, seed " << seed;
      ASSERT_TRUE(local.Release(running.back()).ok());
      running.pop_back();
      std::vector<Allocation> more = ApplyGrants(queue.Dispatch(local, {}, At(1000)), local);
      granted += more.size();
      running.insert(running.end(), more.begin(), more.end());
    }
    EXPECT_EQ(granted, next_id - 1);  // every request ran
    for (const Allocation& a : running) ASSERT_TRUE(local.Release(a).ok());
    EXPECT_EQ(local.Available(), totals);
  }
}

}  // namespace
}  // namespace airt::worker::scheduling
