// The core worker's objects (puts, gets, reference counting and freeing) and its questions to the
// head's tables (KV, cluster view). The rest is in core_worker.cc.
#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>

#include "api/core_worker/capnp_util.h"
#include "api/core_worker/core_worker_impl.h"
#include "common/logging.h"
#include "common/rpc_status.h"
#include "objectstore/transfer.h"

namespace airt::core_worker {

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
      auto request = Head().kvPutRequest();
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
      auto request = Head().kvGetRequest();
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
      return Head().clusterViewRequest().send().then([&](auto view) {
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
    held.insert(held.end(), arg.contained.begin(), arg.contained.end());
    held.insert(held.end(), arg.ref_list.begin(), arg.ref_list.end());
  }
  for (const ObjectId& id : held) refs_.AddSubmitted(id);
  if (held.empty()) return;
  task.holds = std::shared_ptr<void>(nullptr, [this, held = std::move(held)](void*) {
    for (const ObjectId& id : held) refs_.RemoveSubmitted(id);
  });
}

void CoreWorker::Impl::Free(const ObjectId& id) {
  if (borrowed_.count(id) > 0) return ReleaseBorrowed(id);  // the owner frees it
  if (stopping_) return;  // the job's end frees what is left (the nodes delete its objects)
  lineage_.ReleaseReturn(id);
  std::optional<ObjectEntry> entry = memory_.Erase(id);
  if (!entry) {
    // Its task has not answered yet: free it when it does.
    loop_->tasks.add(memory_.WhenReady(id).then([this, id](ObjectEntry) { Free(id); }));
    return;
  }
  if (!entry->location) return;
  FreeCopies(id);  // the copies other nodes pulled
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
  AIRT_ASSIGN_OR_RETURN(objectstore::MutableObject object,
                        store_->Create(id, size, 0, /*secondary=*/false, OwnerTag()));
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

namespace {

using Clock = std::chrono::steady_clock;

// How long the pulls Wait starts in the background may take.
constexpr int64_t kPrefetchTimeoutMs = 60'000;

// Whether `entry` lies in another node's store and is not in this node's.
bool Remote(const ObjectEntry& entry, const objectstore::StoreClient& store) {
  return entry.location && !entry.location->transfer_address.empty() &&
         !store.Contains(entry.location->id);
}

}  // namespace

bool CoreWorker::Impl::Elsewhere(const ObjectLocation& where) const {
  return !where.node_address.empty() && where.node_address != node_address_;
}

objectstore::ObjectPuller& CoreWorker::Impl::Puller() {
  std::call_once(puller_once_, [this] {
    Result<objectstore::StoreStats> stats = store_->Stats();
    store_capacity_ = stats.ok() ? stats->capacity_bytes : 0;
    puller_ = std::make_unique<objectstore::ObjectPuller>(store_.get());
  });
  return *puller_;
}

Status CoreWorker::Impl::GetEach(std::span<const ObjectId> ids, int64_t timeout_ms,
                                 const std::function<void(size_t, GotObject&)>& use) {
  // Every entry here and none on another node (a Get of inline values, of this node's objects,
  // or of errors): one look at the memory store, no deadline, no pulls.
  std::optional<std::vector<ObjectEntry>> now = memory_.TryGet(ids);
  if (now && std::none_of(now->begin(), now->end(),
                          [&](const ObjectEntry& e) { return Remote(e, *store_); })) {
    std::vector<ObjectId> copies;  // read here, named elsewhere: this node holds a copy
    for (size_t i = 0; i < now->size(); ++i) {
      ObjectEntry& entry = (*now)[i];
      GotObject got;
      got.error = std::move(entry.error);
      got.value = std::move(entry.value);
      if (entry.location) {
        Result<objectstore::ObjectPin> pin = store_->Get(entry.location->id, timeout_ms);
        if (pin.status().code() == Code::kDeadlineExceeded) return pin.status();
        if (pin.ok()) {
          got.pin = std::move(*pin);
          if (Elsewhere(*entry.location)) copies.push_back(entry.location->id);
        } else {
          got.error = LostObject(*entry.location, pin.status());
        }
      }
      use(i, got);
    }
    ReportLocalCopies(std::move(copies));
    return Status::Ok();
  }

  std::optional<Clock::time_point> deadline;
  if (timeout_ms >= 0) deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto left = [&]() -> int64_t {
    if (!deadline) return -1;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count();
    return std::max<int64_t>(ms, 0);
  };
  std::vector<ObjectEntry> entries;
  if (now) {
    entries = std::move(*now);
  } else {
    RequestBorrowed(ids);  // a borrowed object's owner says where it is
    Blocked blocked(*this);
    AIRT_ASSIGN_OR_RETURN(entries, memory_.Wait(ids, timeout_ms));
  }

  // The objects on other nodes are pulled in batches (one pipelined stream per node, all nodes
  // at once, one deadline for the whole Get), a window at a time: a window holds at most half of
  // this node's store, so that its copies are not evicted by the next window's before they are
  // read (a Get of more than the store holds still reads every object, in turn).
  std::vector<Status> pulled(entries.size(), Status::Ok());
  bool any_remote = std::any_of(entries.begin(), entries.end(),
                                [&](const ObjectEntry& e) { return Remote(e, *store_); });
  if (any_remote) Puller();
  auto pull_window = [&](size_t from) {
    uint64_t budget = store_capacity_ > 0 ? store_capacity_ / 2 : UINT64_MAX;
    std::vector<objectstore::PullRequest> wanted;
    std::vector<size_t> index;
    uint64_t bytes = 0;
    size_t end = from;
    for (; end < entries.size(); ++end) {
      if (!Remote(entries[end], *store_)) continue;
      const ObjectLocation& where = *entries[end].location;
      if (!wanted.empty() && bytes + where.size > budget) break;
      bytes += where.size;
      wanted.push_back(objectstore::PullRequest{where.id, where.transfer_address});
      index.push_back(end);
    }
    if (!wanted.empty()) {
      std::vector<Status> statuses = Puller().PullEach(wanted, left());
      for (size_t k = 0; k < index.size(); ++k) pulled[index[k]] = std::move(statuses[k]);
    }
    return end;
  };

  // A copy at `where` could not be read (`why`): when its node died, the object is rebuilt from
  // its lineage and read again (a few times, should the rebuilt copy's node die too); else the
  // object's error says it is lost. Only the caller's deadline fails the whole Get.
  auto read_rebuilt = [&](size_t i, ObjectLocation where, Status why, GotObject& got) -> Status {
    for (int attempt = 0; attempt < 4; ++attempt) {
      AIRT_ASSIGN_OR_RETURN(std::optional<ObjectEntry> rebuilt, Rebuilt(ids[i], where, left()));
      if (!rebuilt) break;
      got.error = std::move(rebuilt->error);
      got.value = std::move(rebuilt->value);
      if (!rebuilt->location) return Status::Ok();
      where = *rebuilt->location;
      if (Remote(*rebuilt, *store_)) {
        std::vector<objectstore::PullRequest> wanted_one{{where.id, where.transfer_address}};
        std::vector<Status> one = Puller().PullEach(wanted_one, left());
        if (one[0].code() == Code::kDeadlineExceeded) return one[0];
        if (!one[0].ok()) {
          why = std::move(one[0]);
          continue;
        }
      }
      Result<objectstore::ObjectPin> pin = store_->Get(where.id, left());
      if (pin.status().code() == Code::kDeadlineExceeded) return pin.status();
      if (pin.ok()) {
        got.pin = std::move(*pin);
        return Status::Ok();
      }
      why = pin.status();
    }
    got.error = LostObject(where, why);
    return Status::Ok();
  };

  std::vector<ObjectId> copies;  // pulled here (or found here) from another node
  size_t window_end = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i == window_end && any_remote) {
      window_end = pull_window(i);
      // A deadline fails the whole Get, before any object of the window is used.
      for (size_t j = i; j < window_end; ++j) {
        if (pulled[j].code() == Code::kDeadlineExceeded) return pulled[j];
      }
    }
    GotObject got;
    got.error = entries[i].error;
    got.value = entries[i].value;
    if (entries[i].location) {
      const ObjectLocation& where = *entries[i].location;
      if (!pulled[i].ok()) {
        // This object alone is rebuilt or fails (the message names it and its node); the others
        // arrive.
        AIRT_RETURN_IF_ERROR(read_rebuilt(i, where, pulled[i], got));
        use(i, got);
        continue;
      }
      // Read in place, pinned only while `use` runs (or while it keeps the object). The caller's
      // timeout stays a timeout; a copy that cannot be read is the object's error.
      Result<objectstore::ObjectPin> pin = store_->Get(where.id, left());
      if (pin.status().code() == Code::kDeadlineExceeded) return pin.status();
      if (pin.ok()) {
        got.pin = std::move(*pin);
        if (Elsewhere(where)) copies.push_back(where.id);
      } else {
        got.error = LostObject(where, pin.status());
      }
    }
    use(i, got);
  }
  ReportLocalCopies(std::move(copies));
  return Status::Ok();
}

std::vector<std::string> CoreWorker::Impl::NodeAddressesOf(std::span<const ObjectId> ids) const {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (const ObjectId& id : ids) {
    std::optional<ObjectEntry> entry = memory_.Peek(id);
    bool stored = entry && !entry->error && entry->location;
    out.push_back(stored ? entry->location->node_address : std::string());
  }
  return out;
}

std::vector<bool> CoreWorker::Impl::Wait(std::span<const ObjectId> ids, size_t n,
                                         int64_t timeout_ms) {
  RequestBorrowed(ids);
  std::vector<ObjectLocation> stored;  // of the ready objects, found in the same look
  std::vector<bool> ready = memory_.Ready(ids, &stored);
  if (static_cast<size_t>(std::count(ready.begin(), ready.end(), true)) < n) {
    {
      Blocked blocked(*this);
      ready = memory_.WaitFor(ids, n, timeout_ms);
    }
    stored.clear();
    memory_.Ready(ids, &stored);  // those that arrived meanwhile may be prefetched too
  }
  // Start pulling the ready objects that lie on other nodes (at most half the store's worth).
  std::vector<objectstore::PullRequest> wanted;
  uint64_t bytes = 0;
  for (const ObjectLocation& where : stored) {
    if (store_->Contains(where.id)) continue;
    if (wanted.empty()) Puller();
    if (!wanted.empty() && store_capacity_ > 0 && bytes + where.size > store_capacity_ / 2) break;
    bytes += where.size;
    wanted.push_back(objectstore::PullRequest{where.id, where.transfer_address});
  }
  if (wanted.empty()) return ready;
  std::unique_ptr<objectstore::PullBatch> batch = Puller().Start(wanted, kPrefetchTimeoutMs);
  std::lock_guard<std::mutex> lock(prefetch_mu_);
  std::erase_if(prefetches_, [](const auto& b) { return b->Done(); });
  prefetches_.push_back(std::move(batch));
  return ready;
}

}  // namespace airt::core_worker
