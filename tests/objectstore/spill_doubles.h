// Test doubles for SpillStorage: one in memory, one that injects faults in front of another.
#pragma once

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "objectstore/internal/spill_storage.h"

namespace airt::objectstore::testing {

class MemorySpillStorage : public internal::SpillStorage {
 public:
  Status Write(const ObjectId& id, std::span<const uint8_t> bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    files_[id].assign(bytes.begin(), bytes.end());
    return Status::Ok();
  }
  Status Read(const ObjectId& id, std::span<uint8_t> out) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(id);
    if (it == files_.end()) return NotFound("no spilled copy of " + id.Hex());
    if (it->second.size() != out.size()) return Internal("spilled copy has the wrong size");
    std::memcpy(out.data(), it->second.data(), out.size());
    return Status::Ok();
  }
  Status Remove(const ObjectId& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    files_.erase(id);
    return Status::Ok();
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return files_.size();
  }

 private:
  mutable std::mutex mu_;
  std::map<ObjectId, std::basic_string<uint8_t>> files_;
};

// Forwards to `inner` until told to fail: writes after `fail_writes_after` more successes fail
// with kResourceExhausted ("disk full"); reads fail with kInternal while `fail_reads` is set.
class FaultInjectingSpillStorage : public internal::SpillStorage {
 public:
  explicit FaultInjectingSpillStorage(std::shared_ptr<internal::SpillStorage> inner)
      : inner_(std::move(inner)) {}

  std::atomic<int> fail_writes_after{-1};  // -1: never
  std::atomic<bool> fail_reads{false};
  std::atomic<int> writes{0};

  Status Write(const ObjectId& id, std::span<const uint8_t> bytes) override {
    int left = fail_writes_after.load();
    if (left == 0) return ResourceExhausted("injected: no space left on the spill device");
    if (left > 0) fail_writes_after.store(left - 1);
    ++writes;
    return inner_->Write(id, bytes);
  }
  Status Read(const ObjectId& id, std::span<uint8_t> out) override {
    if (fail_reads.load()) return Internal("injected: read error on the spill device");
    return inner_->Read(id, out);
  }
  Status Remove(const ObjectId& id) override { return inner_->Remove(id); }

 private:
  std::shared_ptr<internal::SpillStorage> inner_;
};

// Shares ownership so a test can keep a handle on storage the store owns.
class SharedSpillStorage : public internal::SpillStorage {
 public:
  explicit SharedSpillStorage(std::shared_ptr<internal::SpillStorage> inner)
      : inner_(std::move(inner)) {}
  Status Write(const ObjectId& id, std::span<const uint8_t> b) override {
    return inner_->Write(id, b);
  }
  Status Read(const ObjectId& id, std::span<uint8_t> o) override { return inner_->Read(id, o); }
  Status Remove(const ObjectId& id) override { return inner_->Remove(id); }

 private:
  std::shared_ptr<internal::SpillStorage> inner_;
};

}  // namespace airt::objectstore::testing
