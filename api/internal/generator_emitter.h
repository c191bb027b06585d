// The worker's end of streaming generators: each pushed task that carries a GeneratorSink gets an
// emitter, set as its thread's internal::ThisThreadsGenerator() while it runs, which keeps each
// item (inline, or in the node's store) and sends it to the owner's sink on the worker service's
// loop, waiting for the answer (the owner's back-pressure) before the generator goes on.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include <kj/async.h>

#include "airt/generator.h"
#include "api/internal/task_executor.h"
#include "common/ids.h"
#include "common/proto/node.capnp.h"
#include "common/status.h"

namespace airt::internal {

// At most this many items per run of a generator (their ids are task returns 2, 3, ...).
inline constexpr uint64_t kMaxGeneratorItems = (1u << 31) - 4;

// Keeps an item's bytes as a return value: inline when small, else put in the node's store as
// `id`. Called on the task's thread.
using KeepItem = std::function<Result<TaskReturnValue>(const ObjectId& id, std::string bytes)>;

// The sinks of the streaming tasks running now, by task. Confined to the worker service's loop
// thread, but for the emitters' sends, which reach it through the loop's executor.
class GeneratorSinks {
 public:
  // `transfer_address` and `node_address`: where the items put in the store lie (ReturnsAt).
  GeneratorSinks(std::string transfer_address, std::string node_address)
      : transfer_address_(std::move(transfer_address)), node_address_(std::move(node_address)) {}

  // Loop thread: registers `sink` for `task` and returns the emitter its run uses; the emitter
  // must not outlive Close(task) (its sends fail after).
  std::shared_ptr<internal::GeneratorEmitter> Open(const TaskId& task,
                                                   proto::GeneratorSink::Client sink,
                                                   KeepItem keep);
  // Loop thread: the task's pushTask answered; its sink goes.
  void Close(const TaskId& task) { sinks_.erase(task); }

  // Loop thread: sends item `index` of `task` to its sink; resolves when the owner answered.
  // kCancelled when the owner ended the stream; kFailedPrecondition when the task has no sink.
  kj::Promise<void> Send(const TaskId& task, uint64_t index, const TaskReturnValue& value);

 private:
  std::string transfer_address_, node_address_;
  std::unordered_map<TaskId, proto::GeneratorSink::Client> sinks_;
};

}  // namespace airt::internal
