// The ranks of airt_allreduce_bench: allreduce (or reducescatter, each rank keeping an equal
// block) through airt's communicator (airt/collective.h), timed with the loop the bare Gloo
// program runs (allreduce_loop.h).
#include <span>
#include <string>
#include <vector>

#include "airt/api.h"
#include "airt/collective.h"
#include "bench/collective/allreduce_loop.h"

// A rank: an actor, so that each has a worker process of its own.
class AllreduceRank {
 public:
  static AllreduceRank* Create();
  std::vector<double> Run(int world, int rank, std::string group, std::string sizes,
                          std::string op);
};

AllreduceRank* AllreduceRank::Create() { return new AllreduceRank(); }

// (bytes, seconds per allreduce) per size, flattened: bytes0, s0, bytes1, s1, ...
std::vector<double> AllreduceRank::Run(int world, int rank, std::string group, std::string sizes,
                                       std::string op) {
  auto g = airt::collective::Group::Init(world, rank, "gloo", group);
  std::vector<float> block;
  auto results = airt::bench::TimeAllreduce(
      airt::bench::ParseSizes(sizes),
      [&](float* data, size_t count) {
        if (op == "reducescatter") {
          block.resize(count / world);
          g->Reducescatter(std::span<const float>(data, count), std::span<float>(block),
                           airt::collective::ReduceOp::SUM);
          return;
        }
        g->Allreduce(std::span<float>(data, count), airt::collective::ReduceOp::SUM);
      },
      [&] { g->Barrier(); });
  std::vector<double> out;
  for (auto& [bytes, seconds] : results) {
    out.push_back(static_cast<double>(bytes));
    out.push_back(seconds);
  }
  return out;
}

AIRT_REMOTE(AllreduceRank::Create, &AllreduceRank::Run);
