// Streaming generators, as Ray's: a remote function returning airt::Generator<T> sends each item
// to its caller as it is made, and the caller reads them as they arrive:
//
//   airt::Generator<int> Count(int n) {
//     return airt::Generator<int>([i = 0, n]() mutable -> std::optional<int> {
//       if (i == n) return std::nullopt;  // the end
//       return i++;
//     });
//   }
//   AIRT_REMOTE(Count);
//
//   airt::ObjectRefGenerator<int> items = airt::Task(Count).Remote(3);
//   for (airt::ObjectRef<int> item : items) std::cout << *airt::Get(item);  // 0 1 2
//
// A Generator is pulled lazily: the worker calls its function for the next item only after the
// previous one reached the owner and, with back-pressure (SetGeneratorBackpressure), after the
// consumer took enough items. An exception thrown by the function after k items surfaces at the
// Get of the k+1-th item (the k before it stay readable), then the stream ends. Part of
// airt/api.h.
#pragma once

#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <msgpack.hpp>

namespace airt {

template <typename T>
class ObjectRef;

// What a streaming remote function returns: a function that makes the next item, or nullopt at
// the end. Runs on the worker, on the task's thread.
template <typename T>
class Generator {
 public:
  using value_type = T;
  explicit Generator(std::function<std::optional<T>()> next) : next_(std::move(next)) {}
  // The next item, or nullopt once the function has ended.
  std::optional<T> Next() {
    if (!next_) return std::nullopt;
    std::optional<T> item = next_();
    if (!item) next_ = nullptr;
    return item;
  }

 private:
  std::function<std::optional<T>()> next_;
};

namespace internal {

template <typename T>
struct IsGenerator : std::false_type {};
template <typename T>
struct IsGenerator<Generator<T>> : std::true_type {};

// msgpack nil, as a type depending on T (ObjectRef is complete only where the generator is used).
template <typename T>
struct NilFor {
  using type = msgpack::type::nil_t;
};

// Where a streaming task's items go: the worker sets one for the thread running such a task.
class GeneratorEmitter {
 public:
  virtual ~GeneratorEmitter() = default;
  // Sends one serialized item to the owner and returns once the generator may make the next one
  // (back-pressure). Throws TaskCancelledError when the stream was cancelled (stop generating),
  // Exception when the item cannot be kept (the store is full) or the owner is gone.
  virtual void Emit(std::string bytes) = 0;
};

// The emitter of the streaming task the calling thread runs; null outside one. One per thread,
// shared by every library of the process (it lives in libairt_api).
std::shared_ptr<GeneratorEmitter>& ThisThreadsGenerator();

// Drains `generator` into the calling thread's emitter; false when the thread runs no streaming
// task (the function was called as an ordinary task). Throws what the generator or Emit throws.
template <typename T>
bool StreamItems(Generator<T>& generator) {
  std::shared_ptr<GeneratorEmitter> emitter = ThisThreadsGenerator();
  if (!emitter) return false;
  while (std::optional<T> item = generator.Next()) {
    msgpack::sbuffer buffer;
    msgpack::pack(buffer, *item);
    emitter->Emit(std::string(buffer.data(), buffer.size()));
  }
  return true;
}

// The next item of the stream whose completion object is `completed`: the item's object id, or ""
// once the stream has ended. Throws TimeoutError after timeout_ms (< 0: no limit).
std::string NextGeneratorItem(const std::string& completed, int64_t timeout_ms);
// Keeps the stream's bookkeeping until the returned holder goes; then the items not taken are
// freed and the generator is no longer held back.
std::shared_ptr<void> HoldGenerator(const std::string& completed);

}  // namespace internal

// The caller's end of a streaming task (Ray's ObjectRefGenerator): the refs of its items, in
// order, each as soon as the worker made it. Copies share one stream. Not thread-safe.
template <typename T>
class ObjectRefGenerator {
 public:
  explicit ObjectRefGenerator(std::string completed)
      : completed_(std::move(completed)), hold_(internal::HoldGenerator(completed_)) {}

  // The next item's ref, waiting for it; nullopt once the generator has ended (after its last
  // item, or after the item holding its error). Throws TimeoutError after timeout_ms.
  std::optional<ObjectRef<T>> Next(int64_t timeout_ms = -1) {
    std::string id = internal::NextGeneratorItem(completed_, timeout_ms);
    if (id.empty()) return std::nullopt;
    return ObjectRef<T>(std::move(id));
  }
  // Ready once the generator has finished: its value is nil, or the generator's error.
  ObjectRef<typename internal::NilFor<T>::type> Completed() const {
    return ObjectRef<typename internal::NilFor<T>::type>(completed_);
  }

  // Range-for over the items (each Next waits without limit).
  class Iterator {
   public:
    using value_type = ObjectRef<T>;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    explicit Iterator(ObjectRefGenerator* stream) : stream_(stream) { ++*this; }
    const ObjectRef<T>& operator*() const { return *item_; }
    Iterator& operator++() {
      item_ = stream_->Next();
      if (!item_) stream_ = nullptr;
      return *this;
    }
    bool operator==(const Iterator& other) const { return stream_ == other.stream_; }

   private:
    ObjectRefGenerator* stream_ = nullptr;
    std::optional<ObjectRef<T>> item_;
  };
  Iterator begin() { return Iterator(this); }
  Iterator end() { return Iterator(); }

 private:
  std::string completed_;
  std::shared_ptr<void> hold_;
};

}  // namespace airt
