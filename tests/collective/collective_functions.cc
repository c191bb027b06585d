// The actor of the end-to-end collective tests: each runs one rank of a group in an airt-worker
// (loaded from the node's code search path; the test driver links it to name its methods).
#include "tests/collective/collective_functions.h"

#include <memory>
#include <string>
#include <vector>

#include "airt/api.h"
#include "airt/collective.h"
#include "collective/services.h"
#include "tests/collective/sweep.h"

namespace {

using namespace airt::collective;

std::string Joined(int world, int rank, const std::string& group,
                   const std::function<std::string(Communicator&)>& body) {
  HeadKv kv;
  CoreWorkerProgress progress;
  auto services = ClusterServices(kv, progress);
  if (!services.ok()) return services.status().ToString();
  GroupOptions o;
  o.world_size = world;
  o.rank = rank;
  o.group_name = group;
  o.timeout_ms = 20000;
  auto c = Communicator::Create(o, *services);
  if (!c.ok()) return c.status().ToString();
  return body(**c);
}

}  // namespace

Rank* Rank::Create() { return new Rank(); }

std::string Rank::Sweep(int world, int rank, std::string group) {
  return Joined(world, rank, group, [](Communicator& c) {
    std::vector<std::string> errors = airt::collective::testing::Sweep(c);
    return errors.empty() ? std::string() : errors.front();
  });
}

std::vector<float> Rank::BigAllreduce(int world, int rank, int mib) {
  auto group = Group::Init(world, rank, "gloo", "big");
  std::vector<float> data(static_cast<size_t>(mib) << 18, static_cast<float>(rank + 1));
  group->Allreduce(std::span<float>(data), ReduceOp::SUM);
  return {data.front(), data.back()};
}

std::string Rank::Skip(int world, int rank, int skipper, int timeout_ms) {
  GroupOptions o;
  o.world_size = world;
  o.rank = rank;
  o.group_name = "skip";
  o.timeout_ms = timeout_ms;
  auto group = Group::Init(o);
  std::vector<float> data(32, 1.0f);
  group->Allreduce(std::span<float>(data));
  if (rank == skipper) {
    kept_.push_back(std::move(group));
    return "skipped";
  }
  try {
    group->Allreduce(std::span<float>(data));
  } catch (const airt::TimeoutError& e) {
    return e.what();
  }
  return "";
}

AIRT_REMOTE(Rank::Create, &Rank::Sweep, &Rank::BigAllreduce, &Rank::Skip);
