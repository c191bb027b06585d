// The driver API's object calls (Put, Get, Wait: airt/driver.h's internal half), over the
// process's core worker, or the local-mode runtime (api/internal/driver_state.h).
#include <algorithm>

#include "airt/driver.h"
#include "api/core_worker/core_worker.h"
#include "api/internal/driver_state.h"
#include "api/internal/error_kinds.h"
#include "api/local_mode.h"
#include "objectstore/object_store.h"

namespace airt::internal {
namespace {

local::LocalRuntime* Local() { return CurrentLocal(); }
std::shared_ptr<core_worker::CoreWorker> Core() { return CurrentCore(); }
ObjectId IdOf(const std::string& binary) { return ObjectIdOf(binary); }
[[noreturn]] void Throw(const Status& status) { ThrowStatus(status); }
[[noreturn]] void Throw(const core_worker::ObjectError& e) { ThrowObjectError(e); }
[[noreturn]] void LocalModeLacks(const std::string& what) { ThrowLocalModeLacks(what); }

// The local-mode objects `ids` once all exist; TimeoutError after timeout_ms.
std::vector<local::LocalObject> GetLocal(local::LocalRuntime& local,
                                         const std::vector<ObjectId>& ids, int64_t timeout_ms) {
  Result<std::vector<local::LocalObject>> got = local.Get(ids, timeout_ms);
  if (!got.ok()) Throw(got.status());
  return std::move(*got);
}

}  // namespace

std::string PutBytes(std::string bytes) {
  if (local::LocalRuntime* local = Local()) return local->Put(std::move(bytes)).Binary();
  Result<ObjectId> id = Core()->Put(std::move(bytes));
  if (!id.ok()) Throw(id.status());  // a full store: ObjectStoreFullError
  return id->Binary();
}

std::vector<std::string> ObjectNodeAddresses(const std::vector<std::string>& ids) {
  if (Local()) return std::vector<std::string>(ids.size());
  std::vector<ObjectId> objects;
  objects.reserve(ids.size());
  for (const std::string& id : ids) {
    if (id.size() != ObjectId::kSize) throw Exception("an ObjectRef without an object");
    objects.push_back(IdOf(id));
  }
  return Core()->NodeAddressesOf(objects);
}

std::vector<std::pair<std::string, uint64_t>> LocalStoreStats() {
  if (Local()) LocalModeLacks("the object store's stats");
  Result<objectstore::StoreStats> stats = Core()->store().Stats();
  if (!stats.ok()) Throw(stats.status());
  return {{"capacity_bytes", stats->capacity_bytes}, {"used_bytes", stats->used_bytes},
          {"num_objects", stats->num_objects}, {"num_spilled", stats->num_spilled},
          {"spilled_bytes", stats->spilled_bytes}};
}

std::string PutWith(uint64_t size, const std::function<void(uint8_t* out)>& write) {
  if (local::LocalRuntime* local = Local()) {
    std::string bytes(size, '\0');
    write(reinterpret_cast<uint8_t*>(bytes.data()));
    return local->Put(std::move(bytes)).Binary();
  }
  Result<ObjectId> id = Core()->Put(size, write);
  if (!id.ok()) Throw(id.status());  // a full store: ObjectStoreFullError
  return id->Binary();
}

void CopyOut(uint8_t* dst, const char* src, size_t n) {
  objectstore::CopyToObject(dst, reinterpret_cast<const uint8_t*>(src), n);
}

void GetEach(const std::vector<std::string>& ids, int64_t timeout_ms,
             const std::function<void(size_t i, std::string_view bytes)>& use) {
  std::vector<ObjectId> object_ids;
  for (const std::string& id : ids) object_ids.push_back(IdOf(id));
  if (local::LocalRuntime* local = Local()) {
    std::vector<local::LocalObject> objects = GetLocal(*local, object_ids, timeout_ms);
    for (size_t i = 0; i < objects.size(); ++i) {
      if (objects[i].error) Throw(*objects[i].error);
      use(i, *objects[i].value);
    }
    return;
  }
  Status got =
      Core()->GetEach(object_ids, timeout_ms, [&](size_t i, const core_worker::GotObject& g) {
        if (g.error) Throw(*g.error);
        use(i, g.bytes());
      });
  if (!got.ok()) Throw(got);
}

std::vector<PinnedBytes> GetPinned(const std::vector<std::string>& ids, int64_t timeout_ms) {
  std::vector<ObjectId> object_ids;
  for (const std::string& id : ids) object_ids.push_back(IdOf(id));
  std::vector<PinnedBytes> out(ids.size());
  if (local::LocalRuntime* local = Local()) {
    std::vector<local::LocalObject> objects = GetLocal(*local, object_ids, timeout_ms);
    for (size_t i = 0; i < objects.size(); ++i) {
      if (objects[i].error) Throw(*objects[i].error);
      out[i] = PinnedBytes{*objects[i].value, std::const_pointer_cast<std::string>(objects[i].value)};
    }
    return out;
  }
  std::vector<std::shared_ptr<core_worker::GotObject>> held;
  Status got = Core()->GetEach(object_ids, timeout_ms, [&](size_t i, core_worker::GotObject& g) {
    if (g.error) Throw(*g.error);
    auto object = std::make_shared<core_worker::GotObject>(std::move(g));
    out[i] = PinnedBytes{object->bytes(), object};
    if (object->pin.valid()) held.push_back(object);
  });
  if (!got.ok()) Throw(got);
  if (!held.empty()) KeepPinned(held);
  return out;
}

std::vector<std::string> GetBytes(const std::vector<std::string>& ids, int64_t timeout_ms) {
  std::vector<std::string> out(ids.size());
  GetEach(ids, timeout_ms, [&](size_t i, std::string_view bytes) { out[i] = std::string(bytes); });
  return out;
}

std::vector<bool> WaitReady(const std::vector<std::string>& ids, int num_ready,
                            int64_t timeout_ms) {
  std::vector<ObjectId> object_ids;
  for (const std::string& id : ids) object_ids.push_back(IdOf(id));
  if (local::LocalRuntime* local = Local()) {
    return local->Wait(object_ids, static_cast<size_t>(num_ready), timeout_ms);
  }
  return Core()->Wait(object_ids, static_cast<size_t>(num_ready), timeout_ms);
}

std::string NextGeneratorItem(const std::string& completed, int64_t timeout_ms) {
  Result<std::optional<ObjectId>> next = Core()->NextGeneratorItem(IdOf(completed), timeout_ms);
  if (!next.ok()) {
    Code code = next.status().code();
    if (code == Code::kDeadlineExceeded) throw TimeoutError(next.status().message());
    if (code == Code::kNotFound) throw Exception(next.status().ToString());
    throw UnavailableError(next.status().ToString());
  }
  return *next ? (*next)->Binary() : std::string();
}

}  // namespace airt::internal
