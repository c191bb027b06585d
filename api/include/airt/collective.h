// Collective communication among the ranks of a group (tasks, actors or drivers), shaped like
// Ray's ray.util.collective (docs/collective.md):
//
//   auto group = airt::collective::Group::Init(/*world_size=*/2, /*rank=*/r);  // "gloo", "default"
//   std::vector<float> grad = ...;
//   group->Allreduce(std::span<float>(grad), airt::collective::ReduceOp::AVERAGE);
//
// Each rank of a group calls the group's operations in the same order. Every operation has a
// deadline (GroupOptions::timeout_ms); when it passes, every rank's error (TimeoutError) names the
// ranks, with their nodes and pids, that never reached the operation. A failed group stays
// failed: destroy it and create it again. Errors are thrown as airt::Exception subclasses
// (airt/exceptions.h): InvalidArgumentError for bad input, TimeoutError, UnavailableError,
// UnimplementedError. Needs airt::Init (no local mode).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace airt::collective {

// Ray's ReduceOp, plus AVERAGE (airt's own: SUM divided by the world size; integer types divide
// with truncation toward zero).
enum class ReduceOp : uint8_t { SUM = 0, PRODUCT = 1, MIN = 2, MAX = 3, AVERAGE = 4 };

enum class DataType : uint8_t { kInt8, kUint8, kInt32, kInt64, kFloat16, kFloat32, kFloat64 };

// IEEE 754 half precision, as stored (numpy's float16, torch.half).
struct Float16 {
  uint16_t bits = 0;
};

template <typename T>
constexpr DataType DataTypeOf() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, int8_t>) return DataType::kInt8;
  else if constexpr (std::is_same_v<U, uint8_t>) return DataType::kUint8;
  else if constexpr (std::is_same_v<U, int32_t>) return DataType::kInt32;
  else if constexpr (std::is_same_v<U, int64_t>) return DataType::kInt64;
  else if constexpr (std::is_same_v<U, Float16>) return DataType::kFloat16;
  else if constexpr (std::is_same_v<U, float>) return DataType::kFloat32;
  else if constexpr (std::is_same_v<U, double>) return DataType::kFloat64;
  else static_assert(sizeof(T) == 0, "collectives take int8, uint8, int32, int64, Float16, "
                                      "float or double elements");
}
size_t ElementSize(DataType type);
const char* DataTypeName(DataType type);

// Memory an operation reads or writes: `count` elements of `type` at `data`.
struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  DataType type = DataType::kFloat32;
  size_t bytes() const { return count * ElementSize(type); }
};
template <typename T>
Buffer View(std::span<T> span) {
  return Buffer{const_cast<std::remove_cv_t<T>*>(span.data()), span.size(), DataTypeOf<T>()};
}

struct GroupOptions {
  int world_size = 1;
  int rank = 0;
  std::string backend = "gloo";  // "gloo" (CPU memory) or "nccl" (device memory, GPU plugin)
  std::string group_name = "default";
  // Every operation's deadline, and joining's (Ray's gloo_timeout default: 30 s).
  int64_t timeout_ms = 30000;
};

// A rank the hung-rank diagnosis named.
struct StalledRank {
  int rank = 0;
  std::string node;  // its node's host:port
  int64_t pid = 0;
};

// The operation that passed its deadline on this rank, and the ranks that had not reached it
// when asked then (for a send/recv: the peer). `never_reached` is empty when every rank had
// reached it or none could be asked.
struct Stall {
  std::string operation;  // "allreduce", "send", ... (OpName)
  uint64_t sequence = 0;  // the collective's number in the group (1, 2, ...); 0 for send/recv
  std::vector<StalledRank> never_reached;
};

class Communicator;

// One rank's membership of a group. Destroying it leaves the group (Ray's
// destroy_collective_group); the others' next operation then fails by its deadline. Calls from
// one thread at a time.
class Group {
 public:
  // Joins: waits until every rank has called Init with the same world size, backend and name
  // (within timeout_ms: TimeoutError names the ranks missing).
  static std::unique_ptr<Group> Init(const GroupOptions& options);
  static std::unique_ptr<Group> Init(int world_size, int rank, const std::string& backend = "gloo",
                                     const std::string& group_name = "default");
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const;
  int world_size() const;
  const std::string& name() const;
  const std::string& backend() const;
  // The operation whose deadline failed this group, once one did (what its TimeoutError said,
  // as data: a training loop's supervisor restarts the gang naming the hung rank).
  std::optional<Stall> stall() const;

  // In place on every rank.
  void Allreduce(Buffer data, ReduceOp op = ReduceOp::SUM);
  // root's data to every rank's.
  void Broadcast(Buffer data, int root = 0);
  // output (world_size × input.count) holds every rank's input in rank order.
  void Allgather(Buffer input, Buffer output);
  // input (world_size × output.count) reduced over the ranks; rank r keeps block r in output.
  void Reducescatter(Buffer input, Buffer output, ReduceOp op = ReduceOp::SUM);
  // In place at root; the others' data stays as it was.
  void Reduce(Buffer data, int root = 0, ReduceOp op = ReduceOp::SUM);
  // Point to point; each Send to a peer matches that peer's Recv from this rank, in order.
  void Send(Buffer data, int peer);
  void Recv(Buffer data, int peer);
  void Barrier();

  template <typename T>
  void Allreduce(std::span<T> data, ReduceOp op = ReduceOp::SUM) {
    Allreduce(View(data), op);
  }
  template <typename T>
  void Broadcast(std::span<T> data, int root = 0) {
    Broadcast(View(data), root);
  }
  template <typename T>
  void Allgather(std::span<const T> input, std::span<T> output) {
    Allgather(View(input), View(output));
  }
  template <typename T>
  void Reducescatter(std::span<const T> input, std::span<T> output, ReduceOp op = ReduceOp::SUM) {
    Reducescatter(View(input), View(output), op);
  }
  template <typename T>
  void Reduce(std::span<T> data, int root = 0, ReduceOp op = ReduceOp::SUM) {
    Reduce(View(data), root, op);
  }
  template <typename T>
  void Send(std::span<const T> data, int peer) {
    Send(View(data), peer);
  }
  template <typename T>
  void Recv(std::span<T> data, int peer) {
    Recv(View(data), peer);
  }

 private:
  explicit Group(std::unique_ptr<Communicator> communicator);
  std::unique_ptr<Communicator> communicator_;
};

}  // namespace airt::collective
