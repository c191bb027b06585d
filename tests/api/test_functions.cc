// Remote functions for the worker's tests, built as a shared library (airt_test_functions) that
// airt-worker loads from its --code-search-path.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "airt/api.h"
#include "tests/api/test_types.h"

namespace {

int add(int a, int b) { return a + b; }

// Parameters by value on purpose: the invoker hands them deserialized values to move from.
std::string concat(std::string a, std::string b) { return a + b; }  // NOLINT(performance-*)

// A MSGPACK_DEFINE struct in and out.
airt::testing::Point scale(const airt::testing::Point& p, double k) {
  airt::testing::Point out = p;
  out.x *= k;
  out.y *= k;
  out.tags.emplace_back("scaled");
  return out;
}

int boom() { throw std::runtime_error("boom"); }

void do_nothing() {}

// 1 MiB: larger than the inline threshold, so it goes through the store.
std::vector<uint8_t> large_bytes() {
  std::vector<uint8_t> out(airt::testing::kLargeBytes);
  for (size_t i = 0; i < out.size(); ++i) out[i] = airt::testing::LargePattern(i);
  return out;
}

void say_hello(const std::string& who) {
  std::cout << "hello, " << who << " (from stdout)" << std::endl;
  std::fprintf(stderr, "hello, %s (from stderr)\n", who.c_str());
}

// The order tasks ran in: appends `i` and returns all so far.
std::vector<int> record_order(int i) {
  static std::mutex mu;
  static std::vector<int> seen;
  std::lock_guard<std::mutex> lock(mu);
  seen.push_back(i);
  return seen;
}

// An argument read from the store.
uint64_t sum_bytes(const std::vector<uint8_t>& bytes) {
  uint64_t sum = 0;
  for (uint8_t b : bytes) sum += b;
  return sum;
}

std::map<std::string, int> count_words(const std::vector<std::string>& words) {
  std::map<std::string, int> counts;
  for (const std::string& w : words) counts[w]++;
  return counts;
}

// Holds the task thread until `path` exists (the test creates it).
bool wait_for_file(const std::string& path) {
  while (!std::filesystem::exists(path)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace

AIRT_REMOTE(add, concat, scale, boom, do_nothing, large_bytes, say_hello, record_order);
AIRT_REMOTE(sum_bytes, count_words, wait_for_file);
