// The median stopping rule, as Ray's MedianStoppingRule (hard_stop) decides.
#include <algorithm>
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
    if (stopped_.count(name)) return Decision::kStop;
    results_[name].push_back({time, Reward(*metric)});
    if (time < options_.grace_period) return Decision::kContinue;
    std::vector<double> means;
    for (const auto& [other, points] : results_) {
      if (other == name || points.back().time < time) continue;
      means.push_back(RunningMean(points, time));
    }
    if (static_cast<int>(means.size()) < options_.min_samples_required) {
      return Decision::kContinue;
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
    if (!time || !metric) return;
    auto& points = results_[std::string(trial)];
    if (points.empty() || points.back().time != *time) points.push_back({*time, Reward(*metric)});
  }

  std::string Name() const override { return "MedianStoppingRule"; }

 private:
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
};

}  // namespace

std::unique_ptr<TrialScheduler> MakeMedianStoppingRule(const MedianStoppingOptions& o) {
  if (!(o.grace_period >= 0)) {
    throw InvalidArgumentError("MedianStoppingRule: grace_period must not be negative");
  }
  if (o.min_samples_required < 1) {
    throw InvalidArgumentError("MedianStoppingRule: min_samples_required must be at least 1");
  }
  return std::make_unique<MedianStoppingRule>(o);
}

}  // namespace airt::tune
