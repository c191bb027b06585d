// The store's object table: every object's state, the arena's allocator, eviction, spilling and
// restoring, fallback files for what the arena cannot hold, and the undoing of a departed
// client's pins. Pure logic over the mapping, without sockets. Confined to the store's loop thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "objectstore/internal/allocator.h"
#include "objectstore/internal/arena_mapping.h"
#include "objectstore/internal/fallback_files.h"
#include "objectstore/internal/shared_index.h"
#include "objectstore/internal/spill_storage.h"
#include "objectstore/object_store.h"

namespace airt::objectstore::internal {

class ObjectTable {
 public:
  // `arena` must outlive the table. `spill` may be null: then primary copies are never spilled.
  // `fallback` may be null: then an object that does not fit in the arena is refused.
  ObjectTable(const ArenaMapping* arena, std::unique_ptr<SpillStorage> spill, uint64_t max_objects,
              std::unique_ptr<FallbackFiles> fallback = nullptr);

  // Reserves space for `id`, evicting and spilling as needed, else in a fallback file; returns
  // the file offset of its first byte, or kFallbackBit | the fallback file's number. See
  // StoreClient::Create for the errors.
  Result<uint64_t> Create(const ObjectId& id, uint64_t data_size, uint64_t metadata_size,
                          bool secondary, uint32_t client, std::string owner = {});
  Status Seal(const ObjectId& id, uint32_t client);
  Status Abort(const ObjectId& id, uint32_t client);
  Status Delete(const ObjectId& id);
  // Deletes every sealed object of `job` (the job's 4 bytes of each id's TaskId's ActorId) as
  // Delete does: spilled copies go from disk, pinned ones when their last pin goes. Objects still
  // being created, or already being deleted, are left alone (a creator's unsealed objects go when
  // it disconnects). Returns how many it deleted or marked.
  uint64_t DeleteJob(const JobId& job);

  // kOk when `id` is sealed and in memory (restoring it from disk first if it was spilled, into a
  // fallback file when the arena has no room); kNotFound when it is absent or still being
  // created (the caller may wait for its Seal); other errors when it cannot be restored. The
  // objects in `keep` (those one Get restored before this one) are not spilled to make room.
  Status MakeReadable(const ObjectId& id, const std::unordered_set<ObjectId>* keep = nullptr);

  // A client dropped the last pin of `id` while its delete was pending.
  void OnReleased(const ObjectId& id);
  // Prepares `client`'s pin table for a new client in that slot.
  void ClearPinTable(uint32_t client);
  // Undoes the pins `client` recorded and aborts what it was creating.
  void OnClientGone(uint32_t client);

  // The sealed primary copies here (spilled ones too; not those being deleted), in no order, as
  // many as fit in `max_bytes` of their ids and owners; `more` says whether some were left out.
  std::vector<PrimaryCopy> Primaries(size_t max_bytes, bool* more) const;
  // Makes sealed `id` the primary copy owned by `owner` (a pulled copy kept for a node that
  // leaves). kNotFound: not here or not sealed; kFailedPrecondition: being deleted.
  Status MakePrimary(const ObjectId& id, std::string owner);

  StoreStats Stats() const;

 private:
  struct Entry {
    uint32_t slot;
    uint64_t data_size;
    uint64_t metadata_size;
    uint64_t offset = 0;  // meaningful unless spilled; kFallbackBit | number: a fallback file
    bool secondary = false;
    bool creating = true;
    bool spilled = false;
    bool delete_pending = false;
    uint32_t creator = 0;  // the client creating it, while `creating`
    std::string owner;     // a primary copy's owner, as its creator named it ("" when none)
  };
  using EntryMap = std::unordered_map<ObjectId, Entry>;

  uint64_t FootprintOf(const Entry& e) const {
    return ArenaAllocator::Footprint(e.data_size + e.metadata_size);
  }
  // Finds room for `bytes`, evicting secondary copies and then spilling primary ones (LRU
  // order), never touching pinned or unsealed objects, fallback ones or those in `keep`. Checks
  // that enough can be reclaimed before touching anything.
  Result<uint64_t> Allocate(uint64_t bytes, const ObjectId& for_id,
                            const std::unordered_set<ObjectId>* keep = nullptr);
  // Allocate, and when the arena cannot take `bytes`, a fallback file (evicting unpinned
  // secondary copies held in fallback files, LRU first, when those are full). The error names
  // the size, the store's capacity and use, and the fallback folder.
  Result<uint64_t> AllocateAnywhere(uint64_t bytes, const ObjectId& for_id,
                                    const std::unordered_set<ObjectId>* keep = nullptr);
  // Drops the arena block or the fallback file at `offset` of an object of `bytes`.
  void FreeLocation(const ObjectId& id, uint64_t offset, uint64_t bytes);
  // Evicts the least recently used unpinned secondary copy held in a fallback file; false when
  // there is none.
  bool EvictOneFallbackCopy();
  // Frees an unpinned sealed object's memory and its index slot.
  void Erase(EntryMap::iterator it);
  // Writes an unpinned sealed primary copy to disk and frees its memory. False when it got
  // pinned first; a Status when the write failed (the object stays in memory).
  Result<bool> Spill(EntryMap::iterator it);
  // Finishes a pending delete when the pins are gone; true when it did.
  bool FinishDeleteIfUnpinned(EntryMap::iterator it);

  const ArenaMapping* arena_;
  SharedIndex index_;
  ArenaAllocator allocator_;
  std::unique_ptr<SpillStorage> spill_;
  uint64_t max_objects_;
  std::unique_ptr<FallbackFiles> fallback_;
  EntryMap entries_;
  std::unordered_map<uint32_t, std::unordered_set<ObjectId>> creating_by_client_;

  uint64_t num_creating_ = 0;
  uint64_t num_spilled_ = 0;
  uint64_t spilled_bytes_ = 0;
  uint64_t total_evicted_ = 0;
  uint64_t total_spilled_ = 0;
  uint64_t total_restored_ = 0;
  uint64_t total_fallback_ = 0;
  uint64_t total_sealed_bytes_ = 0;  // data and metadata sealed, ever
  uint64_t total_pulled_bytes_ = 0;  // of those, secondary copies
};

}  // namespace airt::objectstore::internal
