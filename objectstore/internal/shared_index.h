// The object index in shared memory: an open-addressing hash table of IndexSlots with linear
// probing. Any process may look up and pin; only the store process inserts, moves and removes.
// See layout.h for the concurrency rules.
#pragma once

#include <cstdint>
#include <optional>

#include "common/ids.h"
#include "objectstore/internal/layout.h"

namespace airt::objectstore::internal {

// Where a sealed object's bytes are, read while it is pinned (so they cannot change).
struct SlotView {
  uint32_t slot;
  uint64_t offset;
  uint64_t data_size;
  uint32_t metadata_size;
};

class SharedIndex {
 public:
  // `slots` points at `num_slots` (a power of two) slots in the mapping; `header` at its header.
  SharedIndex(ArenaHeader* header, IndexSlot* slots, uint64_t num_slots)
      : header_(header), slots_(slots), mask_(num_slots - 1) {}

  // ---- Any process ----

  enum class PinOutcome {
    kPinned,    // `view` is valid until Unpin(view.slot)
    kAbsent,    // no such object here
    kNotReady,  // being created, spilled, moved or deleted: ask the store
  };
  // Pins a sealed `id` without a round trip; records its access for the LRU order.
  PinOutcome TryPin(const ObjectId& id, SlotView* view);
  // Drops one pin taken by TryPin (or PinSlot). Returns the slot's word after the drop, so the
  // caller can see "last pin of an object whose delete is pending".
  uint64_t Unpin(uint32_t slot);
  // The state of `id`, or nullopt when absent. A hint: it may change at once.
  std::optional<SlotState> StateOf(const ObjectId& id) const;
  // Whether `id` is sealed here (in memory or on disk) and not being deleted. A hint.
  bool ContainsSealed(const ObjectId& id) const;
  ObjectId IdAt(uint32_t slot) const { return ObjectId::FromRaw(slots_[slot].id); }
  uint64_t WordAt(uint32_t slot) const { return slots_[slot].word.load(std::memory_order_acquire); }
  uint64_t LastAccessAt(uint32_t slot) const {
    return slots_[slot].last_access.load(std::memory_order_relaxed);
  }

  // ---- The store process only ----

  // Takes a free slot for `id` (which the caller knows is absent) in state kCreating.
  // The caller guarantees a free slot exists (at most half the slots are ever live).
  uint32_t Insert(const ObjectId& id, uint64_t offset, uint64_t data_size, uint32_t metadata_size);
  // Moves an unpinned slot from `from` to `to`, bumping its generation. False when the slot is
  // pinned or not in `from` (a client pinned it first).
  bool TryTransition(uint32_t slot, SlotState from, SlotState to);
  // Marks a slot as used now in the LRU order.
  void Touch(uint32_t slot);
  // Sets the location of a slot the store holds in kBusy or kCreating.
  void SetLocation(uint32_t slot, uint64_t offset);
  // Marks a pinned sealed slot for deletion at its last unpin. False when it became unpinned
  // (then the caller removes it directly).
  bool MarkDeletePending(uint32_t slot);
  // Frees a slot the store holds in a non-sealed state (or sealed with the pins known gone).
  void Remove(uint32_t slot);
  // Subtracts pins of a client that is gone.
  void DropPins(uint32_t slot, uint32_t count);

 private:
  static uint64_t HashOf(const ObjectId& id);
  std::optional<uint32_t> Find(const ObjectId& id, uint64_t* word) const;

  ArenaHeader* header_;
  IndexSlot* slots_;
  uint64_t mask_;
};

// One client's record of its pins, in shared memory: slot -> count, linear probing with
// backward-shift deletion. Written only by its owner (under the owner's lock); read by the
// store after the owner is gone. Entry: (slot + 1) << 32 | count; 0 is empty.
class PinTable {
 public:
  PinTable(uint64_t* entries, uint64_t num_entries) : entries_(entries), mask_(num_entries - 1) {}

  // False when the table is full (the pin must then be given back).
  bool Add(uint32_t slot);
  // Returns the count left for `slot`; the caller asserts it had one.
  uint32_t Remove(uint32_t slot);
  // Calls fn(slot, count) for each entry.
  template <typename Fn>
  void ForEach(Fn&& fn) const {
    for (uint64_t i = 0; i <= mask_; ++i) {
      if (entries_[i] != 0)
        fn(static_cast<uint32_t>((entries_[i] >> 32) - 1), static_cast<uint32_t>(entries_[i]));
    }
  }
  void Clear();

 private:
  uint64_t* entries_;
  uint64_t mask_;
};

}  // namespace airt::objectstore::internal
