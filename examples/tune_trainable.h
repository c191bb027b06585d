// The C++ sweep's trainable: a linear model fitted by SGD with momentum, one epoch per Step.
#pragma once

#include <vector>

#include "airt/tune/sweep.h"

class LinearFit {
 public:
  static LinearFit* Create(airt::tune::Config config);
  // One epoch over the data: {"loss": mean squared error}.
  airt::tune::Metrics Step();

 private:
  double lr_ = 0, momentum_ = 0, w_ = 0, b_ = 0, vw_ = 0, vb_ = 0;
  std::vector<double> x_, y_;
};
