// The ranks of examples/collective_sgd (actors, one worker process each): data-parallel SGD on a synthetic linear regression, each
// rank on its own shard, gradients averaged with an allreduce over airt's communicator.
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "airt/api.h"
#include "airt/collective.h"
#include "examples/collective_sgd.h"

namespace {

constexpr int kFeatures = 8;
constexpr int kRowsPerRank = 512;

// The true weights every rank's data comes from (y = w·x + noise).
double TrueWeight(int j) { return 0.5 * (j + 1) * (j % 2 == 0 ? 1 : -1); }

}  // namespace

SgdRank* SgdRank::Create() { return new SgdRank(); }

std::vector<double> SgdRank::Train(int world, int rank, int steps, double learning_rate) {
  auto group = airt::collective::Group::Init(world, rank, "gloo", "sgd");
  std::mt19937 rng(1234 + rank);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> x(kRowsPerRank * kFeatures), y(kRowsPerRank);
  for (int i = 0; i < kRowsPerRank; ++i) {
    double target = 0;
    for (int j = 0; j < kFeatures; ++j) {
      x[i * kFeatures + j] = normal(rng);
      target += TrueWeight(j) * x[i * kFeatures + j];
    }
    y[i] = target + 0.01 * normal(rng);
  }
  std::vector<double> w(kFeatures, 0.0);
  group->Broadcast(std::span<double>(w), 0);  // every rank starts from rank 0's weights
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    // The local gradient of the mean squared error, and the local loss in the last slot.
    std::vector<double> grad(kFeatures + 1, 0.0);
    for (int i = 0; i < kRowsPerRank; ++i) {
      double err = -y[i];
      for (int j = 0; j < kFeatures; ++j) err += w[j] * x[i * kFeatures + j];
      for (int j = 0; j < kFeatures; ++j) grad[j] += 2 * err * x[i * kFeatures + j] / kRowsPerRank;
      grad[kFeatures] += err * err / kRowsPerRank;
    }
    group->Allreduce(std::span<double>(grad), airt::collective::ReduceOp::AVERAGE);
    for (int j = 0; j < kFeatures; ++j) w[j] -= learning_rate * grad[j];
    losses.push_back(grad[kFeatures]);
  }
  return losses;
}

AIRT_REMOTE(SgdRank::Create, &SgdRank::Train);
