// examples/actors: the classes and functions both the driver and the workers see.
#pragma once

#include <vector>

class ParameterServer {
 public:
  explicit ParameterServer(int size) : weights_(static_cast<size_t>(size), 0.0) {}
  static ParameterServer* Create(int size);
  // Applies `gradient` with learning rate `rate`; returns the new weights.
  std::vector<double> Apply(std::vector<double> gradient, double rate);
  int Updates() const;

 private:
  std::vector<double> weights_;
  int updates_ = 0;
};

std::vector<double> Gradient(std::vector<double> weights, double target);
