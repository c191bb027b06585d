// Fetching many objects from other nodes: each node an airt-store --transfer daemon on loopback;
// this process pulls into a third node's store with an ObjectPuller (one pooled connection per
// peer, pipelined batches, one deadline), and runs a TaskExecutor whose queued tasks' arguments
// are pulled while the task before them runs.
#include <signal.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "airt/internal/serialization.h"
#include "api/internal/task_executor.h"
#include "objectstore/transfer.h"
#include "tests/e2e/transfer_fixture.h"

namespace airt::e2e {
namespace {

using objectstore::ObjectPuller;
using objectstore::PullerSnapshot;
using objectstore::PullRequest;

class BatchedFetch : public TransferFixture {
 protected:
  // Puts `size` bytes of a pattern of `id` on `node` through its observer.
  void PutPattern(Node* node, const ObjectId& id, size_t size) {
    std::vector<uint8_t> bytes(size);
    for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + id.data()[20]);
    ASSERT_TRUE(node->observer->Put(id, bytes).ok());
  }
  // Whether `node` holds `id` with the bytes PutPattern wrote.
  static bool HoldsPattern(Node* node, const ObjectId& id, size_t size) {
    auto pin = node->observer->Get(id, 0);
    if (!pin.ok() || pin->data().size() != size) return false;
    for (size_t i = 0; i < size; ++i) {
      if (pin->data()[i] != static_cast<uint8_t>(i * 7 + id.data()[20])) return false;
    }
    return true;
  }
  static const PullerSnapshot::Peer* PeerOf(const PullerSnapshot& s, const std::string& address) {
    for (const auto& p : s.peers) {
      if (p.address == address) return &p;
    }
    return nullptr;
  }
};

constexpr size_t kObjectSize = 64 << 10;

TEST_F(BatchedFetch, ManyObjectsFromTwoNodesArriveOverOneConnectionPerPeer) {
  Node* a = StartNode("a", {"--capacity", "64M"});
  Node* b = StartNode("b", {"--capacity", "64M"});
  Node* c = StartNode("c", {"--capacity", "64M"});
  ASSERT_TRUE(a && b && c);
  std::vector<PullRequest> wanted;
  for (uint32_t i = 1; i <= 200; ++i) {
    Node* holder = i % 2 ? a : b;
    ASSERT_NO_FATAL_FAILURE(PutPattern(holder, Id(i), kObjectSize));
    wanted.push_back(PullRequest{Id(i), holder->transfer});
  }
  ObjectPuller puller(c->observer.get());
  std::vector<Status> pulled = puller.PullEach(wanted, 30000);
  for (size_t i = 0; i < pulled.size(); ++i) EXPECT_TRUE(pulled[i].ok()) << pulled[i].ToString();
  // A second Get reuses the same connections.
  std::vector<PullRequest> more;
  for (uint32_t i = 201; i <= 220; ++i) {
    Node* holder = i % 2 ? a : b;
    ASSERT_NO_FATAL_FAILURE(PutPattern(holder, Id(i), kObjectSize));
    more.push_back(PullRequest{Id(i), holder->transfer});
  }
  for (const Status& s : puller.PullEach(more, 30000)) EXPECT_TRUE(s.ok()) << s.ToString();
  for (uint32_t i = 1; i <= 220; ++i) EXPECT_TRUE(HoldsPattern(c, Id(i), kObjectSize)) << i;

  PullerSnapshot s = puller.Snapshot();
  EXPECT_EQ(s.connections_dialled, 2u);
  EXPECT_EQ(s.connections_open, 2u);
  EXPECT_EQ(s.objects_pulled, 220u);
  EXPECT_EQ(s.bytes_pulled, 220u * kObjectSize);
  EXPECT_EQ(s.objects_failed, 0u);
  ASSERT_EQ(s.peers.size(), 2u);
  for (const auto& peer : s.peers) {
    EXPECT_EQ(peer.dials, 1u) << peer.address;
    EXPECT_EQ(peer.objects_pulled, 110u) << peer.address;
  }
  StopNode(a);
  StopNode(b);
  StopNode(c);
}

TEST_F(BatchedFetch, FailsWithDeadlineExceededUnderOneDeadlineWhenThePeerStopsAnswering) {
  Node* a = StartNode("a", {"--capacity", "64M"});
  Node* c = StartNode("c", {"--capacity", "64M"});
  ASSERT_TRUE(a && c);
  std::vector<PullRequest> wanted;
  for (uint32_t i = 1; i <= 50; ++i) {
    ASSERT_NO_FATAL_FAILURE(PutPattern(a, Id(i), kObjectSize));
    wanted.push_back(PullRequest{Id(i), a->transfer});
  }
  ObjectPuller puller(c->observer.get());
  a->process->Kill(SIGSTOP);  // its kernel still accepts the connection; nothing answers
  std::vector<Status> pulled = puller.PullEach(wanted, 1000);
  a->process->Kill(SIGCONT);
  for (size_t i = 0; i < pulled.size(); ++i) {
    EXPECT_EQ(pulled[i].code(), Code::kDeadlineExceeded) << pulled[i].ToString();
    EXPECT_NE(pulled[i].message().find(wanted[i].id.Hex()), std::string::npos);
    EXPECT_NE(pulled[i].message().find(a->transfer), std::string::npos);
  }
  // Nobody waits on that connection any more: it was closed, and no partial copy is left.
  EXPECT_EQ(puller.Snapshot().connections_open, 0u);
  EXPECT_TRUE(
      WaitForStats(c, [](const objectstore::StoreStats& s) { return s.num_creating == 0; }));
  // The peer answers again: the next Get redials and gets everything.
  for (const Status& s : puller.PullEach(wanted, 30000)) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(puller.Snapshot().connections_dialled, 2u);
  for (uint32_t i = 1; i <= 50; ++i) EXPECT_TRUE(HoldsPattern(c, Id(i), kObjectSize));
  StopNode(a);
  StopNode(c);
}

TEST_F(BatchedFetch, PeerDyingMidBatchFailsOnlyItsObjects) {
  Node* a = StartNode("a", {"--capacity", "64M"});
  Node* b = StartNode("b", {"--capacity", "64M"});
  Node* c = StartNode("c", {"--capacity", "64M"});
  ASSERT_TRUE(a && b && c);
  std::vector<PullRequest> wanted;
  for (uint32_t i = 1; i <= 40; ++i) {
    Node* holder = i % 2 ? a : b;
    ASSERT_NO_FATAL_FAILURE(PutPattern(holder, Id(i), kObjectSize));
    wanted.push_back(PullRequest{Id(i), holder->transfer});
  }
  std::string a_address = a->transfer, b_address = b->transfer;
  ObjectPuller puller(c->observer.get());
  // A holds its replies (stopped) while B's arrive; then A dies with the batch in flight.
  a->process->Kill(SIGSTOP);
  std::unique_ptr<objectstore::PullBatch> batch = puller.Start(wanted, 30000);
  ASSERT_TRUE(testing::WaitUntil(
      [&] {
        const PullerSnapshot::Peer* peer = PeerOf(puller.Snapshot(), b_address);
        return peer != nullptr && peer->objects_pulled == 20;
      },
      20s));
  EXPECT_FALSE(batch->Done());
  KillNode(a);
  const std::vector<Status>& pulled = batch->Wait();
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (wanted[i].address == b_address) {
      EXPECT_TRUE(pulled[i].ok()) << pulled[i].ToString();
      EXPECT_TRUE(HoldsPattern(c, wanted[i].id, kObjectSize));
      continue;
    }
    EXPECT_EQ(pulled[i].code(), Code::kUnavailable) << pulled[i].ToString();
    EXPECT_NE(pulled[i].message().find(wanted[i].id.Hex()), std::string::npos);
    EXPECT_NE(pulled[i].message().find(a_address), std::string::npos);
    EXPECT_FALSE(c->observer->Contains(wanted[i].id));
  }
  EXPECT_TRUE(
      WaitForStats(c, [](const objectstore::StoreStats& s) { return s.num_creating == 0; }));
  StopNode(b);
  StopNode(c);
}

TEST_F(BatchedFetch, MissingObjectFailsAloneNamingItsIdAndNode) {
  Node* a = StartNode("a", {"--capacity", "64M"});
  Node* c = StartNode("c", {"--capacity", "64M"});
  ASSERT_TRUE(a && c);
  ASSERT_NO_FATAL_FAILURE(PutPattern(a, Id(1), kObjectSize));
  ASSERT_NO_FATAL_FAILURE(PutPattern(a, Id(3), kObjectSize));
  std::vector<PullRequest> wanted = {
      {Id(1), a->transfer}, {Id(2), a->transfer}, {Id(3), a->transfer}, {Id(4), "no-port"}};
  ObjectPuller puller(c->observer.get());
  std::vector<Status> pulled = puller.PullEach(wanted, 30000);
  EXPECT_TRUE(pulled[0].ok()) << pulled[0].ToString();
  EXPECT_EQ(pulled[1].code(), Code::kNotFound) << pulled[1].ToString();
  EXPECT_NE(pulled[1].message().find(Id(2).Hex()), std::string::npos);
  EXPECT_NE(pulled[1].message().find(a->transfer), std::string::npos);
  EXPECT_TRUE(pulled[2].ok()) << pulled[2].ToString();
  EXPECT_EQ(pulled[3].code(), Code::kInvalidArgument) << pulled[3].ToString();
  EXPECT_TRUE(HoldsPattern(c, Id(1), kObjectSize));
  EXPECT_TRUE(HoldsPattern(c, Id(3), kObjectSize));
  EXPECT_EQ(puller.Snapshot().connections_dialled, 1u);  // the error did not cost the connection
  StopNode(a);
  StopNode(c);
}

// The executor's fallback: "spin" runs until released; "size" returns its argument's byte count.
struct Functions {
  std::atomic<bool> release{false};
  std::atomic<bool> spinning{false};
  internal::InvokeOutcome Call(const std::string& function,
                               std::span<const std::string_view> args) {
    internal::InvokeOutcome outcome;
    if (function == "spin") {
      spinning = true;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      outcome.returns.push_back(internal::Serialize(0));
    } else {
      uint64_t total = 0;
      for (std::string_view a : args) total += a.size();
      outcome.returns.push_back(internal::Serialize(total));
    }
    return outcome;
  }
};

TEST_F(BatchedFetch, QueuedTaskArgumentsArriveWhileTheTaskBeforeThemRuns) {
  Node* a = StartNode("a", {"--capacity", "64M"});
  Node* b = StartNode("b", {"--capacity", "64M"});
  Node* c = StartNode("c", {"--capacity", "64M"});
  ASSERT_TRUE(a && b && c);
  ASSERT_NO_FATAL_FAILURE(PutPattern(a, Id(1), kObjectSize));
  ASSERT_NO_FATAL_FAILURE(PutPattern(b, Id(2), 2 * kObjectSize));

  ObjectPuller puller(c->observer.get());
  Functions functions;
  internal::FunctionRegistry registry;
  internal::TaskExecutor::Options options;
  options.fallback = [&](internal::TaskKind, const std::string& function, void*,
                         std::span<const std::string_view> args) {
    return functions.Call(function, args);
  };
  options.puller = &puller;
  internal::TaskExecutor executor(registry, c->observer.get(), options);

  auto task = [](const std::string& function) {
    internal::TaskToRun t;
    t.task_id = TaskId::Of(ActorId::NilFor(JobId::FromRandom()));
    t.function_name = function;
    t.num_returns = 1;
    return t;
  };
  auto object_arg = [](const ObjectId& id, const std::string& address) {
    internal::TaskArgument arg;
    arg.is_object = true;
    arg.object_id = id;
    arg.transfer_address = address;
    return arg;
  };
  auto submit = [&](internal::TaskToRun t) {
    auto done = std::make_shared<std::promise<internal::TaskOutcome>>();
    auto outcome = done->get_future();
    executor.Submit(std::move(t),
                    [done](internal::TaskOutcome o) { done->set_value(std::move(o)); });
    return outcome;
  };

  internal::TaskToRun first = task("spin");
  auto first_done = submit(first);
  ASSERT_TRUE(testing::WaitUntil([&] { return functions.spinning.load(); }, 10s));
  // Two arguments on two nodes (one a list element), queued behind the running task.
  internal::TaskToRun second = task("size");
  second.args.push_back(object_arg(Id(1), a->transfer));
  internal::TaskArgument list;
  list.is_list = true;
  list.elements.push_back(object_arg(Id(2), b->transfer));
  second.args.push_back(list);
  auto second_done = submit(second);

  // They arrive in this node's store while the first task still runs.
  EXPECT_TRUE(testing::WaitUntil(
      [&] { return c->observer->Contains(Id(1)) && c->observer->Contains(Id(2)); }, 20s));
  EXPECT_TRUE(executor.IsRunning(first.task_id));
  EXPECT_FALSE(executor.IsRunning(second.task_id));
  // The puller counts a pull once its copy is sealed, a moment after the store shows it.
  EXPECT_TRUE(testing::WaitUntil([&] { return puller.Snapshot().objects_pulled >= 2; }, 20s));
  EXPECT_EQ(puller.Snapshot().objects_pulled, 2u);

  functions.release = true;
  internal::TaskOutcome ran = second_done.get();
  ASSERT_TRUE(ran.status.ok()) << ran.status.ToString();
  ASSERT_FALSE(ran.failure) << ran.failure->message;
  ASSERT_EQ(ran.returns.size(), 1u);
  // The list argument is a msgpack array header (1 byte) and the element's bytes.
  EXPECT_EQ(internal::Deserialize<uint64_t>(ran.returns[0].inline_bytes), 3 * kObjectSize + 1);
  EXPECT_TRUE(first_done.get().status.ok());
  // Nothing was pulled twice.
  EXPECT_EQ(puller.Snapshot().objects_requested, 2u);
  StopNode(a);
  StopNode(b);
  StopNode(c);
}

TEST_F(BatchedFetch, TaskFailsNamingTheArgumentWhoseNodeDoesNotHoldIt) {
  Node* a = StartNode("a", {"--capacity", "64M"});
  Node* c = StartNode("c", {"--capacity", "64M"});
  ASSERT_TRUE(a && c);
  ObjectPuller puller(c->observer.get());
  Functions functions;
  internal::FunctionRegistry registry;
  internal::TaskExecutor::Options options;
  options.fallback = [&](internal::TaskKind, const std::string& function, void*,
                         std::span<const std::string_view> args) {
    return functions.Call(function, args);
  };
  options.puller = &puller;
  options.fetch_timeout_ms = 10000;
  internal::TaskExecutor executor(registry, c->observer.get(), options);
  internal::TaskToRun t;
  t.task_id = TaskId::Of(ActorId::NilFor(JobId::FromRandom()));
  t.function_name = "size";
  t.num_returns = 1;
  internal::TaskArgument arg;
  arg.is_object = true;
  arg.object_id = Id(9);
  arg.transfer_address = a->transfer;
  t.args.push_back(arg);
  internal::TaskOutcome ran = executor.Run(t);
  // The task fails as its argument's loss (the one error map: OBJECT_LOST), naming the object and
  // the node asked for it.
  ASSERT_TRUE(ran.status.ok()) << ran.status.ToString();
  ASSERT_TRUE(ran.failure.has_value());
  EXPECT_EQ(ran.failure->kind, proto::ErrorKind::OBJECT_LOST);
  EXPECT_NE(ran.failure->message.find(Id(9).Hex()), std::string::npos) << ran.failure->message;
  EXPECT_NE(ran.failure->message.find(a->transfer), std::string::npos) << ran.failure->message;
  StopNode(a);
  StopNode(c);
}

}  // namespace
}  // namespace airt::e2e
