// FlakyCounter, registered for the workers of airt_tune_sweep_driver.
#include "tests/tune/sweep_trainable.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

FlakyCounter* FlakyCounter::Create(airt::tune::Config config) {
  auto* c = new FlakyCounter();
  c->config_ = std::move(config);
  return c;
}

airt::tune::Metrics FlakyCounter::Step() {
  ++steps_;
  const std::string dir = config_.String("dir");
  const std::string fail = config_.String("fail");
  const std::string marker = dir + "/failed-" + fail;
  if (steps_ == 3 && (fail == "throw" || fail == "exit") && !std::filesystem::exists(marker)) {
    std::ofstream(marker) << "once\n";
    if (fail == "throw") throw std::runtime_error("FlakyCounter: step 3 fails once");
    std::_Exit(3);  // the worker dies: its actor with it
  }
  if (fail == "slow") {  // the driver is killed while these run (the resume test)
    if (steps_ == 3) std::ofstream(dir + "/mid-sweep-" + std::to_string(getpid())) << "3\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  // The scheduler tests rank trials by "i" (lower is better), however far each has run.
  double rank = config_.numbers.count("i") ? config_.Number("i") : 0;
  if (fail == "pbt") {  // the worst runs slowest: the others are ahead, with checkpoints
    std::this_thread::sleep_for(std::chrono::milliseconds(rank == 3 ? 150 : 50));
  }
  return {{"step", steps_}, {"loaded", loaded_}, {"loss", rank + 1.0 / steps_}};
}

std::string FlakyCounter::Save() { return std::to_string(steps_); }

void FlakyCounter::Load(std::string state) {
  steps_ = std::stoi(state);
  loaded_ = steps_;
}

AIRT_REMOTE(FlakyCounter::Create, &FlakyCounter::Step, &FlakyCounter::Save, &FlakyCounter::Load);
