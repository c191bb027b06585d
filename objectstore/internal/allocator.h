// Best-fit allocator over the data arena's byte range, with coalescing of neighbouring free
// blocks. Lives in the store process only (clients never allocate). Not thread-safe: the store's
// loop thread owns it. Offsets and sizes are multiples of kObjectAlignment.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace airt::objectstore::internal {

class ArenaAllocator {
 public:
  // Manages [base, base + capacity); both multiples of kObjectAlignment.
  ArenaAllocator(uint64_t base, uint64_t capacity);

  // The rounded size a request of `size` bytes takes (at least one alignment unit).
  static uint64_t Footprint(uint64_t size);

  // The offset of a block of Footprint(size) bytes, or nullopt when no free block is big enough.
  std::optional<uint64_t> Allocate(uint64_t size);
  // Returns a block from Allocate(size). Freeing what was not allocated is our own bug (checked).
  void Free(uint64_t offset, uint64_t size);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }
  uint64_t free_bytes() const { return capacity_ - used_; }
  uint64_t largest_free_block() const;
  size_t free_block_count() const { return by_offset_.size(); }

 private:
  void Insert(uint64_t offset, uint64_t size);
  void Erase(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t base_;
  uint64_t capacity_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> by_offset_;           // offset -> size
  std::set<std::pair<uint64_t, uint64_t>> by_size_;  // (size, offset)
};

}  // namespace airt::objectstore::internal
