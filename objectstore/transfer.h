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

#include "common/ids.h"
#include "common/status.h"
#include "objectstore/object_store.h"

namespace airt::objectstore {

inline constexpr uint32_t kTransferMagic = 0x31585441;  // "ATX1"

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
  ~TransferServer();  // stops serving; transfers in flight are cut (the puller sees kUnavailable)
  TransferServer(const TransferServer&) = delete;
  TransferServer& operator=(const TransferServer&) = delete;

  uint16_t port() const;

  class Impl;

 private:
  explicit TransferServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Pulls objects from other nodes' TransferServers into the store of `local`, which must outlive
// it. Each call uses its own connection and blocks its thread; calls from several threads run
// in parallel.
class ObjectPuller {
 public:
  explicit ObjectPuller(StoreClient* local) : local_(local) {}

  // Fetches each of `ids` not already here from the node at `address` ("host:port"), requests
  // pipelined on one connection, and seals each as a secondary copy. Stops at the first failure,
  // keeping what was pulled before it; a partly received object is aborted, never sealed. An
  // object another pull is bringing in at the same time is waited for, not pulled twice (and
  // pulled after all if that other pull fails).
  // kNotFound: the peer does not hold a sealed copy. kUnavailable: the peer cannot be reached
  // or went away mid-transfer. kResourceExhausted: no room here. kDeadlineExceeded: timeout_ms
  // (< 0: none) passed. kInvalidArgument: a malformed address or reply.
  Status Pull(const std::string& address, std::span<const ObjectId> ids, int64_t timeout_ms);
  Status Pull(const std::string& address, const ObjectId& id, int64_t timeout_ms) {
    return Pull(address, std::span<const ObjectId>(&id, 1), timeout_ms);
  }

 private:
  StoreClient* local_;
};

}  // namespace airt::objectstore
