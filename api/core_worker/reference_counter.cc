#include "api/core_worker/reference_counter.h"

#include "common/logging.h"

namespace airt::core_worker {

void ReferenceCounter::RemoveLocal(const ObjectId& id) {
  auto it = counts_.find(id);
  if (it == counts_.end() || it->second.local == 0) {
    AIRT_LOG(ERROR) << "object " << id.Hex() << ": a local reference released twice";
    return;
  }
  --it->second.local;
  FreeIfUnused(it);
}

void ReferenceCounter::RemoveSubmitted(const ObjectId& id) {
  auto it = counts_.find(id);
  if (it == counts_.end() || it->second.submitted == 0) {
    AIRT_LOG(ERROR) << "object " << id.Hex() << ": a task's reference released twice";
    return;
  }
  --it->second.submitted;
  FreeIfUnused(it);
}

void ReferenceCounter::FreeIfUnused(std::unordered_map<ObjectId, Count>::iterator it) {
  if (it->second.local > 0 || it->second.submitted > 0) return;
  ObjectId id = it->first;
  counts_.erase(it);
  free_(id);
}

}  // namespace airt::core_worker
