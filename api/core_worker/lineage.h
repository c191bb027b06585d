// The lineage an owner keeps to rebuild lost objects (docs/fault_tolerance.md): the spec of each
// finished normal task of this process that left a return in a node's store, kept while one of
// its returns is referenced or while the lineage of a task that took one of them as an argument
// is kept, under a cap in bytes (Ray's max_lineage_bytes). Past the cap the oldest entries are
// released and remembered as evicted, so that a lost object of theirs says so. Pure bookkeeping:
// it runs nothing. Loop thread only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "api/core_worker/core_worker.h"
#include "common/ids.h"

namespace airt::core_worker {

// What re-running a task needs: the same function, arguments and options, and the returns it
// makes (their ids follow from the task id, so a re-run rebuilds the same objects).
struct LineageTask {
  TaskId id;
  std::string function;
  std::vector<TaskArgument> args;
  TaskOptions options;
  std::vector<ObjectId> returns;
  // Re-runs left (a re-run for reconstruction and a retry after a worker's death both count);
  // < 0: without limit (max_retries -1).
  int32_t retries_left = 0;
};

class Lineage {
 public:
  explicit Lineage(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // Keeps `task`: `live` are its returns still referenced now (none, and nothing depending on
  // it: not kept). The tasks of its reference arguments that are kept stay kept while it is.
  // Evicts the oldest entries (this one too) while the total is over the cap.
  void Add(LineageTask task, const std::vector<ObjectId>& live);
  // The last reference to return `id` went.
  void ReleaseReturn(const ObjectId& id);

  // The kept spec of task `id`, or null. Valid until the next call that changes this.
  LineageTask* Find(const TaskId& id);
  // Whether task `id`'s lineage was released to keep under the cap.
  bool Evicted(const TaskId& id) const { return evicted_.count(id) > 0; }

  struct Snapshot {
    size_t tasks = 0;
    uint64_t bytes = 0;
    uint64_t max_bytes = 0;
    size_t evicted = 0;
  };
  Snapshot Stats() const { return {entries_.size(), bytes_, max_bytes_, evicted_.size()}; }

  // The bytes an entry for `task` counts against the cap (its spec as kept).
  static uint64_t SizeOf(const LineageTask& task);

 private:
  struct Entry {
    LineageTask task;
    uint64_t bytes = 0;
    uint64_t seq = 0;
    std::unordered_set<ObjectId> live;  // returns still referenced
    uint32_t dependents = 0;            // kept entries that took one of its returns
    std::vector<TaskId> parents;        // kept entries of its arguments, one hold each
  };
  void MaybeRelease(const TaskId& id);
  void Release(std::unordered_map<TaskId, Entry>::iterator it, bool evicted);

  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  uint64_t next_seq_ = 0;
  std::unordered_map<TaskId, Entry> entries_;
  std::map<uint64_t, TaskId> by_age_;
  std::unordered_set<TaskId> evicted_;
};

}  // namespace airt::core_worker
