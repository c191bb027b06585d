// Remote functions for the lineage tests (tests/e2e/lineage_test.cc, bench/chaos): each run leaves
// a marker file naming the node it ran on, so a test counts the runs (a rebuilt object's task ran
// twice) and sees where they ran.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "airt/api.h"

namespace {

// Creates `<dir>/<what>-<node pid>-<unique>`.
void Mark(const std::string& dir, const std::string& what) {
  static std::atomic<uint64_t> runs{0};
  std::ofstream(dir + "/" + what + "-" + std::to_string(::getppid()) + "-" +
                std::to_string(::getpid()) + "." + std::to_string(++runs))
      << what;
}

}  // namespace

// `n` bytes: byte i is (i * 7 + seed) mod 256. Marks "made<seed>".
std::vector<uint8_t> MadeBytes(std::string dir, int n, int seed) {
  Mark(dir, "made" + std::to_string(seed));
  std::vector<uint8_t> out(static_cast<size_t>(n));
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + seed);
  return out;
}

// `in` with `add` added to every byte, after `ms` milliseconds. Marks "added<add>".
std::vector<uint8_t> AddToBytes(std::string dir, std::vector<uint8_t> in, int add, int ms) {
  Mark(dir, "added" + std::to_string(add));
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  for (uint8_t& b : in) b = static_cast<uint8_t>(b + add);
  return in;
}

AIRT_REMOTE(MadeBytes, AddToBytes);
