// One rank of examples/collective_sgd, an actor (so that each rank has a worker process of its
// own: tasks of one shape may be pipelined onto one leased worker, where ranks would wait on each
// other).
#pragma once

#include <vector>

class SgdRank {
 public:
  static SgdRank* Create();
  // Trains for `steps` steps as rank `rank` of `world`; returns the mean squared error over every
  // rank's data before each step's update (every rank computes the same).
  std::vector<double> Train(int world, int rank, int steps, double learning_rate);
};
