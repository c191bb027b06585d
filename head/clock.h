// Time for the head, behind an interface (STYLE.md rules 8 and 12): airt-head reads the system's
// clocks; unit tests drive a manual one (tests/head/head_doubles.h).
#pragma once

#include <cstdint>
#include <memory>

namespace airt::head {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds on a clock that never goes back, from an arbitrary origin: for liveness.
  virtual int64_t MonotonicMs() = 0;
  // Milliseconds since the Unix epoch: for what users read (a job's start and end).
  virtual int64_t WallMs() = 0;
};

// std::chrono::steady_clock and system_clock. Thread-safe.
std::unique_ptr<Clock> NewSystemClock();

}  // namespace airt::head
