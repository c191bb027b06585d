// Moving objects between nodes: each node serves its sealed objects over TCP (Boost.Asio, on its
// own thread), and a puller on another node fetches them into its own store as secondary copies.
// Objects never cross nodes any other way: a node never maps another node's memory.
//
// Wire (TCP, little-endian), any number of requests per connection, answered in order:
//   request  = u32 kTransferMagic, 28-byte object id
//   response = u8 code, u32 message size, message, u64 data size, u64 metadata size, then the
//              data and metadata bytes (only when the code is kOk)
// The server writes straight from the pinned shared memory and the puller reads straight into
// the object it created: the bytes are copied by the kernel only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "objectstore/object_store.h"

namespace airt::objectstore {

inline constexpr uint32_t kTransferMagic = 0x31585441;  // "ATX1"

struct TransferServerSnapshot {
  uint64_t connections_accepted = 0;  // ever
  uint64_t connections_open = 0;
  uint64_t objects_served = 0;  // replies that carried an object, ever
  uint64_t bytes_served = 0;
};

// Serves the sealed objects of one node's store. Thread-safe to construct and destroy.
class TransferServer {
 public:
  struct Options {
    std::string store_socket;  // the local store to serve from (required)
    std::string bind_address = "127.0.0.1";
    uint16_t port = 0;  // 0: any free port (see port())
  };
  // kUnavailable when the store cannot be reached or the port cannot be bound.
  static Result<std::unique_ptr<TransferServer>> Start(Options options);
  // As above, counting objects_served and bytes_served in `counters` (the node's store shows
  // the same ones: StoreOptions::transfer_counters); null: counters of its own.
  static Result<std::unique_ptr<TransferServer>> Start(Options options,
                                                       std::shared_ptr<TransferCounters> counters);
  ~TransferServer();  // stops serving; transfers in flight are cut (the puller sees kUnavailable)
  TransferServer(const TransferServer&) = delete;
  TransferServer& operator=(const TransferServer&) = delete;

  uint16_t port() const;

  // A point-in-time view of the service, for tests, `airt status` and the dashboard.
  TransferServerSnapshot Snapshot() const;

  class Impl;

 private:
  explicit TransferServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One object to pull and the node whose transfer service holds it ("host:port").
struct PullRequest {
  ObjectId id;
  std::string address;
};

// A point-in-time view of a puller, for tests, `airt status` and the dashboard.
struct PullerSnapshot {
  struct Peer {
    std::string address;
    bool connected = false;      // a connection is open (or being opened) now
    uint64_t dials = 0;          // TCP connections opened to it, ever
    uint64_t in_flight = 0;      // objects requested on its connection and not answered yet
    uint64_t objects_pulled = 0;  // sealed here from it, ever
  };
  uint64_t connections_dialled = 0;  // TCP connections opened, ever (one per peer while healthy)
  uint64_t connections_open = 0;
  uint64_t connections_dropped = 0;  // broken, malformed or given up, ever
  uint64_t objects_requested = 0;    // requests written to peers, ever
  uint64_t objects_pulled = 0;       // sealed here, ever
  uint64_t bytes_pulled = 0;         // data and metadata of those
  uint64_t objects_failed = 0;       // requests that ended in an error (deadlines included)
  uint64_t requests_joined = 0;      // a pull found the object already on its way and waited
  std::vector<Peer> peers;           // by address
};

class PullBatch;

// Pulls objects from other nodes' TransferServers into the store of `local` (which must outlive
// it) as secondary copies. Thread-safe; every transfer runs on the puller's own Asio thread
// (never a KJ loop's), callers only wait.
//
// Each peer node gets one pooled TCP connection, kept between pulls and shared by every caller:
// requests for many objects are written on it without waiting for replies (pipelined) and the
// replies read in order, straight into objects created in `local`. A broken connection is
// dropped and the next pull redials. A pooled connection found broken as it is reused (before
// any reply: the peer restarted, or the idle connection was cut) has its requests sent again
// once on a fresh dial; one that breaks while replies arrive fails the objects not delivered
// (the peer is gone). An object another caller of this puller is already pulling is joined, never
// requested twice; one that another process is bringing into `local` is waited for (and pulled
// after all if that process gives up). A connection on which nobody waits for anything any more
// (every caller's deadline passed) is closed, which aborts its partly received object.
class ObjectPuller {
 public:
  // Starts the puller's thread.
  explicit ObjectPuller(StoreClient* local);
  // Fails what is still in flight with kCancelled, closes the connections, joins the thread.
  // Every PullBatch must be gone or finished by then.
  ~ObjectPuller();
  ObjectPuller(const ObjectPuller&) = delete;
  ObjectPuller& operator=(const ObjectPuller&) = delete;

  // Starts pulling each of `wanted` not already here, under one deadline for all of them
  // (timeout_ms < 0: none), and returns at once. Destroying the batch gives up what it still
  // waits for.
  std::unique_ptr<PullBatch> Start(std::span<const PullRequest> wanted, int64_t timeout_ms);
  // Start, then Wait: the outcome of each of `wanted`, in order (see PullBatch::Wait).
  std::vector<Status> PullEach(std::span<const PullRequest> wanted, int64_t timeout_ms);
  // Pulls `ids` from the node at `address`; the first failure in the order of `ids`, or Ok.
  // (Every object is attempted: one that fails does not stop the others.)
  Status Pull(const std::string& address, std::span<const ObjectId> ids, int64_t timeout_ms);
  Status Pull(const std::string& address, const ObjectId& id, int64_t timeout_ms) {
    return Pull(address, std::span<const ObjectId>(&id, 1), timeout_ms);
  }

  PullerSnapshot Snapshot() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// The objects of one Start, arriving. Must not outlive its puller. Thread-compatible: one thread
// waits.
class PullBatch {
 public:
  ~PullBatch();  // gives up the objects not arrived yet (another batch waiting for one keeps it)
  PullBatch(const PullBatch&) = delete;
  PullBatch& operator=(const PullBatch&) = delete;

  // Blocks until every object has arrived or failed, then returns each one's Status in the order
  // of Start (the same vector on later calls). Each error names the object and the node.
  // kNotFound: the node holds no sealed copy. kUnavailable: the node cannot be reached, or the
  // connection broke again after one redial. kResourceExhausted: no room here.
  // kDeadlineExceeded: the batch's deadline passed first. kInvalidArgument: a malformed address,
  // or a malformed reply (the connection is dropped; the objects after it are asked again on a
  // fresh one). kCancelled: the puller was destroyed.
  const std::vector<Status>& Wait();
  // Whether Wait would return at once (no object is on its way any more).
  bool Done() const;

  struct State;

 private:
  friend class ObjectPuller;
  PullBatch(std::shared_ptr<ObjectPuller::Impl> puller, std::shared_ptr<State> state);
  std::shared_ptr<ObjectPuller::Impl> puller_;
  std::shared_ptr<State> state_;
  bool waited_ = false;
};

}  // namespace airt::objectstore
