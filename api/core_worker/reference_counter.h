// Reference counting of the objects a process holds, as Ray's ownership protocol counts them
// (docs/ownership.md). For an object it owns (its puts and its tasks' returns) the process keeps
// the object while user code holds an ObjectRef to it (local references), a task submitted with
// it as an argument (at top level or nested in a value) has not finished (submitted references),
// a ref to it was written into a value that nobody has borrowed from yet (escrow: a task's return
// on its way to the caller), or another process borrows it (borrowers, registered over
// proto::Owner). For an object it borrows, the local and submitted references alone count, and
// their end releases the borrow. When every count of an object reaches zero, `free` is called
// once. Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "common/ids.h"

namespace airt::core_worker {

class ReferenceCounter {
 public:
  explicit ReferenceCounter(std::function<void(const ObjectId&)> free) : free_(std::move(free)) {}

  void AddLocal(const ObjectId& id) { ++counts_[id].local; }
  void RemoveLocal(const ObjectId& id);
  void AddSubmitted(const ObjectId& id) { ++counts_[id].submitted; }
  void RemoveSubmitted(const ObjectId& id);

  // A ref to `id` was written into a value: kept until the next borrower registers (or the
  // process ends). Only for an object with a reference now; others are ignored (false).
  bool AddEscrow(const ObjectId& id);

  // Borrowers (owner side). AddBorrower: false (nothing recorded) when `id` has no reference any
  // more (it was freed). A borrower registered twice for one object counts once; the first
  // registration of any borrower ends the object's escrow.
  bool AddBorrower(const ObjectId& id, const WorkerId& borrower);
  void RemoveBorrower(const ObjectId& id, const WorkerId& borrower);
  // The borrower is gone (its process died, or its connection to this owner broke): every object
  // it borrowed is released.
  void RemoveBorrowerEverywhere(const WorkerId& borrower);

  // Whether `id` has a reference.
  bool Has(const ObjectId& id) const { return counts_.count(id) > 0; }
  // Objects with a reference.
  size_t size() const { return counts_.size(); }
  // How many processes borrow `id` from this one.
  size_t NumBorrowers(const ObjectId& id) const;

 private:
  struct Count {
    uint32_t local = 0;
    uint32_t submitted = 0;
    bool escrow = false;
    std::unordered_set<WorkerId> borrowers;
  };
  void FreeIfUnused(std::unordered_map<ObjectId, Count>::iterator it);

  std::unordered_map<ObjectId, Count> counts_;
  std::unordered_map<WorkerId, std::unordered_set<ObjectId>> borrowed_by_;
  std::function<void(const ObjectId&)> free_;
};

}  // namespace airt::core_worker
