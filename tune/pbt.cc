// Population Based Training's decisions (asynchronous, as Ray's PopulationBasedTraining).
#include "airt/tune/pbt.h"

#include <algorithm>
#include <cmath>

#include "airt/exceptions.h"

namespace airt::tune {

PopulationBasedTraining::PopulationBasedTraining(PbtOptions o)
    : options_(std::move(o)), random_(options_.seed) {
  const Mutations& m = options_.mutations;
  if (m.number_choices.empty() && m.string_choices.empty() && m.number_ranges.empty()) {
    throw InvalidArgumentError("PopulationBasedTraining needs mutations");
  }
  if (!(options_.quantile_fraction >= 0 && options_.quantile_fraction <= 0.5)) {
    throw InvalidArgumentError("PopulationBasedTraining: quantile_fraction must be in [0, 0.5]");
  }
  if (!(options_.perturbation_interval > 0)) {
    throw InvalidArgumentError("PopulationBasedTraining: perturbation_interval must be positive");
  }
  if (!(options_.resample_probability >= 0 && options_.resample_probability <= 1)) {
    throw InvalidArgumentError("PopulationBasedTraining: resample_probability must be in [0, 1]");
  }
  if (options_.perturbation_factors.empty()) {
    throw InvalidArgumentError("PopulationBasedTraining needs perturbation_factors");
  }
  for (const auto& [k, v] : m.number_choices) {
    if (v.empty()) throw InvalidArgumentError("PopulationBasedTraining: empty list for " + k);
  }
  for (const auto& [k, v] : m.string_choices) {
    if (v.empty()) throw InvalidArgumentError("PopulationBasedTraining: empty list for " + k);
  }
  for (const auto& [k, r] : m.number_ranges) {
    if (!(r.first < r.second)) {
      throw InvalidArgumentError("PopulationBasedTraining: bad range for " + k);
    }
  }
}

void PopulationBasedTraining::OnTrialAdd(std::string_view trial) {
  members_.try_emplace(std::string(trial));
}

void PopulationBasedTraining::SetConfig(std::string_view trial, const Config& config) {
  members_[std::string(trial)].config = config;
}

void PopulationBasedTraining::SetCheckpointed(std::string_view trial) {
  auto it = members_.find(std::string(trial));
  if (it != members_.end()) it->second.checkpointed = true;
}

Decision PopulationBasedTraining::OnTrialResult(std::string_view trial, double time,
                                                std::optional<double> metric) {
  auto me = members_.find(std::string(trial));
  if (me == members_.end() || !metric || std::isnan(*metric)) return Decision::kContinue;
  me->second.score = options_.mode == Mode::kMax ? *metric : -*metric;
  if (time < options_.burn_in_period) return Decision::kContinue;
  if (time - me->second.last_perturbation < options_.perturbation_interval) {
    return Decision::kContinue;
  }
  me->second.last_perturbation = time;
  // The quantiles of the live trials' latest scores, as Ray's _quantiles.
  std::vector<std::string> scored;
  for (const auto& [name, m] : members_) {
    if (m.score) scored.push_back(name);
  }
  if (scored.size() <= 1) return Decision::kContinue;
  std::stable_sort(scored.begin(), scored.end(), [&](const auto& a, const auto& b) {
    return *members_[a].score < *members_[b].score;
  });
  size_t n = static_cast<size_t>(std::ceil(scored.size() * options_.quantile_fraction));
  n = std::min(n, scored.size() / 2);
  if (n == 0) return Decision::kContinue;
  bool lower = std::find(scored.begin(), scored.begin() + n, me->first) != scored.begin() + n;
  if (!lower) return Decision::kContinue;
  std::vector<std::string> donors;
  for (auto it = scored.end() - n; it != scored.end(); ++it) {
    if (members_[*it].checkpointed) donors.push_back(*it);
  }
  if (donors.empty()) return Decision::kContinue;
  const std::string& donor =
      donors[std::uniform_int_distribution<size_t>(0, donors.size() - 1)(random_)];
  Config config = Explore(members_[donor].config);
  me->second.config = config;
  exploits_.push_back({me->first, donor, std::move(config)});
  ++num_perturbations_;
  return Decision::kContinue;
}

void PopulationBasedTraining::OnTrialComplete(std::string_view trial, std::optional<double>,
                                              std::optional<double>) {
  members_.erase(std::string(trial));
}

Config PopulationBasedTraining::Explore(const Config& config) {
  Config out = config;
  std::uniform_real_distribution<double> unit(0, 1);
  auto resample = [&] { return unit(random_) < options_.resample_probability; };
  // A value absent from the config (`known` false) or from the list is drawn from the list.
  auto shift = [&](const auto& list, bool known, auto* slot) {
    auto it = known ? std::find(list.begin(), list.end(), *slot) : list.end();
    if (it == list.end() || resample()) {
      *slot = list[std::uniform_int_distribution<size_t>(0, list.size() - 1)(random_)];
      return;
    }
    long i = (it - list.begin()) + (unit(random_) < 0.5 ? -1 : 1);
    i = std::clamp(i, 0L, static_cast<long>(list.size()) - 1);
    *slot = list[static_cast<size_t>(i)];
  };
  for (const auto& [key, list] : options_.mutations.number_choices) {
    bool known = out.numbers.count(key) > 0;
    shift(list, known, &out.numbers[key]);
  }
  for (const auto& [key, list] : options_.mutations.string_choices) {
    bool known = out.strings.count(key) > 0;
    shift(list, known, &out.strings[key]);
  }
  for (const auto& [key, range] : options_.mutations.number_ranges) {
    auto it = out.numbers.find(key);
    if (it == out.numbers.end() || resample()) {
      out.numbers[key] = std::uniform_real_distribution<double>(range.first, range.second)(random_);
    } else {
      const auto& f = options_.perturbation_factors;
      it->second *= f[std::uniform_int_distribution<size_t>(0, f.size() - 1)(random_)];
    }
  }
  return out;
}

}  // namespace airt::tune
