#include "objectstore/internal/shared_index.h"

#include <cstring>

#include "common/logging.h"

namespace airt::objectstore::internal {

uint64_t SharedIndex::HashOf(const ObjectId& id) {
  uint64_t a, b, c;
  uint32_t d;
  std::memcpy(&a, id.data(), 8);
  std::memcpy(&b, id.data() + 8, 8);
  std::memcpy(&c, id.data() + 16, 8);
  std::memcpy(&d, id.data() + 24, 4);
  uint64_t h = a * 0x9e3779b97f4a7c15ull;
  h ^= (b * 0xc2b2ae3d27d4eb4full) >> 7 | (b * 0xc2b2ae3d27d4eb4full) << 57;
  h ^= (c * 0x165667b19e3779f9ull) >> 23 | (c * 0x165667b19e3779f9ull) << 41;
  h ^= d * 0x27d4eb2f165667c5ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return h;
}

std::optional<uint32_t> SharedIndex::Find(const ObjectId& id, uint64_t* word) const {
  uint64_t start = HashOf(id) & mask_;
  for (uint64_t i = 0; i <= mask_; ++i) {
    uint32_t s = static_cast<uint32_t>((start + i) & mask_);
    const IndexSlot& slot = slots_[s];
    uint64_t w = slot.word.load(std::memory_order_acquire);
    SlotState state = SlotWord::State(w);
    if (state == SlotState::kEmpty) return std::nullopt;
    if (state == SlotState::kTombstone) continue;
    if (std::memcmp(slot.id, id.data(), kIdSize) != 0) continue;
    // A torn read of a slot being reused is caught by the caller's CAS on `w`.
    *word = w;
    return s;
  }
  return std::nullopt;
}

SharedIndex::PinOutcome SharedIndex::TryPin(const ObjectId& id, SlotView* view) {
  for (;;) {
    uint64_t w;
    std::optional<uint32_t> s = Find(id, &w);
    if (!s) return PinOutcome::kAbsent;
    IndexSlot& slot = slots_[*s];
    if (SlotWord::State(w) != SlotState::kSealed || SlotWord::DeletePending(w)) {
      return PinOutcome::kNotReady;
    }
    SlotView v{*s, slot.offset, slot.data_size, slot.metadata_size};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.word.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel)) {
      // The word (and so the generation) was unchanged while we read the fields: they are this
      // object's, and stay so while pinned.
      if (std::memcmp(slot.id, id.data(), kIdSize) != 0) {  // reused between Find and CAS
        Unpin(*s);
        continue;
      }
      slot.last_access.store(header_->access_clock.fetch_add(1, std::memory_order_relaxed),
                             std::memory_order_relaxed);
      *view = v;
      return PinOutcome::kPinned;
    }
    // Lost a race with another pin or a store transition: look again.
  }
}

uint64_t SharedIndex::Unpin(uint32_t slot) {
  uint64_t before = slots_[slot].word.fetch_sub(1, std::memory_order_acq_rel);
  AIRT_CHECK(SlotWord::Pins(before) > 0) << "unpin of unpinned slot " << slot;
  return before - 1;
}

std::optional<SlotState> SharedIndex::StateOf(const ObjectId& id) const {
  uint64_t w;
  if (!Find(id, &w)) return std::nullopt;
  return SlotWord::State(w);
}

bool SharedIndex::ContainsSealed(const ObjectId& id) const {
  uint64_t w;
  if (!Find(id, &w) || SlotWord::DeletePending(w)) return false;
  SlotState state = SlotWord::State(w);
  return state == SlotState::kSealed || state == SlotState::kSpilled || state == SlotState::kBusy;
}

uint32_t SharedIndex::Insert(const ObjectId& id, uint64_t offset, uint64_t data_size,
                             uint32_t metadata_size) {
  uint64_t start = HashOf(id) & mask_;
  for (uint64_t i = 0; i <= mask_; ++i) {
    uint32_t s = static_cast<uint32_t>((start + i) & mask_);
    IndexSlot& slot = slots_[s];
    uint64_t w = slot.word.load(std::memory_order_relaxed);
    SlotState state = SlotWord::State(w);
    if (state != SlotState::kEmpty && state != SlotState::kTombstone) continue;
    uint32_t gen = SlotWord::Generation(w) + 1;
    // Seqlock write: the slot's last word change is ordered before these field writes, so a
    // reader that sees new fields fails its CAS on the old word.
    std::atomic_thread_fence(std::memory_order_release);
    std::memcpy(slot.id, id.data(), kIdSize);
    slot.offset = offset;
    slot.data_size = data_size;
    slot.metadata_size = metadata_size;
    slot.last_access.store(header_->access_clock.fetch_add(1, std::memory_order_relaxed),
                           std::memory_order_relaxed);
    slot.word.store(SlotWord::Make(SlotState::kCreating, gen, 0), std::memory_order_release);
    return s;
  }
  AIRT_CHECK(false) << "object index full: the store admits at most half its slots";
  return 0;
}

bool SharedIndex::TryTransition(uint32_t slot, SlotState from, SlotState to) {
  uint64_t w = slots_[slot].word.load(std::memory_order_acquire);
  if (SlotWord::State(w) != from || SlotWord::Pins(w) != 0) return false;
  uint64_t next = SlotWord::Make(to, SlotWord::Generation(w) + 1, 0, SlotWord::DeletePending(w));
  return slots_[slot].word.compare_exchange_strong(w, next, std::memory_order_acq_rel);
}

void SharedIndex::Touch(uint32_t slot) {
  slots_[slot].last_access.store(header_->access_clock.fetch_add(1, std::memory_order_relaxed),
                                 std::memory_order_relaxed);
}

void SharedIndex::SetLocation(uint32_t slot, uint64_t offset) {
  SlotState state = SlotWord::State(slots_[slot].word.load(std::memory_order_relaxed));
  AIRT_CHECK(state == SlotState::kBusy || state == SlotState::kCreating)
      << "moving slot " << slot << " in state " << static_cast<int>(state);
  std::atomic_thread_fence(std::memory_order_release);
  slots_[slot].offset = offset;
}

bool SharedIndex::MarkDeletePending(uint32_t slot) {
  uint64_t w = slots_[slot].word.load(std::memory_order_acquire);
  while (SlotWord::Pins(w) != 0) {
    if (slots_[slot].word.compare_exchange_weak(w, w | SlotWord::kDeletePending,
                                                std::memory_order_acq_rel)) {
      return true;
    }
  }
  return false;
}

void SharedIndex::Remove(uint32_t slot) {
  uint64_t w = slots_[slot].word.load(std::memory_order_acquire);
  AIRT_CHECK(SlotWord::Pins(w) == 0) << "removing pinned slot " << slot;
  uint32_t gen = SlotWord::Generation(w) + 1;
  slots_[slot].word.store(SlotWord::Make(SlotState::kTombstone, gen, 0), std::memory_order_release);
  // A tombstone at the end of a run can become empty: no probe needs to pass it. Walk back
  // while that holds, so deletes do not leave long runs for misses to scan.
  uint32_t s = slot;
  while (SlotWord::State(slots_[(s + 1) & mask_].word.load(std::memory_order_relaxed)) ==
             SlotState::kEmpty &&
         SlotWord::State(slots_[s].word.load(std::memory_order_relaxed)) == SlotState::kTombstone) {
    uint64_t ws = slots_[s].word.load(std::memory_order_relaxed);
    slots_[s].word.store(SlotWord::Make(SlotState::kEmpty, SlotWord::Generation(ws) + 1, 0),
                         std::memory_order_release);
    s = static_cast<uint32_t>((s + mask_) & mask_);
    if (s == slot) break;
  }
}

void SharedIndex::DropPins(uint32_t slot, uint32_t count) {
  uint64_t w = slots_[slot].word.load(std::memory_order_acquire);
  for (;;) {
    uint32_t pins = SlotWord::Pins(w);
    uint32_t drop = count < pins ? count : pins;
    if (slots_[slot].word.compare_exchange_weak(w, w - drop, std::memory_order_acq_rel)) return;
  }
}

bool PinTable::Add(uint32_t slot) {
  uint64_t key = static_cast<uint64_t>(slot) + 1;
  uint64_t start = (key * 0x9e3779b97f4a7c15ull >> 32) & mask_;
  for (uint64_t i = 0; i <= mask_; ++i) {
    uint64_t& e = entries_[(start + i) & mask_];
    if (e == 0) {
      e = key << 32 | 1;
      return true;
    }
    if ((e >> 32) == key) {
      ++e;
      return true;
    }
  }
  return false;
}

uint32_t PinTable::Remove(uint32_t slot) {
  uint64_t key = static_cast<uint64_t>(slot) + 1;
  uint64_t start = (key * 0x9e3779b97f4a7c15ull >> 32) & mask_;
  for (uint64_t i = 0; i <= mask_; ++i) {
    uint64_t pos = (start + i) & mask_;
    uint64_t& e = entries_[pos];
    AIRT_CHECK(e != 0) << "release of slot " << slot << " that this client never pinned";
    if ((e >> 32) != key) continue;
    if (static_cast<uint32_t>(e) > 1) return static_cast<uint32_t>(--e);
    // Backward-shift deletion keeps every entry reachable from its home position.
    uint64_t hole = pos;
    for (uint64_t j = (hole + 1) & mask_; entries_[j] != 0; j = (j + 1) & mask_) {
      uint64_t home = ((entries_[j] >> 32) * 0x9e3779b97f4a7c15ull >> 32) & mask_;
      // Move entry j into the hole unless its home lies cyclically in (hole, j].
      bool home_in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
      if (!home_in_range) {
        entries_[hole] = entries_[j];
        hole = j;
      }
    }
    entries_[hole] = 0;
    return 0;
  }
  AIRT_CHECK(false) << "release of slot " << slot << " that this client never pinned";
  return 0;
}

void PinTable::Clear() { std::memset(entries_, 0, (mask_ + 1) * sizeof(uint64_t)); }

}  // namespace airt::objectstore::internal
