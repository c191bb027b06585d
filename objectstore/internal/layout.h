// The layout of a node's shared-memory file, the contract between the store process and every
// client that maps it. One file, created once by the store and mapped once by each client:
//
//   [ArenaHeader, 4 KiB][index: index_slots x IndexSlot][pin tables: max_clients x
//   pin_slots_per_client x uint64][data arena: data_capacity bytes, page aligned]
//
// Concurrency: the store process is the only writer of everything but two fields. Clients
//   - pin and unpin sealed objects by compare-and-swap on IndexSlot::word (pins never change a
//     slot's generation; the store only reuses or moves a slot whose pin count is 0, by CAS);
//   - write their own pin table (one per client slot), which the store reads after the client
//     is gone to undo its pins.
// A reader follows the seqlock rule: load the word (acquire), read the fields, then CAS on the
// word it loaded; success proves the fields belonged to that generation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace airt::objectstore::internal {

inline constexpr uint64_t kArenaMagic = 0x3165726f74737461ull;  // "atstore1"
inline constexpr uint32_t kLayoutVersion = 2;
inline constexpr uint64_t kPageSize = 4096;
inline constexpr uint64_t kObjectAlignment = 64;

// IndexSlot::offset with this bit set: the object is not in the arena but in fallback file number
// (offset & ~kFallbackBit) of the store's fallback folder (fallback_files.h).
inline constexpr uint64_t kFallbackBit = 1ull << 63;
inline constexpr bool IsFallback(uint64_t offset) { return (offset & kFallbackBit) != 0; }
inline constexpr uint64_t FallbackNumber(uint64_t offset) { return offset & ~kFallbackBit; }

inline constexpr uint64_t AlignUp(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

struct ArenaHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t max_clients;
  uint64_t index_offset;
  uint64_t index_slots;  // a power of two
  uint64_t pins_offset;
  uint64_t pin_slots_per_client;  // a power of two
  uint64_t data_offset;
  uint64_t data_capacity;
  uint64_t file_size;
  // Ticks once per local read; IndexSlot::last_access takes its value, giving the LRU order.
  alignas(64) std::atomic<uint64_t> access_clock;
};
static_assert(sizeof(ArenaHeader) <= kPageSize);

enum class SlotState : uint8_t {
  kEmpty = 0,      // never used: ends a probe sequence
  kTombstone = 1,  // was used: a probe goes on past it
  kCreating = 2,   // allocated, being written by its creator
  kSealed = 3,     // immutable, readable, pinnable
  kSpilled = 4,    // the bytes live in the spill directory; a Get restores them
  kBusy = 5,       // the store is moving it (evicting, spilling): not pinnable
};

// IndexSlot::word: [60] delete pending, [59..56] state, [55..32] generation, [31..0] pins.
struct SlotWord {
  static constexpr uint64_t kDeletePending = 1ull << 60;
  static constexpr uint32_t kGenerationMask = 0xffffff;

  static uint32_t Pins(uint64_t w) { return static_cast<uint32_t>(w); }
  static uint32_t Generation(uint64_t w) { return (w >> 32) & kGenerationMask; }
  static SlotState State(uint64_t w) { return static_cast<SlotState>((w >> 56) & 0xf); }
  static bool DeletePending(uint64_t w) { return (w & kDeletePending) != 0; }
  static uint64_t Make(SlotState state, uint32_t generation, uint32_t pins,
                       bool delete_pending = false) {
    return (delete_pending ? kDeletePending : 0) | static_cast<uint64_t>(state) << 56 |
           static_cast<uint64_t>(generation & kGenerationMask) << 32 | pins;
  }
};

inline constexpr size_t kIdSize = 28;

struct alignas(64) IndexSlot {
  std::atomic<uint64_t> word;
  uint8_t id[kIdSize];
  uint32_t metadata_size;
  uint64_t offset;     // of the object's first byte, from the start of the file (or kFallbackBit)
  uint64_t data_size;  // the metadata follows the data
  std::atomic<uint64_t> last_access;
};
static_assert(sizeof(IndexSlot) == 64);

// Where each region starts, computed the same way by the store from its options and checked by
// each client against the header and the file's size.
struct Layout {
  uint64_t index_offset;
  uint64_t index_slots;
  uint64_t pins_offset;
  uint64_t pin_slots_per_client;
  uint32_t max_clients;
  uint64_t data_offset;
  uint64_t data_capacity;
  uint64_t file_size;

  // index_slots is the power of two at or above 2 x max_objects (load factor <= 1/2).
  static Layout Compute(uint64_t data_capacity, uint64_t max_objects, uint32_t max_clients,
                        uint64_t pin_slots_per_client);
};

inline uint64_t NextPowerOfTwo(uint64_t n) {
  uint64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

inline Layout Layout::Compute(uint64_t data_capacity, uint64_t max_objects, uint32_t max_clients,
                              uint64_t pin_slots_per_client) {
  Layout l{};
  l.index_offset = kPageSize;
  l.index_slots = NextPowerOfTwo(2 * (max_objects ? max_objects : 1));
  l.pins_offset = AlignUp(l.index_offset + l.index_slots * sizeof(IndexSlot), kPageSize);
  l.pin_slots_per_client = NextPowerOfTwo(pin_slots_per_client ? pin_slots_per_client : 1);
  l.max_clients = max_clients;
  l.data_offset = AlignUp(
      l.pins_offset + uint64_t{max_clients} * l.pin_slots_per_client * sizeof(uint64_t), kPageSize);
  l.data_capacity = AlignUp(data_capacity, kPageSize);
  l.file_size = l.data_offset + l.data_capacity;
  return l;
}

}  // namespace airt::objectstore::internal
