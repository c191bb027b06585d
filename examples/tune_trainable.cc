// LinearFit, registered for the workers of examples/cpp_tune_sweep.
#include "examples/tune_trainable.h"

#include <random>

LinearFit* LinearFit::Create(airt::tune::Config config) {
  auto* f = new LinearFit();
  f->lr_ = config.Number("lr");
  f->momentum_ = config.Number("momentum");
  std::mt19937 random(7);
  std::normal_distribution<double> noise(0, 0.1);
  for (int i = 0; i < 256; ++i) {
    double x = i / 128.0 - 1;
    f->x_.push_back(x);
    f->y_.push_back(3 * x - 2 + noise(random));
  }
  return f;
}

airt::tune::Metrics LinearFit::Step() {
  double loss = 0;
  for (size_t i = 0; i < x_.size(); ++i) {
    double err = w_ * x_[i] + b_ - y_[i];
    vw_ = momentum_ * vw_ - lr_ * 2 * err * x_[i];
    vb_ = momentum_ * vb_ - lr_ * 2 * err;
    w_ += vw_;
    b_ += vb_;
  }
  for (size_t i = 0; i < x_.size(); ++i) {
    double err = w_ * x_[i] + b_ - y_[i];
    loss += err * err;
  }
  return {{"loss", loss / static_cast<double>(x_.size())}};
}

AIRT_REMOTE(LinearFit::Create, &LinearFit::Step);
