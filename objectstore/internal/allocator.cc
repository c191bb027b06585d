#include "objectstore/internal/allocator.h"

#include <iterator>

#include "common/logging.h"
#include "objectstore/internal/layout.h"

namespace airt::objectstore::internal {

ArenaAllocator::ArenaAllocator(uint64_t base, uint64_t capacity)
    : base_(base), capacity_(capacity) {
  AIRT_CHECK(base % kObjectAlignment == 0 && capacity % kObjectAlignment == 0);
  if (capacity > 0) Insert(base, capacity);
}

uint64_t ArenaAllocator::Footprint(uint64_t size) {
  if (size == 0) return kObjectAlignment;
  // Saturates instead of wrapping, so an absurd size can never look small.
  if (size > ~uint64_t{0} - kObjectAlignment) return ~uint64_t{0};
  return AlignUp(size, kObjectAlignment);
}

std::optional<uint64_t> ArenaAllocator::Allocate(uint64_t size) {
  uint64_t need = Footprint(size);
  auto fit = by_size_.lower_bound({need, 0});
  if (fit == by_size_.end()) return std::nullopt;
  auto [block_size, offset] = *fit;
  Erase(by_offset_.find(offset));
  if (block_size > need) Insert(offset + need, block_size - need);
  used_ += need;
  return offset;
}

void ArenaAllocator::Free(uint64_t offset, uint64_t size) {
  uint64_t n = Footprint(size);
  AIRT_CHECK(offset >= base_ && offset + n <= base_ + capacity_)
      << "free of [" << offset << ", +" << n << ") outside the arena";
  auto next = by_offset_.lower_bound(offset);
  AIRT_CHECK(next == by_offset_.end() || next->first >= offset + n) << "double free at " << offset;
  if (next != by_offset_.begin()) {
    auto prev = std::prev(next);
    AIRT_CHECK(prev->first + prev->second <= offset) << "double free at " << offset;
  }
  used_ -= n;
  uint64_t start = offset, end = offset + n;
  if (next != by_offset_.end() && next->first == end) {
    end += next->second;
    auto after = std::next(next);
    Erase(next);
    next = after;
  }
  if (next != by_offset_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      Erase(prev);
    }
  }
  Insert(start, end - start);
}

uint64_t ArenaAllocator::largest_free_block() const {
  return by_size_.empty() ? 0 : by_size_.rbegin()->first;
}

void ArenaAllocator::Insert(uint64_t offset, uint64_t size) {
  by_offset_.emplace(offset, size);
  by_size_.emplace(size, offset);
}

void ArenaAllocator::Erase(std::map<uint64_t, uint64_t>::iterator it) {
  by_size_.erase({it->second, it->first});
  by_offset_.erase(it);
}

}  // namespace airt::objectstore::internal
