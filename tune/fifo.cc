// FIFO: every trial runs to its end.
#include "airt/tune/schedulers.h"

namespace airt::tune {
namespace {

class FifoScheduler final : public TrialScheduler {
 public:
  void OnTrialAdd(std::string_view) override {}
  Decision OnTrialResult(std::string_view, double, std::optional<double>) override {
    return Decision::kContinue;
  }
  void OnTrialComplete(std::string_view, std::optional<double>, std::optional<double>) override {}
  std::string Name() const override { return "FIFOScheduler"; }
};

}  // namespace

std::unique_ptr<TrialScheduler> MakeFifoScheduler() { return std::make_unique<FifoScheduler>(); }

}  // namespace airt::tune
