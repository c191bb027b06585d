// Synchronous HyperBand, as Ray's HyperBandScheduler decides.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "airt/exceptions.h"
#include "airt/tune/schedulers.h"

namespace airt::tune {
namespace {

struct Progress {
  std::optional<double> time;  // nullopt: no report yet
  std::optional<double> reward;
};

// One bracket of a band: n trials that run r time, then the best ceil(n/eta) run eta times
// longer, `halves` times.
class Bracket {
 public:
  Bracket(int max_trials, double r0, double max_t, double eta, int s, bool stop_last_trials)
      : max_trials_(max_trials),
        n_(max_trials),
        r_(r0),
        cumul_r_(r0),
        max_t_(max_t),
        eta_(eta),
        halves_(s),
        stop_last_trials_(stop_last_trials) {}

  bool filled() const { return added_ >= max_trials_; }
  void Add(const std::string& trial) {
    live_[trial] = Progress{};
    ++added_;
  }
  void Update(const std::string& trial, double time, std::optional<double> reward) {
    live_[trial] = Progress{time, reward};
  }
  void Cleanup(const std::string& trial) { live_.erase(trial); }
  bool Has(const std::string& trial) const { return live_.count(trial) > 0; }

  // Whether the trial is still short of this round's milestone.
  bool ContinueTrial(const std::string& trial) const {
    if (!stop_last_trials_ && halves_ == 0) return true;
    const Progress& p = live_.at(trial);
    return p.time.value_or(0) < cumul_r_;
  }
  bool CurIterDone() const {
    if (live_.empty()) return false;
    for (const auto& [name, p] : live_) {
      if (p.time.value_or(0) < cumul_r_) return false;
    }
    return true;
  }
  bool Finished() const { return stop_last_trials_ && halves_ == 0 && CurIterDone(); }

  // Keeps the best ceil(n/eta) live trials for eta times longer: (good, bad).
  std::pair<std::vector<std::string>, std::vector<std::string>> SuccessiveHalving() {
    std::vector<std::string> sorted;
    for (const auto& [name, p] : live_) sorted.push_back(name);
    if (halves_ == 0 && !stop_last_trials_) return {sorted, {}};
    --halves_;
    n_ = static_cast<int>(std::ceil(n_ / eta_));
    r_ = std::floor(std::min(r_ * eta_, max_t_));
    cumul_r_ = r_;
    auto reward = [&](const std::string& t) {
      return live_.at(t).reward.value_or(-std::numeric_limits<double>::infinity());
    };
    std::stable_sort(sorted.begin(), sorted.end(),
                     [&](const auto& a, const auto& b) { return reward(a) < reward(b); });
    size_t keep = std::min(sorted.size(), static_cast<size_t>(n_));
    std::vector<std::string> bad(sorted.begin(), sorted.end() - keep);
    std::vector<std::string> good(sorted.end() - keep, sorted.end());
    return {good, bad};
  }
  std::vector<std::string> LiveTrials() const {
    std::vector<std::string> out;
    for (const auto& [name, p] : live_) out.push_back(name);
    return out;
  }

 private:
  int max_trials_;
  int added_ = 0;
  int n_;
  double r_;
  double cumul_r_;
  double max_t_;
  double eta_;
  int halves_;
  bool stop_last_trials_;
  std::map<std::string, Progress> live_;
};

class HyperBandScheduler final : public TrialScheduler {
 public:
  explicit HyperBandScheduler(const HyperBandOptions& o)
      : options_(o),
        s_max_1_(static_cast<int>(std::round(std::log(o.max_t) / std::log(o.reduction_factor))) +
                 1) {}

  void OnTrialAdd(std::string_view trial) override {
    std::string name(trial);
    if (trial_bracket_.count(name)) return;
    if (current_ < 0 || brackets_[current_].filled()) {
      while (true) {
        if (band_size_ >= s_max_1_) band_size_ = 0;  // the band is full: a new band
        int s = band_size_++;
        if (R0(s) == 0) continue;  // too small a bracket: Ray retries with the next s
        brackets_.emplace_back(N0(s), R0(s), options_.max_t, options_.reduction_factor, s,
                               options_.stop_last_trials);
        current_ = static_cast<int>(brackets_.size()) - 1;
        break;
      }
    }
    brackets_[current_].Add(name);
    trial_bracket_[name] = current_;
  }

  Decision OnTrialResult(std::string_view trial, double time,
                         std::optional<double> metric) override {
    auto it = trial_bracket_.find(std::string(trial));
    if (it == trial_bracket_.end()) return Decision::kContinue;
    Bracket& bracket = brackets_[it->second];
    if (!bracket.Has(it->first)) return Decision::kStop;
    bracket.Update(it->first, time, Reward(metric));
    if (bracket.ContinueTrial(it->first)) return Decision::kContinue;
    return Process(bracket, it->first);
  }

  void OnTrialComplete(std::string_view trial, std::optional<double>,
                       std::optional<double>) override {
    auto it = trial_bracket_.find(std::string(trial));
    if (it == trial_bracket_.end()) return;
    Bracket& bracket = brackets_[it->second];
    bracket.Cleanup(it->first);
    trial_bracket_.erase(it);
    Process(bracket, "");  // the ended trial may have been the last one short of the milestone
  }

  std::vector<Action> TakeActions() override { return std::exchange(actions_, {}); }
  std::string Name() const override { return "HyperBandScheduler"; }

 private:
  int N0(int s) const {
    return static_cast<int>(std::ceil(static_cast<double>(s_max_1_) / (s + 1) *
                                      std::pow(options_.reduction_factor, s)));
  }
  double R0(int s) const {
    return std::floor(options_.max_t * std::pow(options_.reduction_factor, -s) + 1e-9);
  }
  std::optional<double> Reward(std::optional<double> metric) const {
    if (!metric) return std::nullopt;
    return options_.mode == Mode::kMax ? *metric : -*metric;
  }

  // The decision for `current` (a trial at its milestone; "" for none) once the bracket may
  // have completed its round; decisions about the bracket's other (paused) trials go to
  // actions_.
  Decision Process(Bracket& bracket, const std::string& current) {
    Decision action = Decision::kPause;
    if (!bracket.CurIterDone()) return action;
    if (bracket.Finished()) {
      for (const std::string& t : bracket.LiveTrials()) {
        bracket.Cleanup(t);
        if (t != current) actions_.push_back({t, Decision::kStop});
      }
      return Decision::kStop;
    }
    auto [good, bad] = bracket.SuccessiveHalving();
    for (const std::string& t : bad) {
      bracket.Cleanup(t);
      if (t == current) {
        action = Decision::kStop;
      } else {
        actions_.push_back({t, Decision::kStop});
      }
    }
    for (const std::string& t : good) {
      if (!bracket.ContinueTrial(t)) continue;
      if (t == current) {
        action = Decision::kContinue;
      } else {
        actions_.push_back({t, Decision::kContinue});
      }
    }
    return action;
  }

  HyperBandOptions options_;
  int s_max_1_;
  std::vector<Bracket> brackets_;
  int current_ = -1;   // the bracket new trials fill
  int band_size_ = 0;  // brackets made in the current band
  std::map<std::string, size_t> trial_bracket_;
  std::vector<Action> actions_;
};

}  // namespace

std::unique_ptr<TrialScheduler> MakeHyperBandScheduler(const HyperBandOptions& o) {
  if (!(o.max_t >= 1)) throw InvalidArgumentError("HyperBandScheduler: max_t must be at least 1");
  if (!(o.reduction_factor > 1)) {
    throw InvalidArgumentError("HyperBandScheduler: reduction_factor must be greater than 1");
  }
  return std::make_unique<HyperBandScheduler>(o);
}

}  // namespace airt::tune
