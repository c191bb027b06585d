#include "objectstore/internal/object_table.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "common/logging.h"

namespace airt::objectstore::internal {
namespace {

std::string Bytes(uint64_t n) { return std::to_string(n) + " bytes"; }

}  // namespace

ObjectTable::ObjectTable(const ArenaMapping* arena, std::unique_ptr<SpillStorage> spill,
                         uint64_t max_objects, std::unique_ptr<FallbackFiles> fallback)
    : arena_(arena),
      index_(arena->header(), arena->slots(), arena->header()->index_slots),
      allocator_(arena->header()->data_offset, arena->header()->data_capacity),
      spill_(std::move(spill)),
      max_objects_(max_objects),
      fallback_(std::move(fallback)) {}

Result<uint64_t> ObjectTable::Create(const ObjectId& id, uint64_t data_size, uint64_t metadata_size,
                                     bool secondary, uint32_t client, std::string owner) {
  if (metadata_size > std::numeric_limits<uint32_t>::max()) {
    return InvalidArgument("metadata of object " + id.Hex() + " is " + Bytes(metadata_size) +
                           ", over the 4 GiB limit");
  }
  if (data_size > std::numeric_limits<uint64_t>::max() - metadata_size) {
    return InvalidArgument("size of object " + id.Hex() + " overflows");
  }
  if (auto it = entries_.find(id); it != entries_.end()) {
    const char* what = it->second.creating         ? "being created"
                       : it->second.delete_pending ? "being deleted"
                                                   : "sealed";
    return AlreadyExists("object " + id.Hex() + " already exists (" + what + ")");
  }
  if (entries_.size() >= max_objects_) {
    return ResourceExhausted("the store holds its maximum of " + std::to_string(max_objects_) +
                             " objects; cannot create " + id.Hex());
  }
  uint64_t size = data_size + metadata_size;
  AIRT_ASSIGN_OR_RETURN(uint64_t offset, AllocateAnywhere(size, id));
  uint32_t slot = index_.Insert(id, offset, data_size, static_cast<uint32_t>(metadata_size));
  Entry e{slot, data_size, metadata_size, offset, secondary, true, false, false, client,
          secondary ? std::string() : std::move(owner)};
  entries_.emplace(id, std::move(e));
  creating_by_client_[client].insert(id);
  ++num_creating_;
  return offset;
}

Status ObjectTable::Seal(const ObjectId& id, uint32_t client) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return NotFound("seal of object " + id.Hex() + ", which is not here");
  Entry& e = it->second;
  if (!e.creating) return FailedPrecondition("object " + id.Hex() + " is sealed already");
  if (e.creator != client) {
    return FailedPrecondition("object " + id.Hex() + " is being created by another client");
  }
  AIRT_CHECK(index_.TryTransition(e.slot, SlotState::kCreating, SlotState::kSealed));
  e.creating = false;
  --num_creating_;
  creating_by_client_[client].erase(id);
  total_sealed_bytes_ += e.data_size + e.metadata_size;
  if (e.secondary) total_pulled_bytes_ += e.data_size + e.metadata_size;
  return Status::Ok();
}

Status ObjectTable::Abort(const ObjectId& id, uint32_t client) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return NotFound("abort of object " + id.Hex() + ", which is not here");
  Entry& e = it->second;
  if (!e.creating)
    return FailedPrecondition("object " + id.Hex() + " is sealed; delete it instead");
  if (e.creator != client) {
    return FailedPrecondition("object " + id.Hex() + " is being created by another client");
  }
  creating_by_client_[client].erase(id);
  --num_creating_;
  Erase(it);
  return Status::Ok();
}

Status ObjectTable::Delete(const ObjectId& id) {
  auto it = entries_.find(id);
  if (it == entries_.end()) return NotFound("delete of object " + id.Hex() + ", which is not here");
  Entry& e = it->second;
  if (e.creating) {
    return FailedPrecondition("object " + id.Hex() + " is being created; abort it instead");
  }
  if (e.spilled) {
    Status s = spill_->Remove(id);
    if (!s.ok())
      AIRT_LOG(WARNING) << "deleting spilled object " << id.Hex() << ": " << s.ToString();
    --num_spilled_;
    spilled_bytes_ -= e.data_size + e.metadata_size;
    Erase(it);
    return Status::Ok();
  }
  e.delete_pending = true;
  if (!FinishDeleteIfUnpinned(it) && !index_.MarkDeletePending(e.slot)) {
    // The last pin went between the two looks.
    AIRT_CHECK(FinishDeleteIfUnpinned(it));
  }
  return Status::Ok();
}

uint64_t ObjectTable::DeleteJob(const JobId& job) {
  std::vector<ObjectId> ids;
  for (const auto& [id, e] : entries_) {
    if (!e.creating && !e.delete_pending && id.Task().Job() == job) ids.push_back(id);
  }
  for (const ObjectId& id : ids) {
    Status deleted = Delete(id);
    AIRT_CHECK(deleted.ok()) << deleted.ToString();  // sealed and here: Delete cannot refuse
  }
  return ids.size();
}

bool ObjectTable::FinishDeleteIfUnpinned(EntryMap::iterator it) {
  if (!index_.TryTransition(it->second.slot, SlotState::kSealed, SlotState::kBusy)) return false;
  Erase(it);
  return true;
}

void ObjectTable::OnReleased(const ObjectId& id) {
  auto it = entries_.find(id);
  if (it != entries_.end() && it->second.delete_pending) FinishDeleteIfUnpinned(it);
}

Status ObjectTable::MakeReadable(const ObjectId& id, const std::unordered_set<ObjectId>* keep) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.creating || it->second.delete_pending) {
    return NotFound("object " + id.Hex() + " is not here");
  }
  Entry& e = it->second;
  if (!e.spilled) return Status::Ok();
  uint64_t size = e.data_size + e.metadata_size;
  AIRT_ASSIGN_OR_RETURN(uint64_t offset, AllocateAnywhere(size, id, keep));
  // Allocate may have spilled or evicted others, never this one (it is not in memory).
  it = entries_.find(id);
  AIRT_CHECK(it != entries_.end());
  Entry& entry = it->second;
  AIRT_CHECK(index_.TryTransition(entry.slot, SlotState::kSpilled, SlotState::kBusy));
  Status read;
  if (IsFallback(offset)) {
    // The store maps the fallback file only to fill it; readers map it themselves.
    Result<FallbackMapping> file = FallbackMapping::Map(
        FallbackPath(fallback_->dir(), id, FallbackNumber(offset)), size, /*writable=*/true);
    read = file.ok() ? spill_->Read(id, std::span<uint8_t>(file->data(), size)) : file.status();
  } else {
    read = spill_->Read(id, std::span<uint8_t>(arena_->base() + offset, size));
  }
  if (!read.ok()) {
    FreeLocation(id, offset, size);
    AIRT_CHECK(index_.TryTransition(entry.slot, SlotState::kBusy, SlotState::kSpilled));
    return read.WithContext("restoring object " + id.Hex() + " from disk");
  }
  index_.SetLocation(entry.slot, offset);
  index_.Touch(entry.slot);  // the reader pins it next; evict others first
  entry.offset = offset;
  entry.spilled = false;
  --num_spilled_;
  spilled_bytes_ -= size;
  ++total_restored_;
  AIRT_CHECK(index_.TryTransition(entry.slot, SlotState::kBusy, SlotState::kSealed));
  Status removed = spill_->Remove(id);
  if (!removed.ok()) AIRT_LOG(WARNING) << removed.ToString();
  return Status::Ok();
}

Result<uint64_t> ObjectTable::AllocateAnywhere(uint64_t bytes, const ObjectId& for_id,
                                               const std::unordered_set<ObjectId>* keep) {
  Result<uint64_t> in_arena = Allocate(bytes, for_id, keep);
  if (in_arena.ok() || fallback_ == nullptr ||
      in_arena.status().code() != Code::kResourceExhausted) {
    return in_arena;
  }
  Result<uint64_t> number = fallback_->Create(for_id, bytes);
  while (!number.ok() && number.status().code() == Code::kResourceExhausted &&
         EvictOneFallbackCopy()) {
    number = fallback_->Create(for_id, bytes);
  }
  if (number.ok()) {
    ++total_fallback_;
    return kFallbackBit | *number;
  }
  bool larger = ArenaAllocator::Footprint(bytes) > allocator_.capacity();
  return ResourceExhausted(
      "object " + for_id.Hex() + " of " + Bytes(bytes) +
      " cannot be stored: the store's capacity is " + Bytes(allocator_.capacity()) + " with " +
      Bytes(allocator_.used()) + " in use, " +
      (larger ? "less than the object" : "and it does not fit even after eviction and spilling") +
      "; fallback memory in " + fallback_->dir() + " refused it: " + number.status().message());
}

bool ObjectTable::EvictOneFallbackCopy() {
  std::optional<std::pair<uint64_t, ObjectId>> oldest;
  for (const auto& [id, e] : entries_) {
    if (e.creating || e.spilled || !e.secondary || !IsFallback(e.offset)) continue;
    uint64_t word = index_.WordAt(e.slot);
    if (SlotWord::State(word) != SlotState::kSealed || SlotWord::Pins(word) != 0) continue;
    uint64_t age = index_.LastAccessAt(e.slot);
    if (!oldest || age < oldest->first) oldest.emplace(age, id);
  }
  if (!oldest) return false;
  auto it = entries_.find(oldest->second);
  if (!index_.TryTransition(it->second.slot, SlotState::kSealed, SlotState::kBusy)) return false;
  Erase(it);
  ++total_evicted_;
  return true;
}

void ObjectTable::FreeLocation(const ObjectId& id, uint64_t offset, uint64_t bytes) {
  if (IsFallback(offset)) {
    fallback_->Remove(id, FallbackNumber(offset), bytes);
  } else {
    allocator_.Free(offset, bytes);
  }
}

Result<uint64_t> ObjectTable::Allocate(uint64_t bytes, const ObjectId& for_id,
                                       const std::unordered_set<ObjectId>* keep) {
  uint64_t need = ArenaAllocator::Footprint(bytes);
  if (need > allocator_.capacity()) {
    return ResourceExhausted("object " + for_id.Hex() + " of " + Bytes(bytes) +
                             " is larger than the store's capacity of " +
                             Bytes(allocator_.capacity()));
  }
  if (auto offset = allocator_.Allocate(bytes)) return *offset;

  // Candidates: sealed, in memory, unpinned. Secondary copies go first, then primary copies
  // (when spilling is on), each least recently used first.
  struct Candidate {
    uint64_t last_access;
    ObjectId id;
  };
  std::vector<Candidate> secondary, primary;
  uint64_t reclaimable = allocator_.free_bytes();
  for (auto& [id, e] : entries_) {
    if (e.creating || e.spilled || IsFallback(e.offset)) continue;  // fallback: frees no arena
    if (keep != nullptr && keep->count(id) != 0) continue;
    uint64_t word = index_.WordAt(e.slot);
    if (SlotWord::State(word) != SlotState::kSealed || SlotWord::Pins(word) != 0) continue;
    if (e.secondary || e.delete_pending) {
      secondary.push_back({index_.LastAccessAt(e.slot), id});
    } else if (spill_ != nullptr) {
      primary.push_back({index_.LastAccessAt(e.slot), id});
    } else {
      continue;
    }
    reclaimable += FootprintOf(e);
  }
  if (reclaimable < need) {
    return ResourceExhausted("object " + for_id.Hex() + " of " + Bytes(bytes) +
                             " cannot fit in the store: capacity " + Bytes(allocator_.capacity()) +
                             ", " + Bytes(allocator_.used()) + " in use, of which only " +
                             Bytes(reclaimable - allocator_.free_bytes()) +
                             " can be evicted or spilled" + (spill_ ? "" : " (spilling is off)"));
  }
  auto by_age = [](const Candidate& a, const Candidate& b) {
    return a.last_access < b.last_access;
  };
  std::sort(secondary.begin(), secondary.end(), by_age);
  std::sort(primary.begin(), primary.end(), by_age);

  for (const Candidate& c : secondary) {
    auto it = entries_.find(c.id);
    if (!index_.TryTransition(it->second.slot, SlotState::kSealed, SlotState::kBusy)) continue;
    Erase(it);
    ++total_evicted_;
    if (auto offset = allocator_.Allocate(bytes)) return *offset;
  }
  Status spill_error;
  for (const Candidate& c : primary) {
    Result<bool> spilled = Spill(entries_.find(c.id));
    if (!spilled.ok()) {
      spill_error = spilled.status();
      break;  // the disk is full or failing: do not write more
    }
    if (auto offset = allocator_.Allocate(bytes)) return *offset;
  }
  std::string why = spill_error.ok() ? "the free space is fragmented (largest free block " +
                                           Bytes(allocator_.largest_free_block()) + ")"
                                     : "spilling failed: " + spill_error.ToString();
  return ResourceExhausted("object " + for_id.Hex() + " of " + Bytes(bytes) +
                           " cannot fit in the store of capacity " + Bytes(allocator_.capacity()) +
                           ": " + why);
}

Result<bool> ObjectTable::Spill(EntryMap::iterator it) {
  Entry& e = it->second;
  if (!index_.TryTransition(e.slot, SlotState::kSealed, SlotState::kBusy)) return false;
  uint64_t size = e.data_size + e.metadata_size;
  Status s = spill_->Write(it->first, std::span<const uint8_t>(arena_->base() + e.offset, size));
  if (!s.ok()) {
    AIRT_CHECK(index_.TryTransition(e.slot, SlotState::kBusy, SlotState::kSealed));
    return s.WithContext("spilling object " + it->first.Hex());
  }
  allocator_.Free(e.offset, size);
  e.spilled = true;
  ++num_spilled_;
  spilled_bytes_ += size;
  ++total_spilled_;
  AIRT_CHECK(index_.TryTransition(e.slot, SlotState::kBusy, SlotState::kSpilled));
  return true;
}

void ObjectTable::Erase(EntryMap::iterator it) {
  Entry& e = it->second;
  if (!e.spilled) FreeLocation(it->first, e.offset, e.data_size + e.metadata_size);
  index_.Remove(e.slot);
  entries_.erase(it);
}

void ObjectTable::ClearPinTable(uint32_t client) {
  PinTable(arena_->PinTableOf(client), arena_->header()->pin_slots_per_client).Clear();
}

void ObjectTable::OnClientGone(uint32_t client) {
  PinTable table(arena_->PinTableOf(client), arena_->header()->pin_slots_per_client);
  std::vector<ObjectId> released;
  table.ForEach([&](uint32_t slot, uint32_t count) {
    index_.DropPins(slot, count);
    released.push_back(index_.IdAt(slot));
  });
  table.Clear();
  for (const ObjectId& id : released) OnReleased(id);
  if (auto it = creating_by_client_.find(client); it != creating_by_client_.end()) {
    for (const ObjectId& id : it->second) {
      auto entry = entries_.find(id);
      AIRT_CHECK(entry != entries_.end() && entry->second.creating);
      --num_creating_;
      Erase(entry);
    }
    creating_by_client_.erase(it);
  }
}

std::vector<PrimaryCopy> ObjectTable::Primaries(size_t max_bytes, bool* more) const {
  std::vector<PrimaryCopy> out;
  size_t bytes = 0;
  *more = false;
  for (const auto& [id, e] : entries_) {
    if (e.secondary || e.creating || e.delete_pending) continue;
    size_t entry_bytes = ObjectId::kSize + 12 + e.owner.size();
    if (bytes + entry_bytes > max_bytes) {
      *more = true;
      break;
    }
    bytes += entry_bytes;
    out.push_back(PrimaryCopy{id, e.data_size + e.metadata_size, e.owner});
  }
  return out;
}

Status ObjectTable::MakePrimary(const ObjectId& id, std::string owner) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.creating) {
    return NotFound("object " + id.Hex() + " is not sealed here: it cannot become a primary copy");
  }
  if (it->second.delete_pending) {
    return FailedPrecondition("object " + id.Hex() + " is being deleted here");
  }
  it->second.secondary = false;
  it->second.owner = std::move(owner);
  return Status::Ok();
}

StoreStats ObjectTable::Stats() const {
  StoreStats s;
  s.capacity_bytes = allocator_.capacity();
  s.used_bytes = allocator_.used();
  s.largest_free_block = allocator_.largest_free_block();
  s.num_objects = entries_.size();
  s.num_creating = num_creating_;
  s.num_spilled = num_spilled_;
  s.num_sealed = entries_.size() - num_creating_ - num_spilled_;
  s.spilled_bytes = spilled_bytes_;
  for (const auto& [id, e] : entries_) {
    if (SlotWord::Pins(index_.WordAt(e.slot)) > 0) ++s.num_pinned;
    if (!e.secondary && !e.creating && !e.delete_pending) ++s.num_primary;
  }
  s.total_evicted = total_evicted_;
  s.total_spilled = total_spilled_;
  s.total_restored = total_restored_;
  s.total_sealed_bytes = total_sealed_bytes_;
  s.total_pulled_bytes = total_pulled_bytes_;
  if (fallback_ != nullptr) {
    s.num_fallback = fallback_->num_files();
    s.fallback_bytes = fallback_->used_bytes();
    s.total_fallback = total_fallback_;
  }
  return s;
}

}  // namespace airt::objectstore::internal
