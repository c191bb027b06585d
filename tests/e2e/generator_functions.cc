// Generator functions for the streaming tests (generator_test.cc): each streams its items with
// airt::Generator<T>; the ones the tests synchronize with write or wait for files.
#include "tests/e2e/generator_functions.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

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

airt::Generator<int> CountTo(int n) {
  return airt::Generator<int>([i = 0, n]() mutable -> std::optional<int> {
    if (i == n) return std::nullopt;
    return i++;
  });
}

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

airt::Generator<int> CountInto(std::string count_file, int n) {
  return airt::Generator<int>([i = 0, n, count_file]() mutable -> std::optional<int> {
    if (i == n) return std::nullopt;
    WriteFile(count_file, std::to_string(i + 1));
    return i++;
  });
}

airt::Generator<int> FailAfter(int k) {
  return airt::Generator<int>([i = 0, k]() mutable -> std::optional<int> {
    if (i == k) throw std::runtime_error("failed after " + std::to_string(k) + " items");
    return i++;
  });
}

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

StreamingActor* StreamingActor::Create() { return new StreamingActor(); }
airt::Generator<int> StreamingActor::CountTo(int n) {
  ++calls_;
  return ::CountTo(n);
}
airt::Generator<std::string> StreamingActor::GatedItems(std::string go_file, int n) {
  ++calls_;
  return ::GatedItems(std::move(go_file), n);
}
airt::Generator<int> StreamingActor::CountInto(std::string count_file, int n) {
  ++calls_;
  return ::CountInto(std::move(count_file), n);
}
airt::Generator<int> StreamingActor::FailAfter(int k) {
  ++calls_;
  return ::FailAfter(k);
}
airt::Generator<int> StreamingActor::DieOnceAfter(std::string marker, int n, int k) {
  ++calls_;
  return ::DieOnceAfter(std::move(marker), n, k);
}
airt::Generator<int> StreamingActor::Endless(std::string count_file, std::string stopped_file) {
  ++calls_;
  return ::Endless(std::move(count_file), std::move(stopped_file));
}
airt::Generator<int> StreamingActor::Numbered(int n) {
  int call = calls_++;
  // Runs on the actor's thread while the call lasts: the actor outlives it.
  return airt::Generator<int>([this, call, i = 0, n]() mutable -> std::optional<int> {
    if (i == n) return std::nullopt;
    ++items_;
    return call * 100 + i++;
  });
}
int StreamingActor::Calls() { return ++calls_; }
int StreamingActor::ItemTotal() { return items_; }

AIRT_REMOTE(CountTo, GatedItems, CountInto, FailAfter, DieOnceAfter, Endless,
            StreamingActor::Create, &StreamingActor::CountTo, &StreamingActor::GatedItems,
            &StreamingActor::CountInto, &StreamingActor::FailAfter, &StreamingActor::DieOnceAfter,
            &StreamingActor::Endless, &StreamingActor::Numbered, &StreamingActor::Calls,
            &StreamingActor::ItemTotal);
