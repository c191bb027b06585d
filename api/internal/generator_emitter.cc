#include "api/internal/generator_emitter.h"

#include <utility>

#include "airt/driver.h"
#include "common/rpc_status.h"

namespace airt::internal {
namespace {

capnp::Data::Reader AsData(std::string_view bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

// Emit, on the task's thread: keeps the item, then waits on the loop for the owner's answer.
class SinkEmitter final : public internal::GeneratorEmitter {
 public:
  SinkEmitter(TaskId task, GeneratorSinks& sinks, const kj::Executor& loop, KeepItem keep)
      : task_(task), sinks_(sinks), loop_(loop.addRef()), keep_(std::move(keep)) {}
  ~SinkEmitter() noexcept override {}  // kj::Own's destructor may throw; this one does not

  void Emit(std::string bytes) override {
    uint64_t index = next_.fetch_add(1);
    if (index >= kMaxGeneratorItems) {
      throw Exception("task " + task_.Hex() + ": a generator yields at most " +
                      std::to_string(kMaxGeneratorItems) + " items");
    }
    ObjectId id = ObjectId::ForReturn(task_, static_cast<uint32_t>(index + 2));
    Result<TaskReturnValue> kept = keep_(id, std::move(bytes));
    if (!kept.ok()) {
      throw Exception("item " + std::to_string(index) + " of task " + task_.Hex() + ": " +
                      kept.status().ToString());
    }
    Status sent =
        CatchKj([&] { loop_->executeSync([&] { return sinks_.Send(task_, index, *kept); }); });
    if (sent.ok()) return;
    if (sent.code() == Code::kCancelled) throw TaskCancelledError(sent.message());
    throw Exception("sending item " + std::to_string(index) + " of task " + task_.Hex() +
                    " to its owner: " + sent.ToString());
  }

 private:
  TaskId task_;
  GeneratorSinks& sinks_;
  kj::Own<const kj::Executor> loop_;
  KeepItem keep_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace

std::shared_ptr<internal::GeneratorEmitter> GeneratorSinks::Open(const TaskId& task,
                                                                 proto::GeneratorSink::Client sink,
                                                                 KeepItem keep) {
  sinks_.insert_or_assign(task, kj::mv(sink));
  return std::make_shared<SinkEmitter>(task, *this, kj::getCurrentThreadExecutor(),
                                       std::move(keep));
}

kj::Promise<void> GeneratorSinks::Send(const TaskId& task, uint64_t index,
                                       const TaskReturnValue& value) {
  auto found = sinks_.find(task);
  if (found == sinks_.end()) {
    return ToKjException(FailedPrecondition("task " + task.Hex() + " has no generator sink"));
  }
  auto request = found->second.itemRequest();
  request.setIndex(index);
  auto out = request.initValue();
  if (!value.in_store) {
    out.setInline(AsData(value.inline_bytes));
  } else {
    auto object = out.initObject();
    object.setObjectId(capnp::Data::Reader(value.object_id.data(), ObjectId::kSize));
    object.setTransferAddress(transfer_address_);
    object.setNodeAddress(node_address_);
    object.setSize(value.size);
  }
  return request.send().ignoreResult();
}

}  // namespace airt::internal
