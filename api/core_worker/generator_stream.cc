#include "api/core_worker/generator_stream.h"

#include <chrono>
#include <utility>

#include "api/core_worker/capnp_util.h"
#include "common/logging.h"
#include "common/rpc_status.h"

namespace airt::core_worker {

GeneratorStream::GeneratorStream(TaskId task, std::string function, int64_t backpressure,
                                 MemoryStore& memory, StreamHooks hooks)
    : task_(task),
      completed_(ObjectId::ForReturn(task, 1)),
      function_(std::move(function)),
      backpressure_(backpressure),
      memory_(memory),
      hooks_(std::move(hooks)) {}

ObjectId GeneratorStream::ItemId(const TaskId& task, uint64_t index) {
  return ObjectId::ForReturn(task, static_cast<uint32_t>(index + 2));
}

bool GeneratorStream::WithinWindow(uint64_t index) const {
  // Answering item i lets the generator make item i + 1: it is then i + 2 items in, at most
  // `backpressure_` ahead of what the consumer took.
  return backpressure_ <= 0 || abandoned_ || total_ ||
         index + 2 <= consumed_ + static_cast<uint64_t>(backpressure_);
}

kj::Promise<void> GeneratorStream::OnItem(uint64_t index, ObjectEntry entry) {
  // A task cancelled (or failed) before a consumer looked ends here, not at a later Take.
  if (memory_.Ready(std::span<const ObjectId>(&completed_, 1))[0]) {
    Result<std::vector<ObjectEntry>> done =
        memory_.Wait(std::span<const ObjectId>(&completed_, 1), 0);
    if (done.ok()) End((*done)[0]);
  }
  std::unique_lock<std::mutex> lock(mu_);
  ObjectId id = ItemId(task_, index);
  if (index > received_) {
    return ToKjException(InvalidArgument("item " + std::to_string(index) + " of task " +
                                         task_.Hex() + " came before item " +
                                         std::to_string(received_)));
  }
  bool duplicate = index < received_;
  bool cancelled = total_.has_value();
  if (duplicate || cancelled || abandoned_) {
    // A re-run's item the owner has (its first run's stays), or one nobody will take: its store
    // copy goes unless it is the very object the owner recorded (the same node's store).
    if (!duplicate) received_ = index + 1;
    lock.unlock();
    if (entry.location && !entry.location->node_address.empty()) {
      bool same = false;
      if (duplicate) {
        Result<std::vector<ObjectEntry>> kept = memory_.Wait(std::span<const ObjectId>(&id, 1), 0);
        same = kept.ok() && (*kept)[0].location &&
               (*kept)[0].location->node_address == entry.location->node_address;
      }
      if (!same) hooks_.free_at(entry.location->node_address, id);
    }
    if (cancelled) {
      return ToKjException(Cancelled("the stream of task " + task_.Hex() + " (" + function_ +
                                     ") has ended: it was cancelled or failed"));
    }
    return kj::READY_NOW;
  }
  memory_.Put(id, std::move(entry));
  received_ = index + 1;
  if (WithinWindow(index)) return kj::READY_NOW;
  auto paf = kj::newPromiseAndFulfiller<void>();
  held_.emplace(index, kj::mv(paf.fulfiller));
  held_count_ = held_.size();
  return kj::mv(paf.promise);
}

void GeneratorStream::End(const ObjectEntry& completed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (total_) return;
  if (completed.error) {
    // The k+1-th item holds the error (Ray: the generator raised after k items). Nothing can wait
    // for its id yet: it is handed out by Take only after this.
    memory_.PutNew(ItemId(task_, received_), ObjectEntry{nullptr, std::nullopt, completed.error});
    total_ = received_ + 1;
  } else {
    total_ = received_;
  }
}

void GeneratorStream::RejectHeld() {
  std::map<uint64_t, kj::Own<kj::PromiseFulfiller<void>>> held = std::move(held_);
  held_.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_count_ = 0;
  }
  for (auto& [index, answer] : held) {
    answer->reject(ToKjException(
        Cancelled("the stream of task " + task_.Hex() + " (" + function_ + ") has ended")));
  }
}

void GeneratorStream::Release() {
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> go;
  {
    std::lock_guard<std::mutex> lock(mu_);
    release_posted_ = false;
    for (auto it = held_.begin(); it != held_.end() && WithinWindow(it->first);) {
      go.push_back(kj::mv(it->second));
      it = held_.erase(it);
    }
    held_count_ = held_.size();
  }
  for (auto& answer : go) answer->fulfill();
}

Result<std::optional<ObjectId>> GeneratorStream::Take(int64_t timeout_ms) {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (timeout_ms >= 0) {
    deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  }
  for (;;) {
    uint64_t next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      uint64_t available = total_ ? *total_ : received_;
      if (consumed_ < available) {
        ObjectId id = ItemId(task_, consumed_++);
        if (held_count_ > 0 && !release_posted_) {
          release_posted_ = true;
          hooks_.post([self = shared_from_this()] { self->Release(); });
        }
        return std::optional<ObjectId>(id);
      }
      if (total_) return std::optional<ObjectId>();
      next = consumed_;
    }
    int64_t left = -1;
    if (deadline) {
      auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      left = std::max<int64_t>(remaining.count(), 0);
    }
    ObjectId wait_for[2] = {ItemId(task_, next), completed_};
    std::vector<bool> ready = memory_.WaitFor(wait_for, 1, left);
    if (ready[1]) {
      Result<std::vector<ObjectEntry>> done =
          memory_.Wait(std::span<const ObjectId>(&completed_, 1), 0);
      if (done.ok()) End((*done)[0]);
      continue;
    }
    if (ready[0]) continue;
    if (deadline && std::chrono::steady_clock::now() >= *deadline) {
      return DeadlineExceeded("item " + std::to_string(next) + " of the generator task " +
                              task_.Hex() + " (" + function_ + ") was not ready after " +
                              std::to_string(timeout_ms) + " ms");
    }
  }
}

void GeneratorStream::Abandon() {
  std::vector<ObjectId> untaken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    abandoned_ = true;
    uint64_t end = total_ ? *total_ : received_;
    for (uint64_t i = consumed_; i < end; ++i) untaken.push_back(ItemId(task_, i));
    consumed_ = end;
  }
  Release();
  for (const ObjectId& id : untaken) hooks_.free(id);
}

namespace {

// One push's sink (a retry's push gets another over the same stream).
class Sink final : public proto::GeneratorSink::Server {
 public:
  Sink(std::shared_ptr<GeneratorStream> stream, MemoryStore& memory)
      : stream_(std::move(stream)),
        watch_(memory.WhenReady(stream_->completed())
                   .then([stream = stream_](ObjectEntry done) {
                     stream->End(done);
                     stream->RejectHeld();
                   })
                   .eagerlyEvaluate([](kj::Exception&& e) {
                     AIRT_LOG(WARNING) << "generator stream: " << FromKjException(e).ToString();
                   })) {}

 protected:
  kj::Promise<void> item(ItemContext context) override {
    auto params = context.getParams();
    uint64_t index = params.getIndex();
    auto value = params.getValue();
    ObjectEntry entry;
    switch (value.which()) {
      case proto::TaskReturn::INLINE:
        entry.value = std::make_shared<const std::string>(ToString(value.getInline()));
        break;
      case proto::TaskReturn::OBJECT: {
        auto where = value.getObject();
        std::string raw = ToString(where.getObjectId());
        if (raw.size() != ObjectId::kSize) {
          throw ToKjException(InvalidArgument("item " + std::to_string(index) +
                                              ": objectId must be " +
                                              std::to_string(ObjectId::kSize) + " bytes"));
        }
        ObjectId id = ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(raw.data()));
        if (id != GeneratorStream::ItemId(stream_->completed().Task(), index)) {
          throw ToKjException(InvalidArgument("item " + std::to_string(index) + " came as object " +
                                              id.Hex() + ", not the item's id"));
        }
        entry.location = ObjectLocation{id, where.getTransferAddress().cStr(), where.getSize(),
                                        where.getNodeAddress().cStr()};
        break;
      }
      default: throw ToKjException(InvalidArgument("item value is neither inline nor object"));
    }
    return stream_->OnItem(index, std::move(entry));
  }

 private:
  std::shared_ptr<GeneratorStream> stream_;
  kj::Promise<void> watch_;
};

}  // namespace

kj::Own<proto::GeneratorSink::Server> MakeGeneratorSink(std::shared_ptr<GeneratorStream> stream) {
  MemoryStore& memory = stream->memory();
  return kj::heap<Sink>(std::move(stream), memory);
}

void GeneratorStreams::Add(std::shared_ptr<GeneratorStream> stream) {
  std::lock_guard<std::mutex> lock(mu_);
  ObjectId id = stream->completed();
  streams_.insert_or_assign(id, std::move(stream));
}

std::shared_ptr<GeneratorStream> GeneratorStreams::Find(const ObjectId& completed) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(completed);
  return it == streams_.end() ? nullptr : it->second;
}

std::shared_ptr<GeneratorStream> GeneratorStreams::Remove(const ObjectId& completed) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(completed);
  if (it == streams_.end()) return nullptr;
  std::shared_ptr<GeneratorStream> stream = std::move(it->second);
  streams_.erase(it);
  return stream;
}

}  // namespace airt::core_worker
