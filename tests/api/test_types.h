// Types shared by the test functions library and the tests that call it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <msgpack.hpp>

namespace airt::testing {

struct Point {
  double x = 0;
  double y = 0;
  std::string label;
  std::vector<std::string> tags;
  MSGPACK_DEFINE(x, y, label, tags);
  friend bool operator==(const Point&, const Point&) = default;
};

inline constexpr size_t kLargeBytes = 1 << 20;
inline uint8_t LargePattern(size_t i) { return static_cast<uint8_t>(i * 131 + 7); }

}  // namespace airt::testing
