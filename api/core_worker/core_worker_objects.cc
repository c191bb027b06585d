// The core worker's objects (puts, gets, reference counting and freeing) and its questions to the
// head's tables (KV, cluster view). The rest is in core_worker.cc.
#include <algorithm>
#include <optional>

#include "api/core_worker/capnp_util.h"
#include "api/core_worker/core_worker_impl.h"
#include "common/logging.h"
#include "common/rpc_status.h"
#include "objectstore/transfer.h"

namespace airt::core {

Result<ObjectId> CoreWorker::Impl::Put(std::string bytes) {
  if (bytes.size() > options_.inline_threshold) {
    return Put(bytes.size(), [&](uint8_t* out) {
      objectstore::CopyToObject(out, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    });
  }
  ObjectId id = ObjectId::ForPut(driver_task_, ++put_index_);
  memory_.PutNew(id, ObjectEntry{std::make_shared<const std::string>(std::move(bytes)),
                                 std::nullopt, std::nullopt});
  return id;
}

Result<bool> CoreWorker::Impl::KvPut(const std::string& ns, const std::string& key,
                                     const std::string& value, bool overwrite) {
  bool added = false;
  Status put = CatchKj([&] {
    OnLoop([&] {
      auto request = loop_->head.kvPutRequest();
      request.setNamespace(ns);
      request.setKey(key);
      request.setValue(AsData(value));
      request.setOverwrite(overwrite);
      return request.send().then([&](auto reply) { added = reply.getAdded(); });
    });
  });
  if (!put.ok()) return put;
  return added;
}

Result<std::optional<std::string>> CoreWorker::Impl::KvGet(const std::string& ns,
                                                           const std::string& key) {
  std::optional<std::string> value;
  Status got = CatchKj([&] {
    OnLoop([&] {
      auto request = loop_->head.kvGetRequest();
      request.setNamespace(ns);
      request.setKey(key);
      return request.send().then([&](auto reply) {
        if (reply.getFound()) value = ToString(reply.getValue());
      });
    });
  });
  if (!got.ok()) return got;
  return value;
}

Result<std::vector<CoreWorker::NodeView>> CoreWorker::Impl::ClusterView() {
  std::vector<CoreWorker::NodeView> nodes;
  Status got = CatchKj([&] {
    OnLoop([&] {
      return loop_->head.clusterViewRequest().send().then([&](auto view) {
        for (auto n : view.getNodes()) {
          auto info = n.getInfo();
          CoreWorker::NodeView node;
          std::string id = ToString(info.getNodeId());
          if (id.size() == NodeId::kSize) {
            node.id = NodeId::FromRaw(reinterpret_cast<const uint8_t*>(id.data()));
          }
          node.address =
              std::string(info.getAddress().cStr()) + ":" + std::to_string(info.getNodePort());
          node.alive = n.getAlive();
          for (auto r : info.getTotal()) node.total[r.getName().cStr()] = r.getAmount();
          for (auto r : n.getAvailable()) node.available[r.getName().cStr()] = r.getAmount();
          nodes.push_back(std::move(node));
        }
      });
    });
  });
  if (!got.ok()) return got;
  return nodes;
}

void CoreWorker::Impl::HoldArguments(PendingTask& task) {
  std::vector<ObjectId> held;
  for (const TaskArgument& arg : task.args) {
    if (arg.ref) held.push_back(*arg.ref);
    held.insert(held.end(), arg.ref_list.begin(), arg.ref_list.end());
  }
  for (const ObjectId& id : held) refs_.AddSubmitted(id);
  if (held.empty()) return;
  task.holds = std::shared_ptr<void>(nullptr, [this, held = std::move(held)](void*) {
    for (const ObjectId& id : held) refs_.RemoveSubmitted(id);
  });
}

void CoreWorker::Impl::Free(const ObjectId& id) {
  if (stopping_) return;  // the job's end frees what is left (the nodes delete its objects)
  std::optional<ObjectEntry> entry = memory_.Erase(id);
  if (!entry) {
    // Its task has not answered yet: free it when it does.
    loop_->tasks.add(memory_.WhenReady(id).then([this, id](ObjectEntry) { Free(id); }));
    return;
  }
  if (!entry->location) return;
  // This node's copy: the primary of a put, or a copy a Get pulled here.
  if (store_->Contains(id)) {
    Status deleted = store_->Delete(id);
    if (!deleted.ok() && deleted.code() != Code::kNotFound) {
      AIRT_LOG(WARNING) << "freeing object " << id.Hex() << ": " << deleted.ToString();
    }
  }
  const std::string& node = entry->location->node_address;
  if (node.empty() || node == node_address_) return;
  if (remote_frees_.empty()) {
    loop_->tasks.add(kj::evalLater([this] { FlushRemoteFrees(); }));
  }
  remote_frees_[node].push_back(id);
}

void CoreWorker::Impl::FlushRemoteFrees() {
  for (auto& [node, ids] : remote_frees_) {
    auto request = Connect(node).castAs<proto::Node>().freeObjectsRequest();
    auto list = request.initObjectIds(static_cast<uint>(ids.size()));
    for (size_t i = 0; i < ids.size(); ++i) {
      list.set(static_cast<uint>(i), AsData(ids[i].Binary()));
    }
    loop_->tasks.add(request.send().ignoreResult());
  }
  remote_frees_.clear();
}

Result<ObjectId> CoreWorker::Impl::Put(uint64_t size, const std::function<void(uint8_t*)>& write) {
  if (size <= options_.inline_threshold) {
    std::string bytes(size, '\0');
    write(reinterpret_cast<uint8_t*>(bytes.data()));
    return Put(std::move(bytes));
  }
  ObjectId id = ObjectId::ForPut(driver_task_, ++put_index_);
  AIRT_ASSIGN_OR_RETURN(objectstore::MutableObject object, store_->Create(id, size));
  try {
    write(object.data.data());
  } catch (...) {
    (void)store_->Abort(id);
    throw;
  }
  AIRT_RETURN_IF_ERROR(store_->Seal(id));
  memory_.PutNew(id,
                 ObjectEntry{nullptr, ObjectLocation{id, transfer_address_, size, node_address_},
                             std::nullopt});
  return id;
}

Status CoreWorker::Impl::GetEach(std::span<const ObjectId> ids, int64_t timeout_ms,
                                 const std::function<void(size_t, GotObject&)>& use) {
  std::vector<bool> ready = memory_.Ready(ids);
  std::optional<Blocked> blocked;
  if (std::find(ready.begin(), ready.end(), false) != ready.end()) blocked.emplace(*this);
  AIRT_ASSIGN_OR_RETURN(std::vector<ObjectEntry> entries, memory_.Wait(ids, timeout_ms));
  blocked.reset();
  for (size_t i = 0; i < entries.size(); ++i) {
    GotObject got;
    got.error = entries[i].error;
    got.value = entries[i].value;
    if (entries[i].location) {
      const ObjectLocation& where = *entries[i].location;
      Status pulled = Status::Ok();
      if (!store_->Contains(where.id)) {
        pulled = objectstore::ObjectPuller(store_.get())
                     .Pull(where.transfer_address, where.id, timeout_ms);
      }
      // Read in place, pinned only while `use` runs: a Get of more than the store holds reads
      // one object at a time (spilled ones restored in turn).
      if (pulled.ok()) {
        Result<objectstore::ObjectPin> pin = store_->Get(where.id, timeout_ms);
        if (pin.ok()) got.pin = std::move(*pin);
        pulled = pin.status();
      }
      // The caller's timeout stays a timeout; a copy that cannot be read is the object's error.
      if (pulled.code() == Code::kDeadlineExceeded) return pulled;
      if (!pulled.ok()) got.error = LostObject(where, pulled);
    }
    use(i, got);
  }
  return Status::Ok();
}

}  // namespace airt::core
