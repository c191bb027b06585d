// What the owner knows of each object it owns: its value (small objects travel inline), where it
// lies (large objects live in a node's store), or why it will never exist. Written on the core
// worker's loop thread; read from any thread (Wait) and from the loop (WhenReady).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <kj/async.h>

#include "common/error_kind.h"
#include "common/ids.h"
#include "common/status.h"

namespace airt::core_worker {

struct ObjectLocation {
  ObjectId id;
  std::string transfer_address;  // host:port of the node holding it
  uint64_t size = 0;
  std::string node_address;  // host:port of that node's Node service (to free it there)
};

// Why an object will never have a value: a kind of the schema's ErrorKind (the task's TaskError
// kind, or what the owner saw: WORKER_CRASHED, INFEASIBLE, ACTOR_DIED, OBJECT_LOST, ...).
using ErrorKind = proto::ErrorKind;

struct ObjectError {
  ErrorKind kind = ErrorKind::SYSTEM;
  std::string function_name;
  std::string message;  // names the object, task or node, and what to do
  std::string data;     // USER_EXCEPTION: the task's exception (TaskError.data)
};

// The error of a Get of `id` whose copy at `where` cannot be read: OBJECT_LOST naming the object
// and the node (`why`: what the pull or the store said), or OBJECT_STORE_FULL when this node's
// store has no room for it.
ObjectError LostObject(const ObjectLocation& where, const Status& why);

// One of value, location or error.
struct ObjectEntry {
  std::shared_ptr<const std::string> value;
  std::optional<ObjectLocation> location;
  std::optional<ObjectError> error;
};

class MemoryStore {
 public:
  // Loop thread only: records an object's entry and wakes its waiters. A second record for the
  // same id is ignored (the first answer stands).
  void Put(const ObjectId& id, ObjectEntry entry);
  // Any thread: records the entry of an id nothing can wait for on the loop yet (a Put's, before
  // its id is handed out), so that it is ready at once.
  void PutNew(const ObjectId& id, ObjectEntry entry);

  // Any thread: the entries of `ids` once all exist, or kDeadlineExceeded naming the first
  // missing id after timeout_ms (< 0: never).
  Result<std::vector<ObjectEntry>> Wait(std::span<const ObjectId> ids, int64_t timeout_ms);
  // Any thread: the entries of `ids` when every one exists now (one look under one lock, for a
  // Get that need not wait), else none.
  std::optional<std::vector<ObjectEntry>> TryGet(std::span<const ObjectId> ids) const;
  // Any thread: the ids among `ids` whose entries exist now. With `stored`, also fills it with
  // the locations of those that lie in a node's store reachable through a transfer address (the
  // objects a Wait may prefetch), in the same look.
  std::vector<bool> Ready(std::span<const ObjectId> ids,
                          std::vector<ObjectLocation>* stored = nullptr) const;
  // Any thread: waits until at least `num_ready` of `ids` have entries or timeout_ms passes
  // (< 0: no limit); returns which are ready then.
  std::vector<bool> WaitFor(std::span<const ObjectId> ids, size_t num_ready, int64_t timeout_ms);

  // Loop thread only: resolves when `id` has an entry.
  kj::Promise<ObjectEntry> WhenReady(const ObjectId& id);

  // Forgets `id` (its last reference is gone); its entry, or none when it has none yet. Loop
  // thread only.
  std::optional<ObjectEntry> Erase(const ObjectId& id);

  // Loop thread only: `id`'s copy moved from the node whose Node service is at `from_node` to
  // `to` (that node left and handed its primary copies on). False, changing nothing, when `id`
  // has no entry or its location is not `from_node`.
  bool Relocate(const ObjectId& id, const std::string& from_node, const ObjectLocation& to);

  // Any thread: `id`'s entry now, or none.
  std::optional<ObjectEntry> Peek(const ObjectId& id) const;
  // Any thread: the ids whose entries lie in the store of the node whose Node service is at
  // `node_address` (one look, for a node's death).
  std::vector<ObjectId> LocatedAt(const std::string& node_address) const;

 private:
  // A thread blocked in Wait or WaitFor: woken once `remaining` of its ids have arrived, not at
  // every Put (a Get of 1000 task returns wakes once, not 1000 times).
  struct Waiter {
    size_t remaining = 0;
    std::condition_variable ready;
  };
  // Registers `waiter` for each id of `ids` not here yet, needing `needed` of them; returns false
  // (registering nothing) when that many are here already. Called with mu_ held.
  bool Register(Waiter& waiter, std::span<const ObjectId> ids, size_t needed);
  void Unregister(Waiter& waiter, std::span<const ObjectId> ids);  // mu_ held
  // Whether the wait of `waiter` is over; waits until `deadline` (none: forever).
  bool Block(std::unique_lock<std::mutex>& lock, Waiter& waiter,
             std::optional<std::chrono::steady_clock::time_point> deadline);

  mutable std::mutex mu_;
  std::unordered_map<ObjectId, ObjectEntry> entries_;   // guarded by mu_
  std::unordered_multimap<ObjectId, Waiter*> blocked_;  // guarded by mu_
  // Loop-thread waiters (not guarded: confined to the loop thread).
  std::unordered_multimap<ObjectId, kj::Own<kj::PromiseFulfiller<ObjectEntry>>> waiters_;
};

}  // namespace airt::core_worker
