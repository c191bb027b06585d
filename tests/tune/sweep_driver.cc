// The C++ sweep on a local cluster, for tests/python/test_tune_cpp.py:
//   airt_tune_sweep_driver <storage> retry    three trials: one runs clean, one's step throws
//                                             once, one's worker exits once; retried from their
//                                             checkpoints
//   airt_tune_sweep_driver <storage> slow     four slow trials (the test kills this driver)
//   airt_tune_sweep_driver <storage> resume   the same sweep, resumed from its folder
// Prints one line per trial: TRIAL <fail> <status> <results> <last step> <last loaded> <failures>.
#include <cstdio>
#include <string>

#include "airt/tune/sweep.h"
#include "tests/tune/sweep_trainable.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <storage> retry|slow|resume\n", argv[0]);
    return 2;
  }
  const std::string storage = argv[1], mode = argv[2];
  airt::Init();  // a local cluster: the trainable's library is next to this program
  airt::tune::SweepOptions options;
  options.storage_path = storage;
  options.metric = "loss";
  options.verbose = false;
  options.checkpoint_frequency = 1;
  options.resources = {{"CPU", 0.25}};
  airt::tune::SearchSpace space;
  if (mode == "retry") {
    options.name = "retry";
    options.max_failures = 1;
    options.max_iterations = 5;
    space.GridStrings("fail", {"none", "throw", "exit"});
  } else {
    options.name = "slow";
    options.max_iterations = 6;
    options.max_concurrent = 2;
    options.resume = mode == "resume";
    space.GridStrings("fail", {"slow"}).Grid("i", {0, 1, 2, 3});
  }
  space.GridStrings("dir", {storage});
  airt::tune::SweepResult result =
      airt::tune::Run(FlakyCounter::Create, &FlakyCounter::Step, &FlakyCounter::Save,
                      &FlakyCounter::Load, space, options);
  for (const airt::tune::TrialRecord& t : result.trials) {
    double step = t.results.empty() ? 0 : t.results.back().at("step");
    double loaded = t.results.empty() ? 0 : t.results.back().at("loaded");
    std::printf("TRIAL %s %s %zu %g %g %d\n", t.config.String("fail").c_str(), t.status.c_str(),
                t.results.size(), step, loaded, t.num_failures);
  }
  airt::Shutdown();
  return 0;
}
