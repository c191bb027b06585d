// The ranks of airt_allreduce_bench: allreduce through airt's communicator (airt/collective.h),
// timed with the loop the bare Gloo program runs (allreduce_loop.h).
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
  std::vector<double> Run(int world, int rank, std::string group, std::string sizes);
};

AllreduceRank* AllreduceRank::Create() { return new AllreduceRank(); }

// (bytes, seconds per allreduce) per size, flattened: bytes0, s0, bytes1, s1, ...
std::vector<double> AllreduceRank::Run(int world, int rank, std::string group, std::string sizes) {
  auto g = airt::collective::Group::Init(world, rank, "gloo", group);
  auto results = airt::bench::TimeAllreduce(
      airt::bench::ParseSizes(sizes),
      [&](float* data, size_t count) {
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
