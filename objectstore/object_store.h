// The node's shared-memory object store: one StoreServer per node, many StoreClients (workers,
// drivers, the node's transfer service) in other processes.
//
// Life cycle of an object: Create -> write -> Seal (or Abort) -> Get (pins) -> Release -> Delete.
// A sealed object is immutable. Reading a local sealed object takes no round trip to the server:
// the index and the pin counts live in the shared mapping. Create, Seal, Delete and waiting for an
// object that is not here yet go over the client's Unix socket.
//
// When the arena is full, the server first drops secondary copies (copies of objects held
// elsewhere) in least-recently-used order, then spills unpinned primary copies to its spill
// directory in LRU order, and restores them when they are read. A primary copy is never dropped.
// An object that still does not fit (or is larger than the arena) goes to fallback memory: a file
// of its own in the fallback folder, mapped by each process that writes or reads it (slower than
// the arena, bounded by the disk or a limit). Only when that fails too is Create refused.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"

namespace airt::objectstore {

namespace internal {
class ArenaMapping;
class BackgroundPopulator;
class FallbackMapping;
class SharedIndex;
class PinTable;
class SpillStorage;
class StoreLoop;
}  // namespace internal

// The longest owner a primary copy may name (Create, MakePrimary).
inline constexpr size_t kMaxOwnerBytes = 512;

// What a node's transfer service sent to other nodes, ever: counted by its TransferServer and
// reported by its store's Stats, so that any process of the node can read them. Thread-safe.
struct TransferCounters {
  std::atomic<uint64_t> objects_served{0};  // replies that carried an object
  std::atomic<uint64_t> bytes_served{0};    // their data and metadata
};

struct StoreOptions {
  std::string socket_path;                     // where clients connect; required
  uint64_t capacity_bytes = 1ull << 30;        // the data arena
  uint64_t max_objects = 1ull << 18;           // objects held at once, spilled ones included
  uint32_t max_clients = 64;                   // clients connected at once
  uint64_t pin_slots_per_client = 1ull << 14;  // distinct objects one client may pin at once
  std::string spill_dir;  // empty: no spilling (a full store then refuses new primary copies)
  // Where objects the arena cannot hold go, one file each; empty: nowhere (they are refused).
  std::string fallback_dir;
  uint64_t fallback_limit_bytes = ~uint64_t{0};  // their total at once; the default: the disk's
  bool prefault = true;                          // populate the arena in the background at start
  int poll_spin_us = 100;  // after serving a request, poll this long before sleeping (0: never)
  // The counters of the node's transfer service, shown in Stats; null: none (Stats shows 0).
  std::shared_ptr<const TransferCounters> transfer_counters;
};

// A point-in-time view of the store, for tests, `airt status` and the dashboard.
struct StoreStats {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;  // allocated in the arena
  uint64_t largest_free_block = 0;
  uint64_t num_objects = 0;  // every state, spilled ones included
  uint64_t num_sealed = 0;   // in memory and readable
  uint64_t num_creating = 0;
  uint64_t num_spilled = 0;
  uint64_t spilled_bytes = 0;   // currently on disk
  uint64_t num_pinned = 0;      // objects with at least one pin
  uint64_t total_evicted = 0;   // secondary copies dropped, ever
  uint64_t total_spilled = 0;   // primary copies written to disk, ever
  uint64_t total_restored = 0;  // read back from disk, ever
  uint32_t num_clients = 0;
  uint64_t mapped_bytes = 0;           // the whole shared file
  uint64_t prefault_target_bytes = 0;  // what the background prefault covers (0: prefault off)
  uint64_t prefaulted_bytes = 0;       // how much of it is done
  uint64_t num_fallback = 0;           // objects in fallback files now (being created included)
  uint64_t fallback_bytes = 0;         // the size of those files
  uint64_t total_fallback = 0;         // objects put in fallback files (created or restored), ever
  uint64_t num_primary = 0;  // sealed primary copies (spilled ones included; not being deleted)
  // Bytes (data and metadata) of the objects sealed here, ever: put, returned, or pulled.
  uint64_t total_sealed_bytes = 0;
  // Those of them sealed as secondary copies: what came in from other nodes' transfer services
  // (whichever process of this node pulled them), ever.
  uint64_t total_pulled_bytes = 0;
  // What this node's transfer service sent to other nodes, ever (StoreOptions::transfer_counters;
  // 0 without one).
  uint64_t transfer_objects_served = 0;
  uint64_t transfer_bytes_served = 0;
};

// Serves one node's store on a background thread. Thread-safe.
class StoreServer {
 public:
  // Creates the arena, binds the socket and starts serving. kInvalidArgument for a bad option,
  // kResourceExhausted when the memory cannot be had, kUnavailable when the socket cannot bind.
  static Result<std::unique_ptr<StoreServer>> Start(StoreOptions options);
  // As above with the spill storage given (tests inject faults this way); null: no spilling.
  static Result<std::unique_ptr<StoreServer>> Start(StoreOptions options,
                                                    std::unique_ptr<internal::SpillStorage> spill);

  // Stops serving, disconnects every client and frees the arena (clients' mappings stay valid).
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  const std::string& socket_path() const;
  StoreStats Stats() const;

 private:
  explicit StoreServer(std::unique_ptr<internal::StoreLoop> loop);
  std::unique_ptr<internal::StoreLoop> loop_;
};

class StoreClient;

// A created, not yet sealed object: write `data` and `metadata`, then Seal or Abort its id.
// Copies `n` bytes into an object being created, as Put does: non-temporal stores for large
// copies, faster than memcpy for bytes the writer will not read back.
void CopyToObject(uint8_t* dst, const uint8_t* src, size_t n);

struct MutableObject {
  ObjectId id;
  std::span<uint8_t> data;
  std::span<uint8_t> metadata;
};

// A read-only view of a sealed object, pinned (never evicted, spilled or freed) until Release or
// destruction. Must not outlive its StoreClient. Move-only.
class ObjectPin {
 public:
  ObjectPin() = default;
  ObjectPin(ObjectPin&& other) noexcept;
  ObjectPin& operator=(ObjectPin&& other) noexcept;
  ~ObjectPin() { Release(); }

  const ObjectId& id() const { return id_; }
  std::span<const uint8_t> data() const { return data_; }
  std::span<const uint8_t> metadata() const { return metadata_; }
  bool valid() const { return client_ != nullptr; }
  void Release();

 private:
  friend class StoreClient;
  StoreClient* client_ = nullptr;
  uint32_t slot_ = 0;
  ObjectId id_;
  std::span<const uint8_t> data_;
  std::span<const uint8_t> metadata_;
};

// A primary copy a store holds (StoreClient::ListPrimaries): an object created there, not pulled
// from another node, and the owner its creator named ("" when it named none).
struct PrimaryCopy {
  ObjectId id;
  uint64_t size = 0;  // data and metadata
  std::string owner;
};

struct PinInfo {
  ObjectId id;
  uint32_t count;
};

// One process's connection to its node's store. Thread-safe; requests over the socket are
// serialised, local reads are not.
class StoreClient {
 public:
  struct Options {
    int spin_us = 50;      // wait for a reply this long spinning before sleeping
    bool prefault = true;  // populate this process's mapping in the background
    // With prefault: the data arena too. False: the index only; data pages are mapped as this
    // process touches them (every client populating a large arena costs seconds of kernel time
    // and page tables; workers read few objects each).
    bool prefault_data = true;
  };
  // kUnavailable when no store listens at `socket_path`; kResourceExhausted when it has
  // max_clients clients already.
  static Result<std::unique_ptr<StoreClient>> Connect(const std::string& socket_path);
  static Result<std::unique_ptr<StoreClient>> Connect(const std::string& socket_path,
                                                      Options options);
  // Disconnects: the store undoes this client's pins and aborts its unsealed objects.
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  // Reserves data_size + metadata_size bytes for `id`, in the arena or else in a fallback file.
  // The spans stay valid until Seal or Abort. kAlreadyExists: id is here already.
  // kResourceExhausted: it cannot fit even after eviction and spilling, nor in fallback memory
  // (the message names the size, the capacity and its use, and the fallback folder); nothing
  // already stored is lost. `secondary` marks a copy of an object whose primary lives on another
  // node (evicted first, never spilled).
  // `owner` (at most kMaxOwnerBytes) names a primary copy's owner, read back by ListPrimaries
  // (a node that leaves tells each owner where its objects went); ignored for a secondary copy.
  Result<MutableObject> Create(const ObjectId& id, uint64_t data_size, uint64_t metadata_size = 0,
                               bool secondary = false, std::string_view owner = {});
  // Makes `id` immutable and readable; wakes Gets waiting for it. When it returns, every client
  // of this store sees the object. kNotFound: not created here; kFailedPrecondition: sealed
  // already or created by another client.
  Status Seal(const ObjectId& id);
  // Drops an unsealed object created by this client.
  Status Abort(const ObjectId& id);
  // Create, copy and Seal. Large objects are copied with non-temporal stores (see
  // internal/stream_copy.h), faster than memcpy for bytes the writer will not read back.
  Status Put(const ObjectId& id, std::span<const uint8_t> data,
             std::span<const uint8_t> metadata = {}, std::string_view owner = {});
  // The primary copies here with their owners, in no order. `more` (when given) is set when the
  // list was cut to fit one reply (about 15 MiB of ids and owners): ask again once these are
  // dealt with.
  Result<std::vector<PrimaryCopy>> ListPrimaries(bool* more = nullptr);
  // Makes sealed `id` (a pulled, secondary copy) the primary copy here, owned by `owner`: it is
  // spilled rather than evicted from now on, and listed by ListPrimaries. kNotFound: not sealed
  // here; kFailedPrecondition: being deleted; kInvalidArgument: `owner` too long.
  Status MakePrimary(const ObjectId& id, std::string_view owner);

  // Pins each of `ids`, waiting for those not here yet to be created and sealed here (another
  // node may be sending them), restoring spilled ones. timeout_ms < 0 waits forever.
  // kDeadlineExceeded names the first id still missing; no pins are kept then.
  Result<std::vector<ObjectPin>> Get(std::span<const ObjectId> ids, int64_t timeout_ms);
  Result<ObjectPin> Get(const ObjectId& id, int64_t timeout_ms);
  // Whether `id` is sealed here (in memory or spilled). No round trip.
  bool Contains(const ObjectId& id) const;
  // Deletes `id`; a pinned object goes when its last pin is released. kNotFound: not here;
  // kFailedPrecondition: still being created.
  Status Delete(const ObjectId& id);
  // Deletes every object of `job` here (its id's TaskId's ActorId ends with the job), each as
  // Delete would: a pinned one goes when its last pin is released, a spilled one from disk too.
  // Objects still being created are left alone (the store aborts them when their creator
  // disconnects). Returns how many objects it deleted.
  Result<uint64_t> DeleteJob(const JobId& job);
  // The pins this client holds now.
  std::vector<PinInfo> Pins() const;
  Result<StoreStats> Stats();

  // Populates this process's mapping of the index and the data arena now, so first writes pay no
  // page faults.
  void Warm();
  // The arena mapping's address range (lets callers check that a read was zero-copy; an object in
  // fallback memory lies in a mapping of its own, outside it).
  std::span<const uint8_t> mapping() const;

 private:
  friend class ObjectPin;
  StoreClient(int fd, std::unique_ptr<internal::ArenaMapping> mapping, uint32_t slot,
              Options options);
  Result<std::string> Call(uint16_t type, std::string_view body);
  Status Send(uint16_t type, std::string_view body);
  Status EndCreation(uint16_t type, const ObjectId& id);
  void ReleasePin(uint32_t slot, const ObjectId& id);

  int fd_;
  Options options_;
  std::unique_ptr<internal::ArenaMapping> mapping_;
  std::unique_ptr<internal::SharedIndex> index_;
  std::unique_ptr<internal::BackgroundPopulator> populator_;
  uint32_t client_slot_;

  mutable std::mutex socket_mu_;  // one request and its reply at a time
  uint32_t next_request_id_ = 1;  // guarded by socket_mu_

  mutable std::mutex pins_mu_;
  std::unique_ptr<internal::PinTable> pins_;  // guarded by pins_mu_

  // Objects in fallback memory, each mapped while this client creates or pins it.
  std::string fallback_dir_;
  struct FallbackViews;
  std::unique_ptr<FallbackViews> fallback_;  // its maps guarded by socket_mu_ and pins_mu_
};

}  // namespace airt::objectstore
