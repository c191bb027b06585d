// The store's I/O shell: an epoll loop on its own thread that accepts clients, reads frames,
// dispatches them to the ObjectTable, parks Wait requests until their objects are sealed or their
// deadline passes, and notices departed clients. Everything below runs on that thread except
// Stats(), which takes the same lock the loop holds while it works.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "objectstore/internal/arena_mapping.h"
#include "objectstore/internal/object_table.h"
#include "objectstore/internal/protocol.h"
#include "objectstore/object_store.h"

namespace airt::objectstore::internal {

class StoreLoop {
 public:
  static Result<std::unique_ptr<StoreLoop>> Start(StoreOptions options,
                                                  std::unique_ptr<SpillStorage> spill);
  ~StoreLoop();  // stops the thread, closes every client

  const std::string& socket_path() const { return options_.socket_path; }
  StoreStats Stats() const;

 private:
  using Clock = std::chrono::steady_clock;

  struct Session {
    UniqueFd fd;
    int32_t client_slot = -1;  // assigned by Hello
    std::string in;
    std::string out;
    bool closing = false;  // flush `out`, then close
  };
  struct PendingWait {
    uint64_t session;
    uint32_t request_id;
    std::vector<ObjectId> ids;
    std::vector<uint8_t> codes;  // kOk once ready; kNotFound while waited for
    size_t missing = 0;
    Clock::time_point deadline;
    bool has_deadline = false;
  };

  StoreLoop(StoreOptions options, ArenaMapping arena, UniqueFd listener, UniqueFd wake,
            UniqueFd epoll, std::unique_ptr<SpillStorage> spill,
            std::unique_ptr<FallbackFiles> fallback);
  void Run();
  void Accept();
  void OnReadable(uint64_t session_id);
  void Flush(uint64_t session_id);
  void Close(uint64_t session_id);
  void HandleFrame(uint64_t session_id, const FrameHeader& h, std::string_view body);
  void Reply(uint64_t session_id, uint32_t request_id, const Status& status,
             std::string_view payload = {});
  void HandleHello(uint64_t session_id, const FrameHeader& h, WireReader r);
  void HandleWait(uint64_t session_id, const FrameHeader& h, WireReader r);
  void OnSealed(const ObjectId& id);
  void FinishWait(uint64_t wait_id);
  void ExpireWaits();
  int NextTimeoutMs() const;
  StoreStats StatsLocked() const;

  StoreOptions options_;
  ArenaMapping arena_;
  UniqueFd listener_;
  UniqueFd wake_;  // eventfd: Stop
  UniqueFd epoll_;
  std::unique_ptr<BackgroundPopulator> populator_;

  mutable std::mutex mu_;  // held by the loop while it works; Stats() takes it
  ObjectTable table_;
  std::unordered_map<uint64_t, Session> sessions_;
  uint64_t next_session_ = 1;
  std::vector<bool> slot_in_use_;
  std::unordered_map<uint64_t, PendingWait> waits_;
  uint64_t next_wait_ = 1;
  std::unordered_multimap<ObjectId, uint64_t> waiters_;  // object -> wait id
  std::multimap<Clock::time_point, uint64_t> deadlines_;

  std::thread thread_;
};

}  // namespace airt::objectstore::internal
