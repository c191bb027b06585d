// Hyperparameter sweeps from C++ (Ray has no C++ Tune): a search space (grid and random
// leaves), trials run as C++ actors with their own resources, a scheduler (FIFO, ASHA, ... from
// schedulers.h: the same decisions as airt.tune in Python), the same live progress table and the
// same experiment folder layout (storage_path/name/<trial>/params.json, result.json,
// progress.csv; experiment_state.json).
//
//   struct Model { static Model* Create(airt::tune::Config c); airt::tune::Metrics Step(); };
//   AIRT_REMOTE(Model::Create, &Model::Step);          // in the workers' library
//   airt::tune::SweepOptions o; o.metric = "loss"; o.resources = {{"CPU", 0.25}, {"GPU", 0.5}};
//   o.scheduler = airt::tune::MakeAshaScheduler({});
//   auto result = airt::tune::Run(Model::Create, &Model::Step,
//                                 airt::tune::SearchSpace().Grid("lr", {0.01, 0.1}), o);
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "airt/api.h"
#include "airt/tune/schedulers.h"

namespace airt::tune {

// A trial's hyperparameters by name: numbers and strings. Travels to the trial actor (msgpack).
struct Config {
  std::map<std::string, double> numbers;
  std::map<std::string, std::string> strings;
  // Throws InvalidArgumentError naming the key when it is missing.
  double Number(const std::string& name) const;
  const std::string& String(const std::string& name) const;
  MSGPACK_DEFINE(numbers, strings);
};

// One report of a trial: metric name to value (a Step's return).
using Metrics = std::map<std::string, double>;

// Grid keys are crossed; random keys are drawn afresh for every variant.
class SearchSpace {
 public:
  SearchSpace& Grid(std::string name, std::vector<double> values);
  SearchSpace& GridStrings(std::string name, std::vector<std::string> values);
  SearchSpace& Uniform(std::string name, double lower, double upper);
  SearchSpace& LogUniform(std::string name, double lower, double upper);
  SearchSpace& RandInt(std::string name, int64_t lower, int64_t upper);  // upper exclusive
  SearchSpace& Choice(std::string name, std::vector<std::string> values);
  // Every grid combination num_samples times (the first grid key varies fastest), random leaves
  // drawn from `seed`. Throws InvalidArgumentError for empty grids or bad bounds.
  std::vector<Config> Variants(int num_samples, uint64_t seed) const;

 private:
  struct Leaf {
    std::string name;
    enum Kind { kGrid, kGridStrings, kUniform, kLogUniform, kRandInt, kChoice } kind;
    std::vector<double> numbers;
    std::vector<std::string> strings;
  };
  std::vector<Leaf> leaves_;
};

struct SweepOptions {
  std::string name = "cpp_sweep";
  std::string storage_path;  // default $HOME/airt_results
  std::string metric;        // required with a scheduler other than FIFO
  Mode mode = Mode::kMin;
  int num_samples = 1;
  uint64_t seed = 0;
  int max_iterations = 100;  // steps per trial at most (training_iteration)
  int max_concurrent = 8;    // trials at once
  std::map<std::string, double> resources = {{"CPU", 1}};
  std::shared_ptr<TrialScheduler> scheduler;  // FIFO when null
  bool verbose = true;
  double progress_interval_s = -1;  // <0: 0.5 s on a terminal, 10 s otherwise
};

struct TrialRecord {
  std::string id;  // "00001", ...
  Config config;
  std::string status = "PENDING";  // RUNNING, TERMINATED, ERROR
  std::vector<Metrics> results;
  bool stopped_early = false;  // ended by the scheduler (kStop), not by max_iterations
  std::string error;
  std::string path;
};

struct SweepResult {
  std::vector<TrialRecord> trials;
  std::string experiment_path;
  // The trial with the best last value of the metric; nullptr when none reported it.
  const TrialRecord* Best(const std::string& metric, Mode mode) const;
};

namespace internal {

// The sweep's bookkeeping, language-free: trial states, the folder, the scheduler, the table.
// One thread (the driver's loop in Run).
class Sweep {
 public:
  Sweep(std::vector<Config> variants, const SweepOptions& options);
  // Trials to start now, given how many run.
  std::vector<size_t> Launchable(size_t running);
  const Config& ConfigOf(size_t trial) const { return result_.trials[trial].config; }
  void Started(size_t trial);
  // A report: true to ask for the next step, false when the trial ended (done, stopped by
  // the scheduler, or at max_iterations).
  bool Report(size_t trial, Metrics metrics);
  void Failed(size_t trial, const std::string& error);
  void Tick();
  SweepResult Finish();

 private:
  void End(size_t trial, const std::string& status, bool early);
  // Stopped by the scheduler before the sweep's longest run.
  bool CutShort(const TrialRecord& t) const;
  void Print(bool force);
  void SaveState();
  SweepOptions options_;
  SweepResult result_;
  std::vector<double> started_at_;
  double start_time_;
  double last_print_ = 0;
  int drawn_lines_ = 0;
  bool tty_;
};

}  // namespace internal

// Runs the sweep on the cluster the driver joined (airt::Init first): each variant a C++ actor
// made by `factory(config)` with options.resources, `step` called once per report. A step that
// throws, or an actor that dies, ends its trial in ERROR (its message in TrialRecord::error)
// while the sweep goes on.
template <typename T, typename Step>
SweepResult Run(T* (*factory)(Config), Step step, const SearchSpace& space, SweepOptions options) {
  internal::Sweep sweep(space.Variants(options.num_samples, options.seed), options);
  using Ref = ObjectRef<Metrics>;
  std::map<size_t, ActorHandle<T>> actors;
  std::map<size_t, Ref> inflight;
  while (true) {
    for (size_t i : sweep.Launchable(inflight.size())) {
      ActorHandle<T> actor =
          Actor(factory).SetResources(options.resources).Remote(sweep.ConfigOf(i));
      inflight.emplace(i, actor.Task(step).Remote());
      actors.emplace(i, std::move(actor));
      sweep.Started(i);
    }
    if (inflight.empty()) break;
    std::vector<Ref> refs;
    std::vector<size_t> order;
    for (auto& [i, ref] : inflight) {
      refs.push_back(ref);
      order.push_back(i);
    }
    WaitResult<Metrics> ready = Wait(refs, 1, 250);
    for (const Ref& r : ready.ready) {
      size_t i = 0;
      for (size_t k = 0; k < refs.size(); ++k) {
        if (refs[k].ID() == r.ID()) i = order[k];
      }
      bool next = false;
      try {
        next = sweep.Report(i, *Get(r));
      } catch (const Exception& e) {
        sweep.Failed(i, e.what());
      }
      inflight.erase(i);
      if (next) {
        inflight.emplace(i, actors.at(i).Task(step).Remote());
      } else {
        actors.at(i).Kill();
        actors.erase(i);
      }
    }
    sweep.Tick();
  }
  return sweep.Finish();
}

}  // namespace airt::tune
