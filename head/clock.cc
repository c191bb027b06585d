#include "head/clock.h"

#include <chrono>

namespace airt::head {
namespace {

class SystemClock final : public Clock {
 public:
  int64_t MonotonicMs() override { return Ms(std::chrono::steady_clock::now()); }
  int64_t WallMs() override { return Ms(std::chrono::system_clock::now()); }

 private:
  template <typename TimePoint>
  static int64_t Ms(TimePoint t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  }
};

}  // namespace

std::unique_ptr<Clock> NewSystemClock() { return std::make_unique<SystemClock>(); }

}  // namespace airt::head
