// What the sweep's driver and its remote functions share: the trial result and the trial.
#pragma once

#include <string>

#include "airt/api.h"

struct TrialResult {
  double lr;
  double momentum;
  double loss;
  std::string gpus;  // CUDA_VISIBLE_DEVICES of the worker that ran it
  MSGPACK_DEFINE(lr, momentum, loss, gpus);
};

// Fits y = 3x - 2 + noise by gradient descent with momentum; the final mean squared error.
TrialResult Train(double lr, double momentum, int steps);
