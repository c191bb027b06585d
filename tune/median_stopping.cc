// The median stopping rule, as Ray's MedianStoppingRule (hard_stop) decides.
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "airt/exceptions.h"
#include "airt/tune/schedulers.h"
#include "tune/quantile.h"

namespace airt::tune {
namespace {

class MedianStoppingRule final : public TrialScheduler {
 public:
  explicit MedianStoppingRule(const MedianStoppingOptions& o) : options_(o) {}

  void OnTrialAdd(std::string_view) override {}

  Decision OnTrialResult(std::string_view trial, double time,
                         std::optional<double> metric) override {
    if (!metric) return Decision::kContinue;
    std::string name(trial);
    Forget(name);  // reporting: it runs (a yielded trial resumed)
    if (stopped_.count(name)) return Decision::kStop;
    results_[name].push_back({time, Reward(*metric)});
    if (time < options_.grace_period) return Decision::kContinue;
    std::vector<double> means;
    for (const auto& [other, points] : results_) {
      if (other == name || points.back().time < time) continue;
      means.push_back(RunningMean(points, time));
    }
    if (static_cast<int>(means.size()) < options_.min_samples_required) {
      return OnInsufficientSamples(name, time);
    }
    double median = *NanPercentile(means, 50);
    const auto& mine = results_[name];
    double best = std::max_element(mine.begin(), mine.end(), [](const auto& a, const auto& b) {
                    return a.reward < b.reward;
                  })->reward;
    if (best < median) {
      stopped_.insert(name);
      return Decision::kStop;
    }
    return Decision::kContinue;
  }

  void OnTrialComplete(std::string_view trial, std::optional<double> time,
                       std::optional<double> metric) override {
    Forget(std::string(trial));
    if (!time || !metric) return;
    auto& points = results_[std::string(trial)];
    if (points.empty() || points.back().time != *time) points.push_back({*time, Reward(*metric)});
  }

  void OnTrialRemove(std::string_view trial) override { Forget(std::string(trial)); }

  void SetWaiting(size_t trials) override { waiting_ = trials; }

  // The yielded trials go on once no trial waits for a slot (they wait behind those).
  std::vector<Action> TakeActions() override {
    std::vector<Action> out;
    if (waiting_ > 0) return out;
    for (const std::string& t : yielded_) out.push_back({t, Decision::kContinue});
    yielded_.clear();
    return out;
  }

  std::string Name() const override { return "MedianStoppingRule"; }

 private:
  // Ray's _on_insufficient_samples: yield to the waiting trials after min_time_slice.
  Decision OnInsufficientSamples(const std::string& trial, double time) {
    auto last = last_pause_.find(trial);
    double since = last == last_pause_.end() ? std::numeric_limits<double>::infinity()
                                             : time - last->second;
    if (waiting_ == 0 || !(since > options_.min_time_slice)) return Decision::kContinue;
    last_pause_[trial] = time;
    if (std::find(yielded_.begin(), yielded_.end(), trial) == yielded_.end()) {
      yielded_.push_back(trial);
    }
    return Decision::kPause;
  }
  void Forget(const std::string& trial) { std::erase(yielded_, trial); }

  struct Point {
    double time;
    double reward;
  };
  double Reward(double metric) const { return options_.mode == Mode::kMax ? metric : -metric; }
  static double RunningMean(const std::vector<Point>& points, double time) {
    double sum = 0;
    int count = 0;
    for (const Point& p : points) {
      if (p.time <= time) {
        sum += p.reward;
        ++count;
      }
    }
    return count ? sum / count : 0;
  }

  MedianStoppingOptions options_;
  std::map<std::string, std::vector<Point>> results_;
  std::set<std::string> stopped_;
  std::map<std::string, double> last_pause_;  // the time each trial last yielded at
  std::vector<std::string> yielded_;          // paused to time-slice, in pause order
  size_t waiting_ = 0;
};

}  // namespace

std::unique_ptr<TrialScheduler> MakeMedianStoppingRule(const MedianStoppingOptions& o) {
  if (!(o.grace_period >= 0)) {
    throw InvalidArgumentError("MedianStoppingRule: grace_period must not be negative");
  }
  if (!(o.min_time_slice >= 0)) {
    throw InvalidArgumentError("MedianStoppingRule: min_time_slice must not be negative");
  }
  if (o.min_samples_required < 1) {
    throw InvalidArgumentError("MedianStoppingRule: min_samples_required must be at least 1");
  }
  return std::make_unique<MedianStoppingRule>(o);
}

}  // namespace airt::tune
