// The timing loop every allreduce peer of bench/collective runs alike: for each size, one warm-up
// allreduce, then `Iterations(bytes)` timed ones back to back; rank 0 prints "BYTES SECONDS"
// (seconds per allreduce) per size.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace airt::bench {

inline int Iterations(size_t bytes) {
  size_t n = (size_t{512} << 20) / std::max<size_t>(bytes, 1);
  return static_cast<int>(std::clamp<size_t>(n, 3, 200));
}

inline std::vector<size_t> ParseSizes(const std::string& csv) {
  std::vector<size_t> out;
  size_t start = 0;
  while (start < csv.size()) {
    size_t end = csv.find(',', start);
    if (end == std::string::npos) end = csv.size();
    out.push_back(std::stoull(csv.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

// `allreduce(data, count)` sums float32 `data` over the ranks in place; `barrier` lines them up.
inline std::vector<std::pair<size_t, double>> TimeAllreduce(
    const std::vector<size_t>& sizes, const std::function<void(float*, size_t)>& allreduce,
    const std::function<void()>& barrier) {
  std::vector<std::pair<size_t, double>> out;
  for (size_t bytes : sizes) {
    std::vector<float> data(bytes / sizeof(float), 1.0f);
    allreduce(data.data(), data.size());
    barrier();
    int iters = Iterations(bytes);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) allreduce(data.data(), data.size());
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.emplace_back(bytes, seconds / iters);
  }
  return out;
}

}  // namespace airt::bench
