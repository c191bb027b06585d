// Generator functions for the streaming tests (generator_test.cc): each streams its items with
// airt::Generator<T>; the ones the tests synchronize with write or wait for files.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "airt/api.h"

namespace {

void WriteFile(const std::string& path, const std::string& text) {
  std::string partial = path + ".partial";  // renamed: a reader never sees half of it
  if (FILE* f = std::fopen(partial.c_str(), "w")) {
    std::fputs(text.c_str(), f);
    std::fclose(f);
    std::rename(partial.c_str(), path.c_str());
  }
}

}  // namespace

// 0, 1, ..., n - 1.
airt::Generator<int> CountTo(int n) {
  return airt::Generator<int>([i = 0, n]() mutable -> std::optional<int> {
    if (i == n) return std::nullopt;
    return i++;
  });
}

// "first", then (once `go_file` exists, which the consumer writes) "0" .. "n-1". Throws when the
// file does not come within 60 s.
airt::Generator<std::string> GatedItems(std::string go_file, int n) {
  return airt::Generator<std::string>([i = -1, n, go_file]() mutable -> std::optional<std::string> {
    if (i++ == -1) return std::string("first");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!std::filesystem::exists(go_file)) {
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error(go_file);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (i > n) return std::nullopt;
    return std::to_string(i - 1);
  });
}

// 0 .. n - 1, writing how many items it made into `count_file` as it makes each.
airt::Generator<int> CountInto(std::string count_file, int n) {
  return airt::Generator<int>([i = 0, n, count_file]() mutable -> std::optional<int> {
    if (i == n) return std::nullopt;
    WriteFile(count_file, std::to_string(i + 1));
    return i++;
  });
}

// 0 .. k - 1, then throws.
airt::Generator<int> FailAfter(int k) {
  return airt::Generator<int>([i = 0, k]() mutable -> std::optional<int> {
    if (i == k) throw std::runtime_error("failed after " + std::to_string(k) + " items");
    return i++;
  });
}

// 0 .. n - 1; on its first attempt (no `marker` yet) its process exits once item k went out.
airt::Generator<int> DieOnceAfter(std::string marker, int n, int k) {
  bool first = !std::filesystem::exists(marker);
  return airt::Generator<int>([i = 0, n, k, first, marker]() mutable -> std::optional<int> {
    if (first && i == k + 1) {
      WriteFile(marker, "died");
      std::fflush(nullptr);
      ::_exit(1);
    }
    if (i == n) return std::nullopt;
    return i++;
  });
}

// 0, 1, ... without end, writing how many it made into `count_file`; writes `stopped_file` when
// its sends fail (the stream was cancelled) and rethrows.
airt::Generator<int> Endless(std::string count_file, std::string stopped_file) {
  struct State {
    int next = 0;
    std::string count_file, stopped_file;
    ~State() { WriteFile(stopped_file, "stopped"); }  // the generator is dropped: it ended
  };
  auto state = std::make_shared<State>(State{0, count_file, stopped_file});
  return airt::Generator<int>([state]() -> std::optional<int> {
    WriteFile(state->count_file, std::to_string(state->next + 1));
    return state->next++;
  });
}

AIRT_REMOTE(CountTo, GatedItems, CountInto, FailAfter, DieOnceAfter, Endless);
