// Test doubles for the head: a manual clock, a MetadataStore that injects faults in front of
// another (STYLE.md rules 8 and 12), and a committer that writes a table's staged changes the way
// HeadServer does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <kj/async.h>

#include "head/clock.h"
#include "head/internal/change.h"
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

// Forwards to `inner` until told to fail or hold. A failed write reaches `inner` not at all, so
// nothing changes there. Confined to one thread (the test's loop).
class FaultInjectingMetadataStore final : public MetadataStore {
 public:
  explicit FaultInjectingMetadataStore(MetadataStore& inner) : inner_(inner) {}

  Status write_error;  // while not ok, every write fails with it (e.g. Unavailable)
  Status scan_error;   // while not ok, every scan fails with it
  int writes = 0;      // writes that reached `inner`

  // The next `n` writes fail with `error`.
  void FailNextWrites(int n, const Status& error) {
    fail_next_ = n;
    next_error_ = error;
  }
  // Every call fails with `error` (ok: none fails).
  void FailAll(const Status& error) { write_error = scan_error = error; }
  // Writes wait (unanswered, not yet applied) until ReleaseWrites.
  void HoldWrites() { holding_ = true; }
  // Lets the held writes through, in order (they reach `inner` when the loop next runs).
  void ReleaseWrites() {
    holding_ = false;
    std::vector<kj::Own<kj::PromiseFulfiller<void>>> held = std::move(held_);
    for (auto& h : held) h->fulfill();
  }
  size_t held() const { return held_.size(); }

  Result<std::vector<Row>> Scan(std::string_view prefix) override {
    if (!scan_error.ok()) return scan_error;
    return inner_.Scan(prefix);
  }
  kj::Promise<Status> Write(WriteBatch batch) override {
    if (fail_next_ > 0) {
      --fail_next_;
      return next_error_;
    }
    if (!write_error.ok()) return write_error;
    if (holding_) {
      auto paf = kj::newPromiseAndFulfiller<void>();
      held_.push_back(kj::mv(paf.fulfiller));
      return paf.promise.then([this, batch = std::move(batch)]() mutable {
        ++writes;
        return inner_.Write(std::move(batch));
      });
    }
    ++writes;
    return inner_.Write(std::move(batch));
  }

 private:
  MetadataStore& inner_;
  int fail_next_ = 0;
  Status next_error_;
  bool holding_ = false;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> held_;
};

// Writes one row straight into an InMemoryMetadataStore (whose writes apply at once).
inline void PutRow(InMemoryMetadataStore& store, std::string key, std::string value) {
  WriteBatch batch;
  batch.Put(std::move(key), std::move(value));
  (void)store.Write(std::move(batch));
}

// Writes a table's staged change through `store` on its own event loop and applies it when the
// write succeeded, as HeadServer does; the store's error gets the change's context.
class Committer {
 public:
  explicit Committer(MetadataStore& store)
      : store_(store),
        loop_(std::make_unique<kj::EventLoop>()),
        scope_(std::make_unique<kj::WaitScope>(*loop_)) {}
  ~Committer() {
    scope_.reset();
    loop_.reset();
  }

  Status operator()(internal::Change change) {
    if (!change.rows.empty()) {
      Status written = store_.Write(std::move(change.rows)).wait(*scope_);
      if (!written.ok()) return written.WithContext(change.what);
    }
    change.Apply();
    return Status::Ok();
  }
  Status operator()(Result<internal::Change> change) {
    if (!change.ok()) return change.status();
    return (*this)(std::move(*change));
  }
  template <typename T>
  Result<T> operator()(internal::Staged<T> staged) {
    AIRT_RETURN_IF_ERROR((*this)(std::move(staged.change)));
    return std::move(staged.value);
  }
  template <typename T>
  Result<T> operator()(Result<internal::Staged<T>> staged) {
    if (!staged.ok()) return staged.status();
    return (*this)(std::move(*staged));
  }
  kj::WaitScope& scope() { return *scope_; }

 private:
  MetadataStore& store_;
  // Held by pointer: their destructors may throw, which a test fixture's must not.
  std::unique_ptr<kj::EventLoop> loop_;
  std::unique_ptr<kj::WaitScope> scope_;
};

}  // namespace airt::head::testing
