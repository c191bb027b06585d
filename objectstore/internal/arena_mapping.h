// The node's shared-memory file: created once by the store (a memfd), passed to each client over
// its socket, and mapped once per process. See layout.h for what lies where.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "common/status.h"
#include "common/unique_fd.h"
#include "objectstore/internal/layout.h"

namespace airt::objectstore::internal {

class ArenaMapping {
 public:
  // Store side: a new memfd of layout.file_size, mapped, with its header written.
  // kResourceExhausted when the memory cannot be reserved.
  static Result<ArenaMapping> Create(const Layout& layout);
  // Client side: maps `fd` and checks that its header matches the file. kInternal when the file
  // is not a store arena of this version.
  static Result<ArenaMapping> Attach(UniqueFd fd);

  ArenaMapping(ArenaMapping&& other) noexcept;
  ArenaMapping& operator=(ArenaMapping&& other) noexcept;
  ~ArenaMapping();

  int fd() const { return fd_.get(); }
  uint8_t* base() const { return base_; }
  uint64_t size() const { return size_; }
  ArenaHeader* header() const { return reinterpret_cast<ArenaHeader*>(base_); }
  IndexSlot* slots() const { return reinterpret_cast<IndexSlot*>(base_ + header()->index_offset); }
  uint64_t* PinTableOf(uint32_t client) const {
    return reinterpret_cast<uint64_t*>(base_ + header()->pins_offset) +
           uint64_t{client} * header()->pin_slots_per_client;
  }

  // Faults [offset, offset + length) into this process's page tables as writable, without
  // changing a byte (MADV_POPULATE_WRITE), so later first touches cost nothing.
  void Populate(uint64_t offset, uint64_t length) const;

 private:
  ArenaMapping(UniqueFd fd, uint8_t* base, uint64_t size)
      : fd_(std::move(fd)), base_(base), size_(size) {}

  UniqueFd fd_;
  uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
};

// Populates the index and the data arena of a mapping on a background thread, in chunks, so a
// process starts at once and its first writes into the arena do not pay for page faults. The pin
// tables are left to fill on use: most of them stay empty. Stops early when destroyed.
class BackgroundPopulator {
 public:
  // `data` false: the header and index only (a process that reads few objects, e.g. a worker,
  // maps the data pages it touches as it touches them).
  explicit BackgroundPopulator(const ArenaMapping* mapping, bool data = true);
  // The bytes it populates in all.
  static uint64_t BytesToPopulate(const ArenaHeader& h) {
    return h.pins_offset + (h.file_size - h.data_offset);
  }
  ~BackgroundPopulator();
  BackgroundPopulator(const BackgroundPopulator&) = delete;
  BackgroundPopulator& operator=(const BackgroundPopulator&) = delete;

  // Blocks until the whole mapping is populated.
  void Wait();
  uint64_t done_bytes() const { return done_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> done_{0};
  std::thread thread_;
};

}  // namespace airt::objectstore::internal
