// Remote functions of the tasks example (a shared library: the driver links it, workers load it).
#include <cstdint>
#include <numeric>
#include <vector>

#include "airt/api.h"

int Add(int a, int b) { return a + b; }

std::vector<int> Range(int n) {
  std::vector<int> out(static_cast<size_t>(n));
  std::iota(out.begin(), out.end(), 0);
  return out;
}

int64_t Sum(std::vector<int> values) {
  return std::accumulate(values.begin(), values.end(), int64_t{0});
}

AIRT_REMOTE(Add, Range, Sum);
