#include "api/core_worker/lineage.h"

#include <utility>

namespace airt::core_worker {
namespace {

// What the bookkeeping of an entry costs besides its strings (ids, counts, map nodes).
constexpr uint64_t kEntryOverhead = 256;

}  // namespace

uint64_t Lineage::SizeOf(const LineageTask& task) {
  uint64_t bytes = kEntryOverhead + task.function.size() + task.options.name.size() +
                   task.returns.size() * ObjectId::kSize;
  for (const TaskArgument& arg : task.args) {
    bytes += arg.value.size() + (arg.contained.size() + arg.ref_list.size() + 1) * ObjectId::kSize;
  }
  return bytes;
}

void Lineage::Add(LineageTask task, const std::vector<ObjectId>& live) {
  if (live.empty()) return;  // nothing can ask for it
  TaskId id = task.id;
  if (auto old = entries_.find(id); old != entries_.end()) Release(old, /*evicted=*/false);
  Entry entry;
  entry.bytes = SizeOf(task);
  entry.seq = next_seq_++;
  entry.live.insert(live.begin(), live.end());
  auto hold = [&](const ObjectId& arg) {
    if (arg.IsPut()) return;
    auto parent = entries_.find(arg.Task());
    if (parent == entries_.end() || parent->first == id) return;
    ++parent->second.dependents;
    entry.parents.push_back(parent->first);
  };
  for (const TaskArgument& arg : task.args) {
    if (arg.ref) hold(*arg.ref);
    for (const ObjectId& element : arg.ref_list) hold(element);
  }
  entry.task = std::move(task);
  bytes_ += entry.bytes;
  by_age_.emplace(entry.seq, id);
  evicted_.erase(id);
  entries_.emplace(id, std::move(entry));
  while (bytes_ > max_bytes_ && !by_age_.empty()) {
    Release(entries_.find(by_age_.begin()->second), /*evicted=*/true);
  }
}

void Lineage::ReleaseReturn(const ObjectId& id) {
  if (id.IsPut()) return;
  auto it = entries_.find(id.Task());
  if (it == entries_.end()) return;
  it->second.live.erase(id);
  MaybeRelease(id.Task());
}

LineageTask* Lineage::Find(const TaskId& id) {
  auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : &it->second.task;
}

void Lineage::MaybeRelease(const TaskId& id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.live.empty() || it->second.dependents > 0) return;
  Release(it, /*evicted=*/false);
}

void Lineage::Release(std::unordered_map<TaskId, Entry>::iterator it, bool evicted) {
  TaskId id = it->first;
  std::vector<TaskId> parents = std::move(it->second.parents);
  bytes_ -= it->second.bytes;
  by_age_.erase(it->second.seq);
  entries_.erase(it);
  if (evicted) evicted_.insert(id);
  for (const TaskId& parent : parents) {
    auto p = entries_.find(parent);
    if (p == entries_.end()) continue;
    --p->second.dependents;
    MaybeRelease(parent);
  }
}

}  // namespace airt::core_worker
