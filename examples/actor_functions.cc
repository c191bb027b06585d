// The actor of examples/actors: a parameter server that keeps a vector of weights and applies the
// gradients workers send it, in the order they arrive.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "airt/api.h"
#include "examples/actors.h"

ParameterServer* ParameterServer::Create(int size) {
  if (size <= 0) throw std::invalid_argument("size must be positive, got " + std::to_string(size));
  return new ParameterServer(size);
}

std::vector<double> ParameterServer::Apply(std::vector<double> gradient, double rate) {
  if (gradient.size() != weights_.size()) {
    throw std::invalid_argument("a gradient of " + std::to_string(gradient.size()) +
                                " values for " + std::to_string(weights_.size()) + " weights");
  }
  for (size_t i = 0; i < weights_.size(); ++i) weights_[i] -= rate * gradient[i];
  ++updates_;
  return weights_;
}

int ParameterServer::Updates() const { return updates_; }

// A gradient as a worker task would compute it: pulls each weight towards `target`.
std::vector<double> Gradient(std::vector<double> weights, double target) {
  std::vector<double> out;
  out.reserve(weights.size());
  for (double w : weights) out.push_back(w - target);
  return out;
}

AIRT_REMOTE(ParameterServer::Create, &ParameterServer::Apply, &ParameterServer::Updates, Gradient);
