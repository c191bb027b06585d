// Remote functions for the end-to-end task tests: linked by the test driver (which names them
// with Task(f)) and loaded by airt-worker from its code search path.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "airt/api.h"
#include "tests/e2e/object_pattern.h"

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

int64_t SumAll(std::vector<int64_t> values) {
  int64_t sum = 0;
  for (int64_t v : values) sum += v;
  return sum;
}

int Fail(int code) { throw std::runtime_error("failed on purpose with " + std::to_string(code)); }

std::string VisibleDevices() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v ? v : "<unset>";
}

// Kills its own worker process the first time (when `marker` does not exist yet), as a crash
// would; answers 7 when run again.
int DieOnce(std::string marker) {
  if (FILE* f = std::fopen(marker.c_str(), "r")) {
    std::fclose(f);
    return 7;
  }
  if (FILE* f = std::fopen(marker.c_str(), "w")) std::fclose(f);
  std::_Exit(1);
}

int AlwaysDie() { std::_Exit(1); }

// Kills its own worker process until it has died `times` times (a byte appended to `marker` per
// death); then answers how often it died.
int DieTimes(std::string marker, int times) {
  int died = 0;
  if (FILE* f = std::fopen(marker.c_str(), "r")) {
    while (std::fgetc(f) != EOF) ++died;
    std::fclose(f);
  }
  if (died >= times) return died;
  if (FILE* f = std::fopen(marker.c_str(), "a")) {
    std::fputc('x', f);
    std::fclose(f);
  }
  std::_Exit(1);
}

// The pid of the node that started this worker: tells a test which node ran the task.
int NodePid() { return static_cast<int>(::getppid()); }

// Writes a line to the worker's stdout (its log file, which the node streams to the driver).
int PrintHello(int x) {
  std::printf("hello from the worker %d\n", x);
  std::fflush(stdout);
  return x;
}

// `size` bytes of object_pattern.h's pattern for `seed`: each seed gives other bytes.
std::vector<uint8_t> PatternBytes(int64_t size, int64_t seed) {
  std::vector<uint8_t> out(static_cast<size_t>(size));
  airt::e2e::FillPattern(out, static_cast<uint64_t>(seed));
  return out;
}

// object_pattern.h's checksum of `data`.
uint64_t ChecksumOf(std::string data) {
  return airt::e2e::Checksum(std::span(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

// Keeps its worker busy for `ms` milliseconds, then answers `ms`.
int SleepMs(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return ms;
}

// Creates `<dir>/running-<node pid>-<x>` (so a test sees where it runs), sleeps `ms`, answers x*x.
int SquareSlowly(std::string dir, int x, int ms) {
  std::ofstream(dir + "/running-" + std::to_string(::getppid()) + "-" + std::to_string(x)) << x;
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return x * x;
}

// Creates `<dir>/started-<i>` (so a test sees it running), sleeps `ms`, answers {i, the pid of
// the worker that ran it}.
std::vector<int64_t> NumberedSleep(std::string dir, int i, int ms) {
  std::ofstream(dir + "/started-" + std::to_string(i)) << i;
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  return {i, static_cast<int64_t>(::getpid())};
}

// Creates `<dir>/held`, waits until `<dir>/release` exists, answers its node's pid.
int HoldUntilReleased(std::string dir) {
  std::ofstream(dir + "/held") << 1;
  while (!std::filesystem::exists(dir + "/release")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return static_cast<int>(::getppid());
}

AIRT_REMOTE(Add, Greet, Bytes, SumBytes, Fail, VisibleDevices, DieOnce, AlwaysDie, NodePid,
            PrintHello, SleepMs, PatternBytes, ChecksumOf, SumAll, DieTimes, SquareSlowly,
            NumberedSleep, HoldUntilReleased);
