#include "api/core_worker/memory_store.h"

#include <algorithm>
#include <thread>

namespace airt::core_worker {

void MemoryStore::Put(const ObjectId& id, ObjectEntry entry) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!entries_.emplace(id, entry).second) return;
    auto blocked = blocked_.equal_range(id);
    for (auto it = blocked.first; it != blocked.second; ++it) {
      if (it->second->remaining > 0 && --it->second->remaining == 0) it->second->ready.notify_one();
    }
  }
  auto range = waiters_.equal_range(id);
  for (auto it = range.first; it != range.second; ++it) it->second->fulfill(ObjectEntry(entry));
  waiters_.erase(range.first, range.second);
}

void MemoryStore::PutNew(const ObjectId& id, ObjectEntry entry) {
  // Nobody can wait for a new id: no waiter to wake.
  std::lock_guard<std::mutex> lock(mu_);
  entries_.emplace(id, std::move(entry));
}

bool MemoryStore::Register(Waiter& waiter, std::span<const ObjectId> ids, size_t needed) {
  size_t present = 0;
  for (const ObjectId& id : ids) present += entries_.count(id);
  if (present >= needed) return false;
  waiter.remaining = needed - present;
  for (const ObjectId& id : ids) {
    if (entries_.count(id) == 0) blocked_.emplace(id, &waiter);
  }
  return true;
}

void MemoryStore::Unregister(Waiter& waiter, std::span<const ObjectId> ids) {
  for (const ObjectId& id : ids) {
    auto range = blocked_.equal_range(id);
    for (auto it = range.first; it != range.second;) {
      it = it->second == &waiter ? blocked_.erase(it) : std::next(it);
    }
  }
}

namespace {
constexpr int kSpinUs = 200;
}  // namespace

bool MemoryStore::Block(std::unique_lock<std::mutex>& lock, Waiter& waiter,
                        std::optional<std::chrono::steady_clock::time_point> deadline) {
  auto done = [&] { return waiter.remaining == 0; };
  // A short spin first (yielding the core): a small task's answer comes within ~100 us, and a
  // thread put to sleep wakes tens of microseconds after it is signalled. 200 us took the
  // sync-task rate from ~6.8k to ~10k/s on the 2-core VM (docs/benchmarks.md).
  auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinUs);
  while (!done() && std::chrono::steady_clock::now() < spin_until) {
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
  if (done()) return true;
  if (!deadline) {
    waiter.ready.wait(lock, done);
    return true;
  }
  return waiter.ready.wait_until(lock, *deadline, done);
}

Result<std::vector<ObjectEntry>> MemoryStore::Wait(std::span<const ObjectId> ids,
                                                   int64_t timeout_ms) {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (timeout_ms >= 0) {
    deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  }
  std::unique_lock<std::mutex> lock(mu_);
  Waiter waiter;
  if (Register(waiter, ids, ids.size())) {
    bool all = Block(lock, waiter, deadline);
    Unregister(waiter, ids);
    if (!all) {
      for (const ObjectId& id : ids) {
        if (entries_.count(id) == 0) {
          return DeadlineExceeded("object " + id.Hex() + " was not ready after " +
                                  std::to_string(timeout_ms) + " ms");
        }
      }
    }
  }
  std::vector<ObjectEntry> out;
  out.reserve(ids.size());
  for (const ObjectId& id : ids) out.push_back(entries_.at(id));
  return out;
}

std::optional<std::vector<ObjectEntry>> MemoryStore::TryGet(std::span<const ObjectId> ids) const {
  std::vector<ObjectEntry> out;
  out.reserve(ids.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (const ObjectId& id : ids) {
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    out.push_back(it->second);
  }
  return out;
}

std::vector<bool> MemoryStore::Ready(std::span<const ObjectId> ids,
                                     std::vector<ObjectLocation>* stored) const {
  std::vector<bool> out;
  out.reserve(ids.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (const ObjectId& id : ids) {
    auto it = entries_.find(id);
    out.push_back(it != entries_.end());
    if (stored == nullptr || it == entries_.end() || !it->second.location) continue;
    if (!it->second.location->transfer_address.empty()) stored->push_back(*it->second.location);
  }
  return out;
}

std::vector<bool> MemoryStore::WaitFor(std::span<const ObjectId> ids, size_t num_ready,
                                       int64_t timeout_ms) {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (timeout_ms >= 0) {
    deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  }
  std::unique_lock<std::mutex> lock(mu_);
  Waiter waiter;
  if (Register(waiter, ids, std::min(num_ready, ids.size()))) {
    Block(lock, waiter, deadline);
    Unregister(waiter, ids);
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

std::optional<ObjectEntry> MemoryStore::Erase(const ObjectId& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  ObjectEntry entry = std::move(it->second);
  entries_.erase(it);
  return entry;
}

std::optional<ObjectEntry> MemoryStore::Peek(const ObjectId& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

bool MemoryStore::Relocate(const ObjectId& id, const std::string& from_node,
                           const ObjectLocation& to) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.location ||
      it->second.location->node_address != from_node) {
    return false;
  }
  it->second.location = to;
  return true;
}

std::vector<ObjectId> MemoryStore::LocatedAt(const std::string& node_address) const {
  std::vector<ObjectId> ids;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, entry] : entries_) {
    if (entry.location && entry.location->node_address == node_address) ids.push_back(id);
  }
  return ids;
}

}  // namespace airt::core_worker

namespace airt::core_worker {

ObjectError LostObject(const ObjectLocation& where, const Status& why) {
  std::string node = where.node_address.empty() ? where.transfer_address : where.node_address;
  if (why.code() == Code::kResourceExhausted) {
    return ObjectError{ErrorKind::OBJECT_STORE_FULL, "",
                       "object " + where.id.Hex() + " from node " + node +
                           " does not fit in this node's store: " + why.message() +
                           ". Free objects (drop their refs) or start the node with a larger "
                           "object store.",
                       ""};
  }
  return ObjectError{ErrorKind::OBJECT_LOST, "",
                     "object " + where.id.Hex() + " is lost: its copy on node " + node +
                         " cannot be read (" + why.ToString() + "), and airt keeps no other.",
                     ""};
}

}  // namespace airt::core_worker
