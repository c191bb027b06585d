// Reference counting of the objects a process owns (its puts and its tasks' returns), as Ray's
// owner-side counting: an object is kept while user code holds an ObjectRef to it (local
// references) or a task submitted with it as an argument has not finished (submitted
// references). When both reach zero, `free` is called once. Loop thread only.
//
// Refs cannot travel inside values yet (an ObjectRef is not serializable), so no other process
// borrows them: a task's argument is held until the task is done.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>

#include "common/ids.h"

namespace airt::core_worker {

class ReferenceCounter {
 public:
  explicit ReferenceCounter(std::function<void(const ObjectId&)> free) : free_(std::move(free)) {}

  void AddLocal(const ObjectId& id) { ++counts_[id].local; }
  void RemoveLocal(const ObjectId& id);
  void AddSubmitted(const ObjectId& id) { ++counts_[id].submitted; }
  void RemoveSubmitted(const ObjectId& id);

  // Objects with a reference.
  size_t size() const { return counts_.size(); }

 private:
  struct Count {
    uint32_t local = 0;
    uint32_t submitted = 0;
  };
  void FreeIfUnused(std::unordered_map<ObjectId, Count>::iterator it);

  std::unordered_map<ObjectId, Count> counts_;
  std::function<void(const ObjectId&)> free_;
};

}  // namespace airt::core_worker
