// Remote functions for the end-to-end task tests: linked by the test driver (which names them
// with Task(f)) and loaded by airt-worker from its code search path.
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "airt/api.h"

int Add(int a, int b) { return a + b; }

std::string Greet(std::string name) { return "hello " + name; }

std::vector<uint8_t> Bytes(int n, int seed) {
  std::vector<uint8_t> out(static_cast<size_t>(n));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + seed);
  return out;
}

int64_t SumBytes(std::vector<uint8_t> bytes) {
  int64_t sum = 0;
  for (uint8_t b : bytes) sum += b;
  return sum;
}

int Fail(int code) { throw std::runtime_error("failed on purpose with " + std::to_string(code)); }

std::string VisibleDevices() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v ? v : "<unset>";
}

AIRT_REMOTE(Add, Greet, Bytes, SumBytes, Fail, VisibleDevices);
