// The owner's side of streaming generators (Ray's ObjectRefGenerator): the items a generator task
// sends while it runs (TaskSpec.generatorSink), recorded in the memory store as the task's
// returns 2, 3, ... (return 1 is the task's completion), handed to the consumer in order, with
// the worker held back while the consumer is far enough behind.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <kj/async.h>

#include "api/core_worker/memory_store.h"
#include "common/ids.h"
#include "common/proto/node.capnp.h"
#include "common/status.h"

namespace airt::core_worker {

// Ray's _generator_backpressure_num_objects default: no limit (the generator runs to its end
// whatever the consumer does). A positive N keeps it at most N items ahead of the consumer.
inline constexpr int64_t kNoGeneratorBackpressure = -1;

// What the stream needs of its core worker, called on the loop thread.
struct StreamHooks {
  std::function<void(const ObjectId& id)> free;  // the last reference to `id` went (Impl::Free)
  // Frees the copy of `id` in the store of the node at `node` (host:port), not the owner's entry.
  std::function<void(const std::string& node, const ObjectId& id)> free_at;
  std::function<void(std::function<void()>)> post;  // runs a function on the loop thread
};

class GeneratorStream : public std::enable_shared_from_this<GeneratorStream> {
 public:
  // `completed`: the task's return 1, ready when the task finished (nil) or failed (its error).
  GeneratorStream(TaskId task, std::string function, int64_t backpressure, MemoryStore& memory,
                  StreamHooks hooks);

  // Item `index`'s object id: the task's return index + 2.
  static ObjectId ItemId(const TaskId& task, uint64_t index);
  const ObjectId& completed() const { return completed_; }
  MemoryStore& memory() const { return memory_; }

  // Loop thread: item `index` of a run arrived. Resolves when the generator may make the next
  // one (at once, or once the consumer caught up under back-pressure). A duplicate (a retried
  // run's item the owner has) is dropped, and its store copy freed when it is another one.
  // kCancelled (as a kj exception) once the stream ended or the task was cancelled;
  // kInvalidArgument for an index past the next expected.
  kj::Promise<void> OnItem(uint64_t index, ObjectEntry entry);
  // Any thread: the task finished with `completed` (its return 1's entry): the stream ends after
  // the items it has, and after one more holding the error when the task failed. Once only.
  void End(const ObjectEntry& completed);
  // Loop thread: fails the items held back (the worker stops its generator): after End.
  void RejectHeld();

  // Any thread: the next item's id, waiting for it; nullopt once the stream ended and every item
  // was taken. kDeadlineExceeded after timeout_ms (< 0: no limit).
  Result<std::optional<ObjectId>> Take(int64_t timeout_ms);
  // Loop thread: the consumer dropped its generator: the items it did not take are freed, and the
  // generator is no longer held back (later items are dropped as they come).
  void Abandon();

 private:
  // Loop thread: answers the held items the consumer caught up with.
  void Release();
  // Whether item `index` may be answered now (with mu_ held).
  bool WithinWindow(uint64_t index) const;

  const TaskId task_;
  const ObjectId completed_;
  const std::string function_;
  const int64_t backpressure_;
  MemoryStore& memory_;
  StreamHooks hooks_;

  mutable std::mutex mu_;
  uint64_t received_ = 0;          // guarded by mu_: items 0..received_-1 are in the store
  uint64_t consumed_ = 0;          // guarded by mu_: items handed to the consumer
  std::optional<uint64_t> total_;  // guarded by mu_: set at the end (with the error item)
  bool abandoned_ = false;         // guarded by mu_
  bool release_posted_ = false;    // guarded by mu_
  size_t held_count_ = 0;          // guarded by mu_: held_.size()
  // Loop thread: the answers held back, by item index.
  std::map<uint64_t, kj::Own<kj::PromiseFulfiller<void>>> held_;
};

// The sink a push of a streaming task carries: each item call goes to `stream`. Watches the
// task's completion while it lives, to end the stream and fail the held items (a cancel).
// Loop thread.
kj::Own<proto::GeneratorSink::Server> MakeGeneratorSink(std::shared_ptr<GeneratorStream> stream);

// The open streams of a core worker, by completion id. Thread-safe.
class GeneratorStreams {
 public:
  void Add(std::shared_ptr<GeneratorStream> stream);
  std::shared_ptr<GeneratorStream> Find(const ObjectId& completed) const;
  std::shared_ptr<GeneratorStream> Remove(const ObjectId& completed);

 private:
  mutable std::mutex mu_;
  std::unordered_map<ObjectId, std::shared_ptr<GeneratorStream>> streams_;  // guarded by mu_
};

}  // namespace airt::core_worker
