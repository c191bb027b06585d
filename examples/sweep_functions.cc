// Remote functions of the sweep example, built into a shared library: the driver links it (to
// name the functions it submits) and each worker loads it from the node's code search path.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "examples/sweep.h"

// One trial: fits y = 3x - 2 + noise with gradient descent for `steps` steps at learning rate
// `lr` and momentum `momentum`; returns the final mean squared error and the GPU ids this worker
// was given ("" when none), as a GPU trial would report them.
TrialResult Train(double lr, double momentum, int steps) {
  std::vector<double> xs, ys;
  uint32_t state = 12345;
  for (int i = 0; i < 256; ++i) {
    state = state * 1664525u + 1013904223u;
    double x = (static_cast<double>(state % 2000) / 1000.0) - 1.0;
    double noise = (static_cast<double>((state >> 11) % 200) / 1000.0) - 0.1;
    xs.push_back(x);
    ys.push_back(3 * x - 2 + noise);
  }
  double w = 0, b = 0, vw = 0, vb = 0, loss = 0;
  for (int step = 0; step < steps; ++step) {
    double gw = 0, gb = 0;
    loss = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      double err = w * xs[i] + b - ys[i];
      loss += err * err;
      gw += 2 * err * xs[i];
      gb += 2 * err;
    }
    loss /= static_cast<double>(xs.size());
    vw = momentum * vw - lr * gw / static_cast<double>(xs.size());
    vb = momentum * vb - lr * gb / static_cast<double>(xs.size());
    w += vw;
    b += vb;
    if (!std::isfinite(w) || !std::isfinite(b)) {
      loss = INFINITY;  // diverged
      break;
    }
  }
  const char* gpus = std::getenv("CUDA_VISIBLE_DEVICES");
  return TrialResult{lr, momentum, loss, gpus ? gpus : ""};
}

AIRT_REMOTE(Train);
