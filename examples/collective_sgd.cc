// Data-parallel SGD over airt's communicator (airt/collective.h): two ranks as actors, each on its
// own shard of a synthetic linear regression, gradients averaged with an allreduce each step.
// Prints the loss falling and exits 0 once it is below the threshold.
//   build/examples/collective_sgd        a local cluster of its own (or AIRT_ADDRESS's)
#include <cstdio>
#include <vector>

#include "airt/api.h"
#include "examples/collective_sgd.h"

int main() {
  constexpr int kWorld = 2, kSteps = 60;
  constexpr double kThreshold = 1e-3;  // the noise's variance is 1e-4
  airt::Init();
  std::vector<airt::ActorHandle<SgdRank>> actors;
  std::vector<airt::ObjectRef<std::vector<double>>> ranks;
  for (int r = 0; r < kWorld; ++r) actors.push_back(airt::Actor(SgdRank::Create).Remote());
  for (int r = 0; r < kWorld; ++r) {
    ranks.push_back(actors[r].Task(&SgdRank::Train).Remote(kWorld, r, kSteps, 0.1));
  }
  std::vector<std::vector<double>> losses;
  for (auto& r : ranks) losses.push_back(*airt::Get(r));
  actors.clear();
  airt::Shutdown();
  for (int step = 0; step < kSteps; step += 10) {
    std::printf("step %2d  loss %.6f\n", step, losses[0][step]);
  }
  double last = losses[0].back();
  bool agree = losses[0] == losses[1];
  std::printf("step %2d  loss %.6f (threshold %.0e; the ranks %s)\n", kSteps - 1, last, kThreshold,
              agree ? "agree" : "DISAGREE");
  if (!agree || !(last < kThreshold)) {
    std::printf("FAILED: the loss did not reach the threshold\n");
    return 1;
  }
  std::printf("reached the threshold\n");
  return 0;
}
