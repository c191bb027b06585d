// The trainable of the C++ sweep's cluster test (tests/python/test_tune_cpp.py): counts its
// steps, checkpoints the count, and fails once at step 3 when its config asks (a step that
// throws, or a worker that exits), so the sweep's retries, checkpoints and resume show. Its loss
// is i + 1/steps (config "i", 0 without it): the schedulers' tests rank trials by i.
#pragma once

#include <string>

#include "airt/tune/sweep.h"

class FlakyCounter {
 public:
  static FlakyCounter* Create(airt::tune::Config config);
  // {"step": steps so far, "loaded": the count its checkpoint held (0 without one), "loss"}.
  // fail "pbt": each step sleeps 0.05 s, 0.15 s with i 3 (the PBT test's worst trial lags).
  airt::tune::Metrics Step();
  std::string Save();
  void Load(std::string state);

 private:
  airt::tune::Config config_;
  int steps_ = 0;
  int loaded_ = 0;
};
