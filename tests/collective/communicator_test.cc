// The communicator with threads of one process as ranks: the real Gloo backend over loopback TCP,
// rendezvous through an in-memory KV, progress on an in-memory board.
#include "collective/communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <latch>
#include <thread>
#include <vector>

#include "collective/services.h"
#include "tests/collective/sweep.h"

namespace airt::collective {
namespace {

struct Ranks {
  MemoryKv kv;
  MemoryProgress board;
  std::vector<std::unique_ptr<ProgressBoard>> views;

  // Runs `body(rank, communicator)` on `world` threads after joining group `name`.
  void Run(int world, const std::string& name, int64_t timeout_ms,
           const std::function<void(int, Communicator&)>& body) {
    views.clear();
    for (int r = 0; r < world; ++r) views.push_back(board.ForRank("rank" + std::to_string(r)));
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        GroupOptions o;
        o.world_size = world;
        o.rank = r;
        o.group_name = name;
        o.timeout_ms = timeout_ms;
        CommunicatorServices s;
        s.kv = &kv;
        s.progress = views[r].get();
        s.self = RankInfo{r, "node-" + std::to_string(r), 1000 + r, "rank" + std::to_string(r)};
        auto c = Communicator::Create(o, s);
        ASSERT_TRUE(c.ok()) << c.status().ToString();
        body(r, **c);
      });
    }
    for (auto& t : threads) t.join();
  }
};

class CommunicatorSweep : public ::testing::TestWithParam<int> {};

TEST_P(CommunicatorSweep, EveryOperationTypeAndOpAgreesUpTo64KiB) {
  Ranks ranks;
  ranks.Run(GetParam(), "sweep", 20000, [](int, Communicator& c) {
    std::vector<std::string> errors = testing::Sweep(c);
    EXPECT_TRUE(errors.empty()) << errors.front();
  });
  EXPECT_EQ(ranks.kv.size(), 0u) << "the rendezvous keys are deleted once every rank joined";
}
INSTANTIATE_TEST_SUITE_P(Worlds, CommunicatorSweep, ::testing::Values(1, 2, 3, 4));

TEST(Communicator, AllreduceSumsFloat32At64MiB) {
  Ranks ranks;
  ranks.Run(2, "big", 60000, [](int r, Communicator& c) {
    std::vector<float> data(16 << 20, static_cast<float>(r + 1));
    ASSERT_TRUE(c.Allreduce(View(std::span<float>(data)), ReduceOp::SUM).ok());
    EXPECT_EQ(data.front(), 3.0f);
    EXPECT_EQ(data.back(), 3.0f);
  });
}

// The ring reduce-scatter against the allreduce of the same input: every rank's block equals its
// block of the allreduce, on power-of-two worlds and not, a prime block length, exact types.
TEST(Communicator, ReducescatterEqualsItsBlockOfTheAllreduce) {
  constexpr size_t kBlock = 100003;
  for (int world : {2, 3, 4}) {
    Ranks ranks;
    ranks.Run(world, "rs" + std::to_string(world), 60000, [&](int r, Communicator& c) {
      for (ReduceOp op : {ReduceOp::SUM, ReduceOp::MIN, ReduceOp::MAX, ReduceOp::AVERAGE}) {
        std::vector<int64_t> input(kBlock * world);
        for (size_t i = 0; i < input.size(); ++i) {
          input[i] = static_cast<int64_t>((i * 2654435761u + r * 40503u) % 1000003) - 500000;
        }
        std::vector<int64_t> all = input, block(kBlock);
        ASSERT_TRUE(c.Allreduce(View(std::span<int64_t>(all)), op).ok());
        ASSERT_TRUE(c.Reducescatter(View(std::span<const int64_t>(input)),
                                    View(std::span<int64_t>(block)), op)
                        .ok());
        EXPECT_TRUE(std::equal(block.begin(), block.end(), all.begin() + r * kBlock))
            << "world " << world << " rank " << r << " op " << static_cast<int>(op);
      }
      std::vector<float> input(kBlock * world), block(kBlock);
      for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>((i + r) % 17);
      std::vector<float> all = input;
      ASSERT_TRUE(c.Allreduce(View(std::span<float>(all)), ReduceOp::SUM).ok());
      ASSERT_TRUE(c.Reducescatter(View(std::span<const float>(input)),
                                  View(std::span<float>(block)), ReduceOp::SUM)
                      .ok());
      EXPECT_TRUE(std::equal(block.begin(), block.end(), all.begin() + r * kBlock));
    });
  }
}

TEST(Communicator, ErrorNamesTheRankThatSkippedAnOperation) {
  Ranks ranks;
  std::vector<std::string> messages(3);
  std::latch diagnosed(2);  // every rank stays in the group until ranks 0 and 1 have their error
  ranks.Run(3, "hung", 1500, [&](int r, Communicator& c) {
    std::vector<float> data(16, 1.0f);
    ASSERT_TRUE(c.Allreduce(View(std::span<float>(data)), ReduceOp::SUM).ok());
    if (r == 2) {  // skips the next one
      diagnosed.wait();
      return;
    }
    Status s = c.Allreduce(View(std::span<float>(data)), ReduceOp::SUM);
    diagnosed.count_down();
    EXPECT_EQ(s.code(), Code::kDeadlineExceeded) << s.ToString();
    messages[r] = s.message();
    ASSERT_TRUE(c.stall().has_value());
    EXPECT_EQ(c.stall()->operation, "allreduce");
    EXPECT_EQ(c.stall()->sequence, 2u);
    ASSERT_EQ(c.stall()->never_reached.size(), 1u);
    EXPECT_EQ(c.stall()->never_reached[0].rank, 2);
    EXPECT_EQ(c.stall()->never_reached[0].pid, 1002);
    // A failed group stays failed.
    EXPECT_EQ(c.Barrier().code(), Code::kFailedPrecondition);
    diagnosed.wait();
  });
  for (int r : {0, 1}) {
    EXPECT_NE(messages[r].find("allreduce #2 of collective group 'hung'"), std::string::npos)
        << messages[r];
    EXPECT_NE(messages[r].find("never reached it: rank 2 (node node-2, pid 1002), whose last "
                               "operation was #1"),
              std::string::npos)
        << messages[r];
    EXPECT_EQ(messages[r].find("rank " + std::to_string(1 - r) + " (node"), std::string::npos)
        << "the rank that reached it is not named: " << messages[r];
  }
}

TEST(Communicator, JoinTimesOutNamingTheMissingRankAndLeavesNoKeys) {
  MemoryKv kv;
  MemoryProgress board;
  auto view = board.ForRank("a");
  GroupOptions o;
  o.world_size = 2;
  o.rank = 0;
  o.group_name = "alone";
  o.timeout_ms = 300;
  CommunicatorServices s{&kv, view.get(), RankInfo{0, "n", 1, "a"}};
  auto c = Communicator::Create(o, s);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kDeadlineExceeded) << c.status().ToString();
  EXPECT_NE(c.status().message().find("did not join"), std::string::npos)
      << c.status().ToString();
  EXPECT_EQ(kv.size(), 0u);
}

TEST(Communicator, BadArgumentsAreRefusedWithoutRunning) {
  Ranks ranks;
  ranks.Run(2, "args", 5000, [](int r, Communicator& c) {
    std::vector<float> in(4), out(5);
    EXPECT_EQ(c.Allgather(View(std::span<float>(in)), View(std::span<float>(out))).code(),
              Code::kInvalidArgument);
    EXPECT_EQ(c.Broadcast(View(std::span<float>(in)), 2).code(), Code::kInvalidArgument);
    EXPECT_EQ(c.Send(View(std::span<float>(in)), r).code(), Code::kInvalidArgument);
    std::vector<int32_t> ints(8);
    EXPECT_EQ(c.Reducescatter(View(std::span<int32_t>(ints)), View(std::span<float>(in)),
                              ReduceOp::SUM)
                  .code(),
              Code::kInvalidArgument);
    EXPECT_TRUE(c.Barrier().ok()) << "bad calls leave the group usable";
    EXPECT_FALSE(c.stall().has_value());
  });
  MemoryKv kv;
  MemoryProgress board;
  auto view = board.ForRank("a");
  CommunicatorServices s{&kv, view.get(), RankInfo{}};
  GroupOptions o;
  o.world_size = 2;
  o.rank = 2;
  EXPECT_EQ(Communicator::Create(o, s).status().code(), Code::kInvalidArgument);
  o.rank = 0;
  o.backend = "mpi";
  EXPECT_EQ(Communicator::Create(o, s).status().code(), Code::kInvalidArgument);
  o.backend = "nccl";  // this machine: no plugin, or no CUDA device
  Status nccl = Communicator::Create(o, s).status();
  EXPECT_TRUE(nccl.code() == Code::kUnimplemented || nccl.code() == Code::kFailedPrecondition)
      << nccl.ToString();
  EXPECT_NE(nccl.message().find("nccl backend"), std::string::npos) << nccl.ToString();
}

}  // namespace
}  // namespace airt::collective
