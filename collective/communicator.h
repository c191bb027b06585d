// The communicator under airt/collective.h (docs/collective.md): one rank's view of a group, with
// its sequence numbers, deadlines and the hung-rank diagnosis, over a Backend that moves the
// bytes (Gloo here, NCCL inside the GPU plugin). Errors are Status values; the public Group
// turns them into exceptions.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "airt/collective.h"
#include "common/status.h"

namespace airt::collective {

enum class OpKind : uint8_t {
  kAllreduce, kBroadcast, kAllgather, kReducescatter, kReduce, kSend, kRecv, kBarrier
};
const char* OpName(OpKind kind);

// One operation as a backend runs it. `input` and `output` are the same buffer for the in-place
// ones (allreduce, broadcast, reduce, send, recv). `peer`: the root, or the other rank of a
// send/recv. `tag`: the same on every rank for one collective; for send/recv, the count of
// earlier messages between the two ranks in that direction.
struct Operation {
  OpKind kind = OpKind::kBarrier;
  Buffer input, output;
  ReduceOp op = ReduceOp::SUM;
  int peer = 0;
  uint64_t tag = 0;
  std::chrono::milliseconds timeout{0};
};

// Moves the bytes of one group. Run blocks until the operation finished on this rank or failed:
// kDeadlineExceeded when `timeout` passed, kUnavailable when a peer's connection broke; the
// message is the backend's. Called from one thread at a time.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Status Run(const Operation& op) = 0;
};

// The head's KV as the rendezvous sees it (keys are the group's, under its prefix).
class RendezvousKv {
 public:
  virtual ~RendezvousKv() = default;
  virtual Status Put(const std::string& key, const std::string& value) = 0;
  virtual Result<std::optional<std::string>> Get(const std::string& key) = 0;
  // Deletes every key starting with `prefix`; how many there were.
  virtual Result<uint32_t> DeletePrefix(const std::string& prefix) = 0;
};

// Who a rank is, for the errors that name it.
struct RankInfo {
  int rank = 0;
  std::string node;              // its node's host:port
  int64_t pid = 0;
  std::string progress_address;  // where its progress is read (ProgressBoard::Read)
};

// Each rank's progress: written into this process's memory only (Record), read from another
// rank (Read) only after an operation passed its deadline.
class ProgressBoard {
 public:
  virtual ~ProgressBoard() = default;
  // The last operation this process entered in `group` (nullopt: it left the group, which the
  // board remembers with its last number).
  virtual void Record(const std::string& group, std::optional<uint64_t> entered) = 0;
  struct Progress {
    uint64_t entered = 0;  // the last operation it entered
    bool left = false;     // it has left the group since
  };
  // What `peer` recorded for `group`; nullopt: it never joined such a group.
  virtual Result<std::optional<Progress>> Read(const RankInfo& peer, const std::string& group,
                                               std::chrono::milliseconds timeout) = 0;
};

// Makes a backend for one group: `kv` holds the rendezvous keys under `prefix` until the
// Communicator deletes them. kDeadlineExceeded names the ranks that did not come.
using BackendFactory = std::function<Result<std::unique_ptr<Backend>>(
    const GroupOptions& options, RendezvousKv& kv, const std::string& prefix,
    const std::string& host)>;

// What a communicator uses outside itself; `kv` and `progress` must outlive it.
struct CommunicatorServices {
  RendezvousKv* kv = nullptr;
  ProgressBoard* progress = nullptr;
  RankInfo self;                  // rank is filled from the options
  std::string host = "127.0.0.1";  // the address this rank's connections listen on
  std::string key_prefix;          // prepended to the group's KV keys (the job's)
  BackendFactory backend;          // empty: by options.backend (gloo, nccl)
};

class Communicator {
 public:
  // Joins the group: publishes this rank's RankInfo under the group's prefix, lets the backend
  // rendezvous there, reads every rank's RankInfo, and deletes the prefix once every rank is past
  // it (on failure too). kInvalidArgument for bad options; kDeadlineExceeded: ranks missing
  // (named); kUnimplemented: a backend this build lacks.
  static Result<std::unique_ptr<Communicator>> Create(const GroupOptions& options,
                                                      CommunicatorServices services);
  ~Communicator();  // leaves the group (its progress is forgotten)

  const GroupOptions& options() const { return options_; }
  const std::vector<RankInfo>& ranks() const { return ranks_; }
  // The operation that passed its deadline (the group failed with kDeadlineExceeded then).
  const std::optional<Stall>& stall() const { return stall_; }

  Status Allreduce(Buffer data, ReduceOp op);
  Status Broadcast(Buffer data, int root);
  Status Allgather(Buffer input, Buffer output);
  Status Reducescatter(Buffer input, Buffer output, ReduceOp op);
  Status Reduce(Buffer data, int root, ReduceOp op);
  Status Send(Buffer data, int peer);
  Status Recv(Buffer data, int peer);
  Status Barrier();

 private:
  Communicator(GroupOptions options, CommunicatorServices services);
  Status CheckBuffer(const Buffer& b, const char* what) const;
  Status CheckRank(int r, const char* what, bool other) const;
  // Runs a collective (numbered) or a send/recv, and on failure asks the others how far they got.
  Status Run(Operation op);
  // The failure's message naming the ranks that never reached `op`; fills `stall` with them.
  std::string Diagnose(const Operation& op, uint64_t seq, const Status& failure, Stall& stall);
  std::string Describe(const RankInfo& r) const;
  std::string Where() const;

  GroupOptions options_;
  CommunicatorServices services_;
  std::unique_ptr<Backend> backend_;
  std::vector<RankInfo> ranks_;  // by rank
  uint64_t seq_ = 0;            // collectives entered
  std::map<int, uint64_t> sent_, received_;  // send/recv messages, by peer
  Status failed_;               // once an operation failed, every later one fails with it
  std::optional<Stall> stall_;  // set with failed_ when that was a deadline
};

// The Gloo backend (gloo_backend.cc): TCP transport on `host`; buffers in host memory.
Result<std::unique_ptr<Backend>> ConnectGloo(const GroupOptions& options, RendezvousKv& kv,
                                             const std::string& prefix, const std::string& host);
// The NCCL backend (nccl_backend.cc) through the GPU plugin (gpu/plugin_abi.h "NCCL"): rank 0's
// unique id handed over under `prefix` in `kv`; the process's first visible CUDA device; buffers
// in device memory. kUnimplemented: the plugin is not built or lacks NCCL;
// kFailedPrecondition: no CUDA device.
Result<std::unique_ptr<Backend>> ConnectNccl(const GroupOptions& options, RendezvousKv& kv,
                                             const std::string& prefix, const std::string& host);
// The GPU plugin's path: $AIRT_GPU_PLUGIN, else beside this library (., ../gpu, ../lib); "" when
// none exists.
std::string GpuPluginPath();

}  // namespace airt::collective
