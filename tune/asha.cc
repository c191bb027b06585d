// Asynchronous successive halving, as Ray's AsyncHyperBandScheduler decides.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "airt/exceptions.h"
#include "airt/tune/schedulers.h"
#include "tune/quantile.h"

namespace airt::tune {

std::optional<double> NanPercentile(std::vector<double> values, double q) {
  std::erase_if(values, [](double v) { return std::isnan(v); });
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = static_cast<size_t>(std::ceil(rank));
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

namespace {

// One bracket: rungs with descending milestones, each recording the reward (higher is better)
// of every trial that reached it.
class Bracket {
 public:
  Bracket(double min_t, double max_t, double rf, int s, bool stop_last_trials)
      : rf_(rf), stop_last_trials_(stop_last_trials) {
    int max_rungs = static_cast<int>(std::log(max_t / min_t) / std::log(rf) + 1e-9 - s + 1);
    for (int k = max_rungs - 1; k >= 0; --k) {
      rungs_.push_back({min_t * std::pow(rf, k + s), {}});
    }
  }

  size_t rung_count() const { return rungs_.size(); }

  Decision OnResult(const std::string& trial, double time, double reward) {
    Decision action = Decision::kContinue;
    for (Rung& rung : rungs_) {
      bool recorded = rung.recorded.count(trial) > 0;
      if (time >= rung.milestone && recorded && !stop_last_trials_) break;
      if (time < rung.milestone || recorded) continue;
      std::vector<double> rewards;
      for (const auto& [name, value] : rung.recorded) rewards.push_back(value);
      std::optional<double> cutoff = NanPercentile(rewards, (1 - 1 / rf_) * 100);
      if (cutoff && reward < *cutoff) action = Decision::kStop;
      if (!std::isnan(reward)) rung.recorded[trial] = reward;
      break;
    }
    return action;
  }

 private:
  struct Rung {
    double milestone;
    std::map<std::string, double> recorded;
  };
  double rf_;
  bool stop_last_trials_;
  std::vector<Rung> rungs_;
};

class AshaScheduler final : public TrialScheduler {
 public:
  explicit AshaScheduler(const AshaOptions& o) : options_(o), random_(o.seed) {
    for (int s = 0; s < o.brackets; ++s) {
      brackets_.emplace_back(o.grace_period, o.max_t, o.reduction_factor, s, o.stop_last_trials);
    }
  }

  void OnTrialAdd(std::string_view trial) override {
    std::string name(trial);
    if (trial_bracket_.count(name)) return;
    // Ray's weighting: a bracket with more rungs is likelier, by e^(rungs - max rungs).
    size_t most = 0;
    for (const Bracket& b : brackets_) most = std::max(most, b.rung_count());
    std::vector<double> weights;
    for (const Bracket& b : brackets_) {
      weights.push_back(std::exp(static_cast<double>(b.rung_count()) - static_cast<double>(most)));
    }
    std::discrete_distribution<size_t> pick(weights.begin(), weights.end());
    trial_bracket_[name] = pick(random_);
  }

  Decision OnTrialResult(std::string_view trial, double time,
                         std::optional<double> metric) override {
    auto it = trial_bracket_.find(std::string(trial));
    if (it == trial_bracket_.end() || !metric) return Decision::kContinue;
    if (time >= options_.max_t && options_.stop_last_trials) return Decision::kStop;
    return brackets_[it->second].OnResult(it->first, time, Reward(*metric));
  }

  void OnTrialComplete(std::string_view trial, std::optional<double> time,
                       std::optional<double> metric) override {
    auto it = trial_bracket_.find(std::string(trial));
    if (it == trial_bracket_.end()) return;
    if (time && metric) brackets_[it->second].OnResult(it->first, *time, Reward(*metric));
    trial_bracket_.erase(it);
  }

  std::string Name() const override { return "AsyncHyperBandScheduler"; }

 private:
  double Reward(double metric) const { return options_.mode == Mode::kMax ? metric : -metric; }

  AshaOptions options_;
  std::mt19937_64 random_;
  std::vector<Bracket> brackets_;
  std::map<std::string, size_t> trial_bracket_;
};

}  // namespace

std::unique_ptr<TrialScheduler> MakeAshaScheduler(const AshaOptions& o) {
  if (!(o.max_t > 0)) throw InvalidArgumentError("ASHAScheduler: max_t must be positive");
  if (!(o.grace_period > 0) || o.grace_period > o.max_t) {
    throw InvalidArgumentError("ASHAScheduler: grace_period must be in (0, max_t]");
  }
  if (!(o.reduction_factor > 1)) {
    throw InvalidArgumentError("ASHAScheduler: reduction_factor must be greater than 1");
  }
  if (o.brackets < 1) throw InvalidArgumentError("ASHAScheduler: brackets must be at least 1");
  return std::make_unique<AshaScheduler>(o);
}

}  // namespace airt::tune
