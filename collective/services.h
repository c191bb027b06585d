// What a Communicator uses outside itself (communicator.h's RendezvousKv and ProgressBoard):
// the cluster's (the head's KV and the core worker's progress, over airt/driver.h's internal
// calls) and in-memory ones, for the ranks of one process (tests, threads as ranks).
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "collective/communicator.h"

namespace airt::collective {

// The head's KV, namespace "airt_collective". Needs airt::Init.
class HeadKv final : public RendezvousKv {
 public:
  Status Put(const std::string& key, const std::string& value) override;
  Result<std::optional<std::string>> Get(const std::string& key) override;
  Result<uint32_t> DeletePrefix(const std::string& prefix) override;
};

// This process's core worker keeps the progress; others' is read through their proto::Owner.
class CoreWorkerProgress final : public ProgressBoard {
 public:
  void Record(const std::string& group, std::optional<uint64_t> entered) override;
  Result<std::optional<Progress>> Read(const RankInfo& peer, const std::string& group,
                                       std::chrono::milliseconds timeout) override;
};

// The services of a rank of this process in the cluster over `kv` and `progress` (a HeadKv and a
// CoreWorkerProgress, which must outlive the communicator): this process's node, pid and
// progress address, and the job's key prefix. kUnavailable without airt::Init.
Result<CommunicatorServices> ClusterServices(RendezvousKv& kv, ProgressBoard& progress);

// A KV in memory, shared by the ranks of one process. Thread-safe.
class MemoryKv final : public RendezvousKv {
 public:
  Status Put(const std::string& key, const std::string& value) override;
  Result<std::optional<std::string>> Get(const std::string& key) override;
  Result<uint32_t> DeletePrefix(const std::string& prefix) override;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> rows_;  // guarded by mu_
};

// The progress of the ranks of one process, each rank's under its progress_address (so one
// board serves every rank). `Record` writes under the address given at construction: make one
// view per rank with ForRank. Thread-safe.
class MemoryProgress {
 public:
  class View final : public ProgressBoard {
   public:
    View(MemoryProgress& board, std::string address) : board_(board), address_(std::move(address)) {}
    void Record(const std::string& group, std::optional<uint64_t> entered) override;
    Result<std::optional<Progress>> Read(const RankInfo& peer, const std::string& group,
                                         std::chrono::milliseconds timeout) override;

   private:
    MemoryProgress& board_;
    std::string address_;
  };
  std::unique_ptr<View> ForRank(const std::string& address) {
    return std::make_unique<View>(*this, address);
  }

 private:
  std::mutex mu_;
  // by address, group
  std::map<std::pair<std::string, std::string>, ProgressBoard::Progress> entered_;
};

}  // namespace airt::collective
