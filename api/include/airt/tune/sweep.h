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
//
// Checkpoints, retries and restore: a trainable that also has `std::string Save()` (its state
// as bytes) and `void Load(std::string)`, registered with them
// (AIRT_REMOTE(Model::Create, &Model::Step, &Model::Save, &Model::Load)), runs with
// Run(Model::Create, &Model::Step, &Model::Save, &Model::Load, space, o): every
// o.checkpoint_frequency steps its state goes to <trial>/checkpoint_NNNNNN/state.bin; a trial
// whose step throws or whose actor dies is retried o.max_failures times on a new actor loaded
// from its latest checkpoint (from the start without one); o.resume continues the experiment
// folder of an interrupted sweep.
//
// Schedulers that pause (HyperBand, the median rule's time-slicing) free a paused trial's actor
// after a checkpoint (Save) and resume it later on a new actor from that checkpoint; PBT
// (airt/tune/pbt.h) restarts an exploited trial with its new config from a copy of its donor's
// checkpoint. options.callbacks see every trial's start, results and end, as Ray's Callback.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
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

struct TrialRecord;
struct SweepResult;
class PopulationBasedTraining;

// Hooks on the sweep's loop (Ray's tune.Callback), called on the driver's thread: `trial` is
// the trial's record at the time (its results so far, its status).
class Callback {
 public:
  virtual ~Callback() = default;
  // A trial's actor was created (at its first start, and again after a retry, resume or exploit).
  virtual void OnTrialStart(const TrialRecord& /*trial*/) {}
  // A report, after it was written to the trial's folder and before the scheduler decides.
  virtual void OnTrialResult(const TrialRecord& /*trial*/, const Metrics& /*result*/) {}
  // The trial ended TERMINATED (at max_iterations, or stopped by its scheduler).
  virtual void OnTrialComplete(const TrialRecord& /*trial*/) {}
  // The trial ended in ERROR (its failures exceeded max_failures; TrialRecord::error says why).
  virtual void OnTrialError(const TrialRecord& /*trial*/) {}
  // Run is about to return.
  virtual void OnExperimentEnd(const SweepResult& /*result*/) {}
};

// Which checkpoints a trial keeps (Ray's CheckpointConfig).
struct CheckpointConfig {
  // The newest this many checkpoint_NNNNNN folders of each trial are kept, older ones deleted as
  // new ones are written (nullopt: all are kept). Must be at least 1: the latest is never deleted.
  std::optional<int> num_to_keep;
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
  // Retries of a trial whose step threw or whose actor died (-1: without limit), each on a new
  // actor from the trial's latest checkpoint (from the start without one); then ERROR.
  int max_failures = 0;
  // With Save/Load: a checkpoint after every this many steps (0: none; a trial paused by its
  // scheduler is checkpointed all the same).
  int checkpoint_frequency = 0;
  CheckpointConfig checkpoint_config;
  std::vector<std::shared_ptr<Callback>> callbacks;
  // Continue the experiment at storage_path/name (Ray's Tuner.restore): its finished trials are
  // kept, the others resume from their latest checkpoints (from the start without one), their
  // results after it dropped; the scheduler is rebuilt by replaying the kept results, trial by
  // trial. The search space must be the interrupted sweep's (checked by the number of trials);
  // a folder without experiment_state.json starts afresh.
  bool resume = false;
  // At the end, `<metric>.png` in the experiment folder: the metric over iterations for every
  // trial, drawn by the Python package's plot (`python -m airt.tune.progress`, run with
  // $AIRT_PYTHON, else python3; it needs airt and matplotlib). Without them the sweep says why
  // and goes on.
  bool plot = true;
};

struct TrialRecord {
  std::string id;  // "00001", ...
  Config config;
  std::string status = "PENDING";  // RUNNING, PAUSED, TERMINATED, ERROR
  std::vector<Metrics> results;
  bool stopped_early = false;  // ended by the scheduler (kStop), not by max_iterations
  std::string error;
  std::string path;
  int num_failures = 0;
  std::string checkpoint;           // the latest checkpoint's folder; empty without one
  size_t checkpoint_iteration = 0;  // how many results it holds
  int num_pauses = 0;               // times its scheduler paused it
  int num_exploits = 0;             // times PBT restarted it from another trial's checkpoint
};

struct SweepResult {
  std::vector<TrialRecord> trials;
  std::string experiment_path;
  std::string plot_path;  // the PNG written at the end; empty when none was
  std::string no_plot;    // why none was (SweepOptions::plot and a metric set)
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
  // A report: true to ask for the next step, false when the trial's actor is done with: the
  // trial ended (done, stopped by the scheduler, or at max_iterations), was paused (Status
  // "PAUSED": checkpoint it, then free the actor), or was exploited by PBT ("PENDING": it
  // relaunches with its new config). A trial no longer RUNNING (stopped by a scheduler's action
  // while its step ran) has the result dropped.
  bool Report(size_t trial, Metrics metrics);
  const std::string& Status(size_t trial) const { return result_.trials[trial].status; }
  // Nothing runs and nothing can launch: paused trials whose bracket cannot complete are let
  // run on (as the Python tuner does). False when there is nothing left to run.
  bool Wake();
  // Whether the trial should be checkpointed now (after a report that asked for the next step).
  bool WantsCheckpoint(size_t trial) const;
  // The trial's state after its latest report, written to its checkpoint_NNNNNN/state.bin.
  void Checkpointed(size_t trial, const std::string& state);
  // The state a relaunched trial loads (its latest checkpoint's), none at a fresh start.
  std::optional<std::string> CheckpointOf(size_t trial) const;
  // A step threw or the actor died: true when the trial is retried (PENDING again, its results
  // after its checkpoint dropped), false when it ended in ERROR.
  bool Failed(size_t trial, const std::string& error);
  void Tick();
  SweepResult Finish();

 private:
  void End(size_t trial, const std::string& status, bool early);
  // Applies the scheduler's decisions about other trials (resume, stop) until there are none.
  void ApplyActions();
  void Unpause(size_t trial);  // a PAUSED trial: back in the queue from its latest checkpoint
  void Queue(size_t trial);    // PENDING, behind the trials already waiting
  size_t Waiting() const;
  void ApplyExploit(size_t trial);
  void PruneCheckpoints(const TrialRecord& t) const;
  void WriteResult(const TrialRecord& t, const Metrics& metrics, bool header) const;
  void Rewind(TrialRecord& t);
  void Resume();
  // Stopped by the scheduler before the sweep's longest run.
  bool CutShort(const TrialRecord& t) const;
  void Print(bool force);
  void SaveState();
  SweepOptions options_;
  SweepResult result_;
  std::vector<double> started_at_;
  std::vector<double> time_base_;  // time_total_s of the results a resumed run goes on from
  std::vector<uint64_t> queued_;   // when each PENDING trial was queued: launched in this order
  uint64_t next_queue_ = 0;
  PopulationBasedTraining* pbt_ = nullptr;  // options_.scheduler when it is PBT
  double start_time_;
  double last_print_ = 0;
  int drawn_lines_ = 0;
  bool tty_;
};

// The loop of Run; save and load are nullptr for a trainable without checkpoints.
template <typename T, typename Step, typename Save, typename Load>
SweepResult RunSweep(T* (*factory)(Config), Step step, Save save, Load load,
                     const SearchSpace& space, const SweepOptions& options) {
  constexpr bool kCheckpoints = !std::is_null_pointer_v<Save>;
  Sweep sweep(space.Variants(options.num_samples, options.seed), options);
  using Ref = ObjectRef<Metrics>;
  std::map<size_t, ActorHandle<T>> actors;
  std::map<size_t, Ref> inflight;
  // A Save or Load sent before the step in flight: an actor runs its calls in order, so it is
  // done when that step's result is.
  std::map<size_t, ObjectRef<std::string>> saves;
  std::map<size_t, ObjectRef<void>> loads;
  while (true) {
    for (size_t i : sweep.Launchable(inflight.size())) {
      ActorHandle<T> actor =
          Actor(factory).SetResources(options.resources).Remote(sweep.ConfigOf(i));
      if constexpr (kCheckpoints) {
        if (std::optional<std::string> state = sweep.CheckpointOf(i)) {
          loads.insert_or_assign(i, actor.Task(load).Remote(*state));
        }
      }
      inflight.emplace(i, actor.Task(step).Remote());
      actors.emplace(i, std::move(actor));
      sweep.Started(i);
    }
    if (inflight.empty()) {
      if (sweep.Wake()) continue;
      break;
    }
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
        if (auto l = loads.find(i); l != loads.end()) {
          ObjectRef<void> loaded = l->second;
          loads.erase(l);
          Get(loaded);
        }
        if (auto s = saves.find(i); s != saves.end()) {
          ObjectRef<std::string> saved = s->second;
          saves.erase(s);
          sweep.Checkpointed(i, *Get(saved));
        }
        next = sweep.Report(i, *Get(r));
      } catch (const Exception& e) {
        loads.erase(i);
        saves.erase(i);
        sweep.Failed(i, e.what());
      }
      inflight.erase(i);
      if (next) {
        if constexpr (kCheckpoints) {
          if (sweep.WantsCheckpoint(i)) saves.insert_or_assign(i, actors.at(i).Task(save).Remote());
        }
        inflight.emplace(i, actors.at(i).Task(step).Remote());
        continue;
      }
      if constexpr (kCheckpoints) {
        if (sweep.Status(i) == "PAUSED") {  // resumed later, on a new actor, from this state
          try {
            sweep.Checkpointed(i, *Get(actors.at(i).Task(save).Remote()));
          } catch (const Exception&) {
            // the actor died while pausing: the trial resumes from its checkpoint before
          }
        }
      }
      actors.at(i).Kill();
      actors.erase(i);
    }
    sweep.Tick();
  }
  SweepResult result = sweep.Finish();
  for (const auto& callback : options.callbacks) callback->OnExperimentEnd(result);
  return result;
}

}  // namespace internal

// Runs the sweep on the cluster the driver joined (airt::Init first): each variant a C++ actor
// made by `factory(config)` with options.resources, `step` called once per report. A step that
// throws, or an actor that dies, is retried per options.max_failures (from the start: this
// trainable has no checkpoints), then ends its trial in ERROR (its message in
// TrialRecord::error) while the sweep goes on.
template <typename T, typename Step>
SweepResult Run(T* (*factory)(Config), Step step, const SearchSpace& space,
                const SweepOptions& options) {
  return internal::RunSweep(factory, step, nullptr, nullptr, space, options);
}

// As above, with checkpoints: `save` (std::string T::Save()) after every
// options.checkpoint_frequency steps, `load` (void T::Load(std::string)) on a new actor before
// its first step when the trial resumes (a retry, or options.resume).
template <typename T, typename Step, typename Save, typename Load>
SweepResult Run(T* (*factory)(Config), Step step, Save save, Load load, const SearchSpace& space,
                const SweepOptions& options) {
  return internal::RunSweep(factory, step, save, load, space, options);
}

}  // namespace airt::tune
