// Binary identifiers sized as Ray's, with hex forms.
//   JobId 4 bytes; ActorId 16 = 12 unique + JobId; TaskId 24 = 8 unique + ActorId;
//   ObjectId 28 = TaskId + 4-byte index; NodeId and WorkerId 28 random bytes.
// An ObjectId made by a task's return i (1-based) has index i; the p-th Put of a task has index
// kPutIndexBit | p, so lineage can tell "re-run the task" from "the owner's put".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace airt {

namespace internal {
// Lowercase hex of `bytes`.
std::string ToHex(const uint8_t* bytes, size_t n);
// Fills `out` from exactly 2*n hex digits; false on a wrong length or a non-hex digit.
bool FromHex(std::string_view hex, uint8_t* out, size_t n);
// Fills `out` with n bytes from a per-thread generator seeded from the OS.
void FillRandom(uint8_t* out, size_t n);
}  // namespace internal

// A fixed-size id. `Tag` keeps ids of different kinds from mixing. The all-0xff id is Nil.
template <size_t N, typename Tag>
class BaseId {
 public:
  static constexpr size_t kSize = N;

  BaseId() { bytes_.fill(0xff); }
  static BaseId Nil() { return BaseId(); }
  static BaseId FromRandom() {
    BaseId id;
    internal::FillRandom(id.bytes_.data(), N);
    return id;
  }
  // kInvalidArgument unless `binary` has exactly kSize bytes.
  static Result<BaseId> FromBinary(std::string_view binary) {
    if (binary.size() != N) {
      return InvalidArgument("id must be " + std::to_string(N) + " bytes, got " +
                             std::to_string(binary.size()));
    }
    BaseId id;
    std::memcpy(id.bytes_.data(), binary.data(), N);
    return id;
  }
  // kInvalidArgument unless `hex` has exactly 2*kSize hex digits.
  static Result<BaseId> FromHex(std::string_view hex) {
    BaseId id;
    if (!internal::FromHex(hex, id.bytes_.data(), N)) {
      return InvalidArgument("id must be " + std::to_string(2 * N) + " hex digits, got '" +
                             std::string(hex.substr(0, 2 * N + 8)) + "'");
    }
    return id;
  }
  // Copies kSize bytes from `data`; the caller guarantees they are there.
  static BaseId FromRaw(const uint8_t* data) {
    BaseId id;
    std::memcpy(id.bytes_.data(), data, N);
    return id;
  }

  bool IsNil() const { return *this == Nil(); }
  const uint8_t* data() const { return bytes_.data(); }
  uint8_t* mutable_data() { return bytes_.data(); }
  std::string Binary() const {
    return std::string(reinterpret_cast<const char*>(bytes_.data()), N);
  }
  std::string Hex() const { return internal::ToHex(bytes_.data(), N); }
  size_t Hash() const {
    // FNV-1a over the bytes: ids are random or derived from random ids, so this spreads well.
    uint64_t h = 1469598103934665603ull;
    for (uint8_t b : bytes_) h = (h ^ b) * 1099511628211ull;
    return static_cast<size_t>(h);
  }

  friend bool operator==(const BaseId& a, const BaseId& b) { return a.bytes_ == b.bytes_; }
  friend bool operator!=(const BaseId& a, const BaseId& b) { return !(a == b); }
  friend bool operator<(const BaseId& a, const BaseId& b) { return a.bytes_ < b.bytes_; }

 protected:
  std::array<uint8_t, N> bytes_;
};

struct JobIdTag {};
struct ActorIdTag {};
struct TaskIdTag {};
struct ObjectIdTag {};
struct NodeIdTag {};
struct WorkerIdTag {};
struct PlacementGroupIdTag {};

using JobId = BaseId<4, JobIdTag>;
using NodeId = BaseId<28, NodeIdTag>;
using WorkerId = BaseId<28, WorkerIdTag>;
// 18 random bytes, as long as Ray's PlacementGroupID.
using PlacementGroupId = BaseId<18, PlacementGroupIdTag>;

class ActorId : public BaseId<16, ActorIdTag> {
 public:
  using BaseId::BaseId;
  ActorId(const BaseId& base) : BaseId(base) {}  // NOLINT(google-explicit-constructor)
  static ActorId Of(const JobId& job);           // 12 random bytes, then the job
  static ActorId NilFor(const JobId& job);       // 12 0xff bytes, then the job: no actor
  JobId Job() const { return JobId::FromRaw(data() + 12); }
};

class TaskId : public BaseId<24, TaskIdTag> {
 public:
  using BaseId::BaseId;
  TaskId(const BaseId& base) : BaseId(base) {}  // NOLINT(google-explicit-constructor)
  static TaskId Of(const ActorId& actor);       // 8 random bytes, then the actor (or nil actor)
  // The id of a driver's own "task", the parent of what the driver submits and puts.
  static TaskId ForDriver(const JobId& job);
  ActorId Actor() const { return ActorId::FromRaw(data() + 8); }
  JobId Job() const { return Actor().Job(); }
};

class ObjectId : public BaseId<28, ObjectIdTag> {
 public:
  static constexpr uint32_t kPutIndexBit = 0x80000000u;

  using BaseId::BaseId;
  ObjectId(const BaseId& base) : BaseId(base) {}  // NOLINT(google-explicit-constructor)
  // The `return_index`-th (1-based) return of `task`.
  static ObjectId ForReturn(const TaskId& task, uint32_t return_index);
  // The `put_index`-th (1-based) Put made while `task` ran.
  static ObjectId ForPut(const TaskId& task, uint32_t put_index);

  TaskId Task() const { return TaskId::FromRaw(data()); }
  uint32_t Index() const;  // the raw index, with kPutIndexBit for puts
  bool IsPut() const { return (Index() & kPutIndexBit) != 0; }
};

}  // namespace airt

template <size_t N, typename Tag>
struct std::hash<airt::BaseId<N, Tag>> {
  size_t operator()(const airt::BaseId<N, Tag>& id) const { return id.Hash(); }
};
template <>
struct std::hash<airt::ActorId> {
  size_t operator()(const airt::ActorId& id) const { return id.Hash(); }
};
template <>
struct std::hash<airt::TaskId> {
  size_t operator()(const airt::TaskId& id) const { return id.Hash(); }
};
template <>
struct std::hash<airt::ObjectId> {
  size_t operator()(const airt::ObjectId& id) const { return id.Hash(); }
};
