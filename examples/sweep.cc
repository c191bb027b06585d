// A GPU-style hyperparameter sweep on an airt cluster: a grid of (learning rate, momentum)
// trials, each a task asking for half a GPU, run in parallel across the cluster's GPUs; the best
// trial is reported. Run against a cluster (scripts/demo starts one):
//   AIRT_ADDRESS=127.0.0.1:6379 build/examples/sweep
#include "examples/sweep.h"

#include <algorithm>
#include <cstdio>
#include <vector>

int main() {
  airt::Init();  // joins the cluster at AIRT_ADDRESS
  std::vector<airt::ObjectRef<TrialResult>> trials;
  for (double lr : {0.001, 0.01, 0.1, 0.5, 1.2}) {
    for (double momentum : {0.0, 0.5, 0.9}) {
      trials.push_back(airt::Task(Train).SetResource("GPU", 0.5).Remote(lr, momentum, 200));
    }
  }
  std::printf("submitted %zu trials, each asking for {CPU: 1, GPU: 0.5}\n\n", trials.size());
  std::vector<TrialResult> results;
  for (auto& r : airt::Get(trials)) results.push_back(*r);
  std::printf("%8s %9s %14s   %s\n", "lr", "momentum", "final loss", "GPU ids");
  for (const TrialResult& t : results) {
    std::printf("%8.3f %9.1f %14.6g   %s\n", t.lr, t.momentum, t.loss, t.gpus.c_str());
  }
  auto best = std::min_element(results.begin(), results.end(),
                               [](const auto& a, const auto& b) { return a.loss < b.loss; });
  std::printf("\nbest: lr=%g momentum=%g loss=%.6g\n", best->lr, best->momentum, best->loss);
  airt::Shutdown();
  return 0;
}
