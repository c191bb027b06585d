// The decisions of a sweep's trial schedulers: FIFO, asynchronous successive halving (ASHA),
// synchronous HyperBand and the median stopping rule, as Ray Tune's schedulers of the same names
// decide them. Pure logic: a scheduler sees the reports of trials (a time value, the value of
// the time attribute, and the metric) and answers continue, pause or stop. Both the C++ and the
// Python tuner (airt.tune, through airt._tune_core) drive these, so a sweep stops the same trials
// whichever language runs it. Not thread-safe: one tuner loop owns a scheduler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace airt::tune {

enum class Decision : uint8_t {
  kContinue,  // let the trial run on
  kPause,     // hold the trial (its next step is not asked for) until an Action resumes it
  kStop,      // end the trial: it is done, not failed
};

// Whether a lower or a higher metric is better.
enum class Mode : uint8_t { kMin, kMax };

// A decision about a trial other than the one that just reported (HyperBand resumes or stops
// the paused members of a bracket once its rung is complete): kContinue resumes a paused trial,
// kStop ends it.
struct Action {
  std::string trial;
  Decision decision;
};

// The interface every scheduler implements. Trial names are the tuner's ids; a name unknown to
// the scheduler (never added) gets kContinue.
class TrialScheduler {
 public:
  virtual ~TrialScheduler() = default;

  // A new trial, before its first report. Adding a name twice has no effect.
  virtual void OnTrialAdd(std::string_view trial) = 0;
  // A report: `time` is the trial's value of the time attribute (training_iteration by default),
  // `metric` the reported metric (nullopt when the report lacks it: kContinue). A trial told
  // kStop or kPause is not sent further results until resumed.
  virtual Decision OnTrialResult(std::string_view trial, double time,
                                 std::optional<double> metric) = 0;
  // The trial ended by itself (its function returned, or the tuner stopped it). `time`/`metric`
  // are its last report, when it had one.
  virtual void OnTrialComplete(std::string_view trial, std::optional<double> time,
                               std::optional<double> metric) = 0;

  // The trial ended in error or was removed: it no longer counts in any rung.
  virtual void OnTrialRemove(std::string_view trial) { OnTrialComplete(trial, {}, {}); }
  // The search algorithm will add no more trials: brackets waiting to fill stop waiting.
  virtual void OnSearchFinished() {}
  // Decisions about other trials taken since the last call (in order), cleared by the call.
  virtual std::vector<Action> TakeActions() { return {}; }
  // How many trials wait to run (PENDING: not started, or resumed and not yet relaunched). The
  // tuner tells before each OnTrialResult and before each TakeActions; the median rule's
  // time-slicing yields only while some wait. Schedulers that do not time-slice ignore it.
  virtual void SetWaiting(size_t /*trials*/) {}
  // "FIFOScheduler", "AsyncHyperBandScheduler", ... (Ray's class names).
  virtual std::string Name() const = 0;
};

// Runs every trial to its end: every report gets kContinue.
std::unique_ptr<TrialScheduler> MakeFifoScheduler();

struct AshaOptions {
  Mode mode = Mode::kMin;
  double max_t = 100;           // a trial whose time reaches max_t is stopped (it is done)
  double grace_period = 1;      // the first rung's milestone
  double reduction_factor = 4;  // 1/reduction_factor of the trials pass each rung
  int brackets = 1;             // bracket s has rungs at grace_period * reduction_factor^(k+s)
  bool stop_last_trials = true;
  uint64_t seed = 0;  // picks each new trial's bracket (weighted as Ray's)
};
// Asynchronous successive halving (Li et al. 2020; Ray's AsyncHyperBandScheduler): a trial
// that reaches a rung's milestone is stopped if its metric is below the rung's
// (1 - 1/reduction_factor) quantile of the trials that reached that rung before it; otherwise it
// goes on. Never pauses. Throws InvalidArgumentError for max_t <= 0, grace_period <= 0 or
// > max_t, reduction_factor <= 1, brackets < 1.
std::unique_ptr<TrialScheduler> MakeAshaScheduler(const AshaOptions& options);

struct HyperBandOptions {
  Mode mode = Mode::kMin;
  double max_t = 81;
  double reduction_factor = 3;
  bool stop_last_trials = true;
};
// Synchronous HyperBand (Li et al. 2017; Ray's HyperBandScheduler): new trials fill brackets of
// n_s trials that first run r_s time each; a trial reaching its bracket's milestone is paused
// until every live trial of the full bracket has reached it, then the best 1/reduction_factor go
// on (resumed through TakeActions) for reduction_factor times longer and the others are
// stopped. A bracket that cannot fill (OnSearchFinished) halves with the trials it has.
// Throws InvalidArgumentError for max_t < 1 or reduction_factor <= 1.
std::unique_ptr<TrialScheduler> MakeHyperBandScheduler(const HyperBandOptions& options);

struct MedianStoppingOptions {
  Mode mode = Mode::kMin;
  double grace_period = 60;      // in the time attribute's units (time_total_s by default)
  int min_samples_required = 3;  // other trials that have reached this time
  // Ray's time-slicing: a trial past the grace period that cannot be judged (fewer than
  // min_samples_required others reached its time) while other trials wait (SetWaiting) yields
  // (kPause) when it ran more than min_time_slice time-attribute units since it last yielded;
  // it is resumed (a kContinue Action) once no trial waits, so the waiting ones run first.
  double min_time_slice = 0;
};
// Ray's MedianStoppingRule (hard_stop): a trial past the grace period whose best result so far is
// worse than the median of the other trials' running means up to the same time is stopped; one
// that cannot be judged yet time-slices with the waiting trials (min_time_slice above).
// Throws InvalidArgumentError for a negative grace period or min_time_slice, or
// min_samples_required < 1.
std::unique_ptr<TrialScheduler> MakeMedianStoppingRule(const MedianStoppingOptions& options);

}  // namespace airt::tune
