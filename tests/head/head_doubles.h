// Test doubles for the head: a manual clock and a MetadataStore that injects faults in front of
// another (STYLE.md rules 8 and 12).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "head/clock.h"
#include "head/metadata_store.h"

namespace airt::head::testing {

// Time moves only when a test says so. Starts at 1,000,000 ms on both clocks.
class ManualClock final : public Clock {
 public:
  int64_t MonotonicMs() override { return monotonic_ms_; }
  int64_t WallMs() override { return wall_ms_; }
  void AdvanceMs(int64_t ms) {
    monotonic_ms_ += ms;
    wall_ms_ += ms;
  }

 private:
  int64_t monotonic_ms_ = 1'000'000;
  int64_t wall_ms_ = 1'700'000'000'000;
};

// Forwards to `inner` until told to fail: each call kind fails with its Status while that Status
// is not ok (e.g. Unavailable, as a Redis that went away). A failed call reaches `inner` not at
// all, so nothing changes there.
class FaultInjectingMetadataStore final : public MetadataStore {
 public:
  explicit FaultInjectingMetadataStore(MetadataStore& inner) : inner_(inner) {}

  Status get_error;
  Status put_error;
  Status delete_error;
  Status keys_error;
  int puts = 0;  // successful Puts

  // Every call fails with `error` (ok: none fails).
  void FailAll(const Status& error) { get_error = put_error = delete_error = keys_error = error; }

  Result<std::optional<std::string>> Get(std::string_view key) override {
    if (!get_error.ok()) return get_error;
    return inner_.Get(key);
  }
  Status Put(std::string_view key, std::string_view value) override {
    if (!put_error.ok()) return put_error;
    ++puts;
    return inner_.Put(key, value);
  }
  Result<bool> Delete(std::string_view key) override {
    if (!delete_error.ok()) return delete_error;
    return inner_.Delete(key);
  }
  Result<std::vector<std::string>> Keys(std::string_view prefix) override {
    if (!keys_error.ok()) return keys_error;
    return inner_.Keys(prefix);
  }

 private:
  MetadataStore& inner_;
};

}  // namespace airt::head::testing
