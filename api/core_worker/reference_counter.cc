#include "api/core_worker/reference_counter.h"

#include <vector>

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

bool ReferenceCounter::AddEscrow(const ObjectId& id) {
  auto it = counts_.find(id);
  if (it == counts_.end()) return false;
  it->second.escrow = true;
  return true;
}

bool ReferenceCounter::AddBorrower(const ObjectId& id, const WorkerId& borrower) {
  auto it = counts_.find(id);
  if (it == counts_.end()) return false;
  it->second.escrow = false;
  if (it->second.borrowers.insert(borrower).second) borrowed_by_[borrower].insert(id);
  return true;
}

void ReferenceCounter::RemoveBorrower(const ObjectId& id, const WorkerId& borrower) {
  auto it = counts_.find(id);
  if (it == counts_.end() || it->second.borrowers.erase(borrower) == 0) return;
  auto by = borrowed_by_.find(borrower);
  if (by != borrowed_by_.end()) {
    by->second.erase(id);
    if (by->second.empty()) borrowed_by_.erase(by);
  }
  FreeIfUnused(it);
}

void ReferenceCounter::RemoveBorrowerEverywhere(const WorkerId& borrower) {
  auto by = borrowed_by_.find(borrower);
  if (by == borrowed_by_.end()) return;
  std::vector<ObjectId> ids(by->second.begin(), by->second.end());
  borrowed_by_.erase(by);
  for (const ObjectId& id : ids) {
    auto it = counts_.find(id);
    if (it == counts_.end()) continue;
    it->second.borrowers.erase(borrower);
    FreeIfUnused(it);
  }
}

size_t ReferenceCounter::NumBorrowers(const ObjectId& id) const {
  auto it = counts_.find(id);
  return it == counts_.end() ? 0 : it->second.borrowers.size();
}

void ReferenceCounter::FreeIfUnused(std::unordered_map<ObjectId, Count>::iterator it) {
  const Count& count = it->second;
  if (count.local > 0 || count.submitted > 0 || count.escrow || !count.borrowers.empty()) return;
  ObjectId id = it->first;
  counts_.erase(it);
  free_(id);
}

}  // namespace airt::core_worker
