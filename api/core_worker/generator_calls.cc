// CoreWorker's streaming generators: opening a call's stream, taking its items, dropping it.
#include "api/core_worker/capnp_util.h"
#include "api/core_worker/core_worker_impl.h"
#include "api/core_worker/generator_stream.h"

namespace airt::core_worker {

void CoreWorker::Impl::OpenStream(PendingTask& task, const StreamOptions& options) {
  StreamHooks hooks;
  hooks.free = [this](const ObjectId& id) { Free(id); };
  hooks.free_at = [this](const std::string& node, const ObjectId& id) { FreeAt(node, id); };
  hooks.post = [this](std::function<void()> fn) { inbox_.Post([fn = std::move(fn)] { fn(); }); };
  task.stream = std::make_shared<GeneratorStream>(task.id, task.function, options.backpressure,
                                                  memory_, std::move(hooks));
  generators_.Add(task.stream);
}

void CoreWorker::Impl::FreeAt(const std::string& node, const ObjectId& id) {
  if (stopping_ || node.empty()) return;
  if (node == node_address_) {
    Status deleted = store_->Delete(id);
    (void)deleted;  // not there (another copy, or gone): nothing to free
    return;
  }
  if (remote_frees_.empty()) {
    loop_->tasks.add(kj::evalLater([this] { FlushRemoteFrees(); }));
  }
  remote_frees_[node].push_back(id);
}

Result<std::optional<ObjectId>> CoreWorker::Impl::NextGeneratorItem(const ObjectId& completed,
                                                                    int64_t timeout_ms) {
  std::shared_ptr<GeneratorStream> stream = generators_.Find(completed);
  if (!stream) {
    return NotFound("object " + completed.Hex() +
                    " is not the completion of an open generator stream of this process");
  }
  Blocked blocked(*this);
  return stream->Take(timeout_ms);
}

void CoreWorker::Impl::DropGenerator(const ObjectId& completed) {
  std::shared_ptr<GeneratorStream> stream = generators_.Remove(completed);
  if (!stream) return;
  inbox_.Post([stream] { stream->Abandon(); });
}

Result<std::optional<ObjectId>> CoreWorker::NextGeneratorItem(const ObjectId& completed,
                                                              int64_t timeout_ms) {
  return impl_->NextGeneratorItem(completed, timeout_ms);
}

void CoreWorker::DropGenerator(const ObjectId& completed) { impl_->DropGenerator(completed); }

}  // namespace airt::core_worker
