// Population Based Training for the C++ sweep (Jaderberg et al. 2017; Ray's
// PopulationBasedTraining, asynchronous): every perturbation_interval of the time attribute, a
// trial in the bottom quantile_fraction of the population's latest scores exploits a trial of the
// top one (takes its latest checkpoint) and explores (perturbs or resamples the donor's config).
// The sweep (sweep.h) applies the exploits: the trial restarts on a new actor with the new config,
// loaded from a copy of the donor's checkpoint. Python's PopulationBasedTraining
// (python/airt/tune/pbt.py) is its own: its mutations are Python callables and domains.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "airt/tune/schedulers.h"
#include "airt/tune/sweep.h"

namespace airt::tune {

// How explore changes a donor's config, key by key (keys absent from the config are set).
struct Mutations {
  // A list: the value moves to a neighbour in the list (or is redrawn from it with
  // resample_probability, or when the value is not in it), as Ray's list mutations.
  std::map<std::string, std::vector<double>> number_choices;
  std::map<std::string, std::vector<std::string>> string_choices;
  // A range: the value is multiplied by one of perturbation_factors (or redrawn uniformly in
  // [lower, upper) with resample_probability), as Ray's tune.uniform mutations.
  std::map<std::string, std::pair<double, double>> number_ranges;
};

struct PbtOptions {
  Mode mode = Mode::kMin;
  double perturbation_interval = 60;  // time-attribute units between a trial's perturbations
  double burn_in_period = 0;          // no perturbation before this time
  Mutations mutations;
  double quantile_fraction = 0.25;  // in [0, 0.5]
  double resample_probability = 0.25;
  std::vector<double> perturbation_factors = {1.2, 0.8};
  uint64_t seed = 0;
};

// One exploit step: `trial` continues from `donor`'s latest checkpoint with `config`.
struct Exploit {
  std::string trial;
  std::string donor;
  Config config;
};

class PopulationBasedTraining final : public TrialScheduler {
 public:
  // Throws InvalidArgumentError for no mutations, a quantile_fraction outside [0, 0.5], a
  // perturbation_interval <= 0, a resample_probability outside [0, 1], no perturbation factors,
  // or an empty list or bad range in the mutations.
  explicit PopulationBasedTraining(PbtOptions options);

  void OnTrialAdd(std::string_view trial) override;
  // Scores the trial; at its perturbation interval, a bottom-quantile trial is queued for an
  // exploit (TakeExploits) of a top-quantile trial that has a checkpoint. Always kContinue.
  Decision OnTrialResult(std::string_view trial, double time,
                         std::optional<double> metric) override;
  void OnTrialComplete(std::string_view trial, std::optional<double> time,
                       std::optional<double> metric) override;
  std::string Name() const override { return "PopulationBasedTraining"; }

  // The sweep tells each trial's config (at its start, and after an exploit) and whether it
  // has a checkpoint a trial can take.
  void SetConfig(std::string_view trial, const Config& config);
  void SetCheckpointed(std::string_view trial);
  // The exploits decided since the last call, cleared by it.
  std::vector<Exploit> TakeExploits() { return std::exchange(exploits_, {}); }
  int num_perturbations() const { return num_perturbations_; }
  // explore: a mutated copy of `config` (public for tests).
  Config Explore(const Config& config);

 private:
  struct Member {
    Config config;
    std::optional<double> score;  // higher is better
    double last_perturbation = 0;
    bool checkpointed = false;
  };
  PbtOptions options_;
  std::mt19937_64 random_;
  std::map<std::string, Member> members_;
  std::vector<Exploit> exploits_;
  int num_perturbations_ = 0;
};

}  // namespace airt::tune
