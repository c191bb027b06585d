// The C++ sweep on a local cluster, for tests/python/test_tune_cpp.py:
//   airt_tune_sweep_driver <storage> retry    three trials: one runs clean, one's step throws
//                                             once, one's worker exits once; retried from their
//                                             checkpoints
//   airt_tune_sweep_driver <storage> slow     four slow trials (the test kills this driver)
//   airt_tune_sweep_driver <storage> resume   the same sweep, resumed from its folder
//   airt_tune_sweep_driver <storage> hyperband  eight trials under HyperBand (max_t 9, eta 3):
//                                             the second bracket paused at 3, its best two
//                                             resumed from their pause checkpoints
//   airt_tune_sweep_driver <storage> pbt      four trials under PBT, callbacks, num_to_keep 2
// Prints one line per trial: TRIAL <fail> <status> <results> <last step> <last loaded> <failures>
// ..., then PLOT <the plot's path>, or PLOT - <why there is none>.
// <i> <pauses> <exploits>; pbt also CALLBACKS <starts> <results> <completes> <errors>.
#include <cstdio>
#include <memory>
#include <string>

#include "airt/tune/pbt.h"
#include "airt/tune/sweep.h"
#include "tests/tune/sweep_trainable.h"

namespace {

struct Counts : airt::tune::Callback {
  int starts = 0, results = 0, completes = 0, errors = 0;
  void OnTrialStart(const airt::tune::TrialRecord&) override { ++starts; }
  void OnTrialResult(const airt::tune::TrialRecord&, const airt::tune::Metrics&) override {
    ++results;
  }
  void OnTrialComplete(const airt::tune::TrialRecord&) override { ++completes; }
  void OnTrialError(const airt::tune::TrialRecord&) override { ++errors; }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <storage> retry|slow|resume|hyperband|pbt\n", argv[0]);
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
  auto counts = std::make_shared<Counts>();
  if (mode == "hyperband") {
    options.name = "hyperband";
    options.max_iterations = 9;
    options.checkpoint_frequency = 0;  // the pauses checkpoint all the same
    airt::tune::HyperBandOptions hb;
    hb.max_t = 9;
    hb.reduction_factor = 3;
    options.scheduler = airt::tune::MakeHyperBandScheduler(hb);
    space.GridStrings("fail", {"hb"}).Grid("i", {0, 1, 2, 3, 4, 5, 6, 7});
  } else if (mode == "pbt") {
    options.name = "pbt";
    options.max_iterations = 8;
    options.checkpoint_config.num_to_keep = 2;
    options.callbacks = {counts};
    airt::tune::PbtOptions pbt;
    pbt.perturbation_interval = 2;
    pbt.resample_probability = 0;
    pbt.mutations.number_choices["i"] = {0, 1, 2, 3};
    options.scheduler = std::make_shared<airt::tune::PopulationBasedTraining>(pbt);
    space.GridStrings("fail", {"pbt"}).Grid("i", {0, 1, 2, 3});
  } else if (mode == "retry") {
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
    double i = t.config.numbers.count("i") ? t.config.Number("i") : 0;
    std::printf("TRIAL %s %s %zu %g %g %d %g %d %d\n", t.config.String("fail").c_str(),
                t.status.c_str(), t.results.size(), step, loaded, t.num_failures, i, t.num_pauses,
                t.num_exploits);
  }
  std::printf("PLOT %s\n", result.plot_path.empty() ? ("- " + result.no_plot).c_str()
                                                     : result.plot_path.c_str());
  if (mode == "pbt") {
    std::printf("CALLBACKS %d %d %d %d\n", counts->starts, counts->results, counts->completes,
                counts->errors);
  }
  airt::Shutdown();
  return 0;
}
