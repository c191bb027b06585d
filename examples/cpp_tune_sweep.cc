// A C++ hyperparameter sweep on airt's C++ tune API (airt/tune/sweep.h): a grid of learning
// rates crossed with momentums, 2 samples each, every trial a C++ actor holding
// {CPU: 0.25, GPU: 0.5}, ASHA stopping the poor ones early; the live table, the best config.
//   AIRT_ADDRESS=127.0.0.1:6379 build/examples/cpp_tune_sweep [storage folder]
#include <cstdio>

#include "airt/tune/sweep.h"
#include "examples/tune_trainable.h"

int main(int argc, char** argv) {
  airt::Init();  // joins the cluster at AIRT_ADDRESS
  airt::tune::SweepOptions options;
  options.name = "cpp_linear_fit";
  if (argc > 1) options.storage_path = argv[1];
  options.metric = "loss";
  options.num_samples = 2;
  options.max_iterations = 20;
  options.resources = {{"CPU", 0.25}, {"GPU", 0.5}};
  airt::tune::AshaOptions asha;
  asha.max_t = 20;
  asha.grace_period = 2;
  asha.reduction_factor = 2;
  options.scheduler = airt::tune::MakeAshaScheduler(asha);
  auto space = airt::tune::SearchSpace()
                   .Grid("lr", {0.0001, 0.001, 0.003, 0.01})
                   .Grid("momentum", {0.0, 0.9})
                   .Uniform("unused_noise", 0, 1);
  airt::tune::SweepResult result =
      airt::tune::Run(LinearFit::Create, &LinearFit::Step, space, options);
  const airt::tune::TrialRecord* best = result.Best("loss", airt::tune::Mode::kMin);
  if (best) {
    std::printf("best: trial_%s lr=%g momentum=%g loss=%.6g after %zu epochs\n", best->id.c_str(),
                best->config.Number("lr"), best->config.Number("momentum"),
                best->results.back().at("loss"), best->results.size());
  }
  airt::Shutdown();
  return best ? 0 : 1;
}
