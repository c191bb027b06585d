#include "api/core_worker/memory_store.h"

namespace airt::core {

void MemoryStore::Put(const ObjectId& id, ObjectEntry entry) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!entries_.emplace(id, entry).second) return;
  }
  changed_.notify_all();
  auto range = waiters_.equal_range(id);
  for (auto it = range.first; it != range.second; ++it) it->second->fulfill(ObjectEntry(entry));
  waiters_.erase(range.first, range.second);
}

void MemoryStore::PutNew(const ObjectId& id, ObjectEntry entry) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.emplace(id, std::move(entry));
  }
  changed_.notify_all();
}

Result<std::vector<ObjectEntry>> MemoryStore::Wait(std::span<const ObjectId> ids,
                                                   int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lock(mu_);
  for (const ObjectId& id : ids) {
    auto present = [&] { return entries_.count(id) > 0; };
    if (timeout_ms < 0) {
      changed_.wait(lock, present);
    } else if (!changed_.wait_until(lock, deadline, present)) {
      return DeadlineExceeded("object " + id.Hex() + " was not ready after " +
                              std::to_string(timeout_ms) + " ms");
    }
  }
  std::vector<ObjectEntry> out;
  out.reserve(ids.size());
  for (const ObjectId& id : ids) out.push_back(entries_.at(id));
  return out;
}

std::vector<bool> MemoryStore::Ready(std::span<const ObjectId> ids) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<bool> out;
  out.reserve(ids.size());
  for (const ObjectId& id : ids) out.push_back(entries_.count(id) > 0);
  return out;
}

std::vector<bool> MemoryStore::WaitFor(std::span<const ObjectId> ids, size_t num_ready,
                                       int64_t timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::unique_lock<std::mutex> lock(mu_);
  auto enough = [&] {
    size_t n = 0;
    for (const ObjectId& id : ids) n += entries_.count(id);
    return n >= num_ready;
  };
  if (timeout_ms < 0) {
    changed_.wait(lock, enough);
  } else {
    changed_.wait_until(lock, deadline, enough);
  }
  std::vector<bool> out;
  out.reserve(ids.size());
  for (const ObjectId& id : ids) out.push_back(entries_.count(id) > 0);
  return out;
}

kj::Promise<ObjectEntry> MemoryStore::WhenReady(const ObjectId& id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = entries_.find(id); it != entries_.end()) return ObjectEntry(it->second);
  }
  auto paf = kj::newPromiseAndFulfiller<ObjectEntry>();
  waiters_.emplace(id, kj::mv(paf.fulfiller));
  return kj::mv(paf.promise);
}

void MemoryStore::Erase(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(id);
}

}  // namespace airt::core
