#include "common/ids.h"

#include <random>

namespace airt {
namespace internal {

std::string ToHex(const uint8_t* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 0xf];
  }
  return out;
}

namespace {
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

bool FromHex(std::string_view hex, uint8_t* out, size_t n) {
  if (hex.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    int hi = HexValue(hex[2 * i]);
    int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

void FillRandom(uint8_t* out, size_t n) {
  thread_local std::mt19937_64 gen([] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }());
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = gen();
    std::memcpy(out + i, &v, std::min<size_t>(8, n - i));
  }
}

}  // namespace internal

ActorId ActorId::Of(const JobId& job) {
  ActorId id;
  internal::FillRandom(id.mutable_data(), 12);
  std::memcpy(id.mutable_data() + 12, job.data(), JobId::kSize);
  return id;
}

ActorId ActorId::NilFor(const JobId& job) {
  ActorId id;
  std::memcpy(id.mutable_data() + 12, job.data(), JobId::kSize);
  return id;
}

TaskId TaskId::Of(const ActorId& actor) {
  TaskId id;
  internal::FillRandom(id.mutable_data(), 8);
  std::memcpy(id.mutable_data() + 8, actor.data(), ActorId::kSize);
  return id;
}

TaskId TaskId::ForDriver(const JobId& job) {
  TaskId id;
  std::memset(id.mutable_data(), 0, 8);
  ActorId nil = ActorId::NilFor(job);
  std::memcpy(id.mutable_data() + 8, nil.data(), ActorId::kSize);
  return id;
}

namespace {
ObjectId MakeObjectId(const TaskId& task, uint32_t index) {
  ObjectId id;
  std::memcpy(id.mutable_data(), task.data(), TaskId::kSize);
  // Little-endian on the wire and in memory, whatever the host.
  for (int i = 0; i < 4; ++i) id.mutable_data()[TaskId::kSize + i] = (index >> (8 * i)) & 0xff;
  return id;
}
}  // namespace

ObjectId ObjectId::ForReturn(const TaskId& task, uint32_t return_index) {
  return MakeObjectId(task, return_index & ~kPutIndexBit);
}

ObjectId ObjectId::ForPut(const TaskId& task, uint32_t put_index) {
  return MakeObjectId(task, kPutIndexBit | put_index);
}

uint32_t ObjectId::Index() const {
  uint32_t index = 0;
  for (int i = 0; i < 4; ++i) index |= static_cast<uint32_t>(data()[TaskId::kSize + i]) << (8 * i);
  return index;
}

}  // namespace airt
