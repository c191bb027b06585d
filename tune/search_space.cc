// The C++ sweep's search space: grid keys crossed, random keys drawn per variant.
#include <cmath>
#include <random>

#include "airt/exceptions.h"
#include "airt/tune/sweep.h"

namespace airt::tune {

double Config::Number(const std::string& name) const {
  auto it = numbers.find(name);
  if (it == numbers.end()) throw InvalidArgumentError("tune config has no number '" + name + "'");
  return it->second;
}

const std::string& Config::String(const std::string& name) const {
  auto it = strings.find(name);
  if (it == strings.end()) throw InvalidArgumentError("tune config has no string '" + name + "'");
  return it->second;
}

SearchSpace& SearchSpace::Grid(std::string name, std::vector<double> values) {
  if (values.empty()) throw InvalidArgumentError("grid '" + name + "' has no values");
  leaves_.push_back({std::move(name), Leaf::kGrid, std::move(values), {}});
  return *this;
}

SearchSpace& SearchSpace::GridStrings(std::string name, std::vector<std::string> values) {
  if (values.empty()) throw InvalidArgumentError("grid '" + name + "' has no values");
  leaves_.push_back({std::move(name), Leaf::kGridStrings, {}, std::move(values)});
  return *this;
}

SearchSpace& SearchSpace::Uniform(std::string name, double lower, double upper) {
  if (!(lower < upper)) throw InvalidArgumentError("uniform '" + name + "': lower >= upper");
  leaves_.push_back({std::move(name), Leaf::kUniform, {lower, upper}, {}});
  return *this;
}

SearchSpace& SearchSpace::LogUniform(std::string name, double lower, double upper) {
  if (!(lower > 0 && lower < upper)) {
    throw InvalidArgumentError("loguniform '" + name + "' needs 0 < lower < upper");
  }
  leaves_.push_back({std::move(name), Leaf::kLogUniform, {lower, upper}, {}});
  return *this;
}

SearchSpace& SearchSpace::RandInt(std::string name, int64_t lower, int64_t upper) {
  if (!(lower < upper)) throw InvalidArgumentError("randint '" + name + "': lower >= upper");
  leaves_.push_back({std::move(name),
                     Leaf::kRandInt,
                     {static_cast<double>(lower), static_cast<double>(upper)},
                     {}});
  return *this;
}

SearchSpace& SearchSpace::Choice(std::string name, std::vector<std::string> values) {
  if (values.empty()) throw InvalidArgumentError("choice '" + name + "' has no values");
  leaves_.push_back({std::move(name), Leaf::kChoice, {}, std::move(values)});
  return *this;
}

std::vector<Config> SearchSpace::Variants(int num_samples, uint64_t seed) const {
  if (num_samples < 1) throw InvalidArgumentError("num_samples must be at least 1");
  std::mt19937_64 random(seed);
  std::vector<const Leaf*> grids;
  for (const Leaf& l : leaves_) {
    if (l.kind == Leaf::kGrid || l.kind == Leaf::kGridStrings) grids.push_back(&l);
  }
  std::vector<Config> out;
  for (int sample = 0; sample < num_samples; ++sample) {
    std::vector<size_t> index(grids.size(), 0);
    while (true) {
      Config c;
      for (size_t g = 0; g < grids.size(); ++g) {
        if (grids[g]->kind == Leaf::kGrid) {
          c.numbers[grids[g]->name] = grids[g]->numbers[index[g]];
        } else {
          c.strings[grids[g]->name] = grids[g]->strings[index[g]];
        }
      }
      for (const Leaf& l : leaves_) {
        if (l.kind == Leaf::kUniform) {
          c.numbers[l.name] =
              std::uniform_real_distribution<double>(l.numbers[0], l.numbers[1])(random);
        } else if (l.kind == Leaf::kLogUniform) {
          double v = std::uniform_real_distribution<double>(std::log(l.numbers[0]),
                                                            std::log(l.numbers[1]))(random);
          c.numbers[l.name] = std::exp(v);
        } else if (l.kind == Leaf::kRandInt) {
          c.numbers[l.name] = static_cast<double>(std::uniform_int_distribution<int64_t>(
              static_cast<int64_t>(l.numbers[0]), static_cast<int64_t>(l.numbers[1]) - 1)(random));
        } else if (l.kind == Leaf::kChoice) {
          c.strings[l.name] =
              l.strings[std::uniform_int_distribution<size_t>(0, l.strings.size() - 1)(random)];
        }
      }
      out.push_back(std::move(c));
      size_t g = 0;  // the next grid combination: the first key varies fastest
      while (g < grids.size()) {
        size_t n =
            grids[g]->kind == Leaf::kGrid ? grids[g]->numbers.size() : grids[g]->strings.size();
        if (++index[g] < n) break;
        index[g] = 0;
        ++g;
      }
      if (g == grids.size()) break;
    }
  }
  return out;
}

}  // namespace airt::tune
