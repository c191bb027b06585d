// The store's socket protocol: length-prefixed frames over a Unix stream socket.
//
//   frame  = header (16 bytes) + body (header.body_size bytes, at most kMaxBodySize)
//   header = u32 body_size, u16 type, u16 flags, u32 request_id, u32 reserved (0)
//   reply  = a frame of type kReply echoing request_id; body = u8 code, u32 message size,
//            message, then the payload of the request's type
//
// All integers are little-endian. Every request gets exactly one reply, in order, except Released,
// which never gets one. The header's flags are 0 (reserved for later versions). A body the
// type cannot parse gets a kInvalidArgument reply; a header announcing more than kMaxBodySize gets
// one too, and then the connection is closed, since the stream cannot be resynchronised.
//
//   Hello    u32 version, i32 pid            -> u32 client slot, u64 file size, u32 n, n bytes of
//            the fallback folder ("" when none), + the memfd
//   Create   id, u64 data size, u64 metadata size, u8 flags (kCreateSecondary)[, u32 n, n bytes
//            of the owner]  -> u64 offset (kFallbackBit | number: in fallback file `number`, see
//            fallback_files.h)
//   Seal     id                              -> (status only)
//   Abort    id                              -> (status only)
//   Delete   u32 n, n ids                    -> (status only; the first failure)
//   DeleteJob job id (4 bytes)               -> u64 objects deleted (see StoreClient::DeleteJob)
//   Wait     i64 timeout ms (<0: forever), u32 n, n ids -> u32 n, n x u8 code
//            (replies when every id is sealed and in memory here, or at the timeout; kOk ids are
//            then pinnable through the shared index)
//   Released id: a client dropped the last pin of an object whose delete is pending (no reply)
//   Stats    (empty)                         -> StoreStats fields
//   ListPrimaries (empty)                    -> u8 more, u32 n, n x (id, u64 size, u32 m, m bytes
//            of the owner)
//   MakePrimary id, u32 n, n bytes of the owner -> (status only)
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "common/status.h"
#include "objectstore/object_store.h"

namespace airt::objectstore::internal {

inline constexpr uint32_t kProtocolVersion = 2;
inline constexpr size_t kHeaderSize = 16;
inline constexpr uint32_t kMaxBodySize = 16u << 20;
inline constexpr uint8_t kCreateSecondary = 1;
// What one ListPrimaries reply carries at most (under kMaxBodySize, which a client also reads by).
inline constexpr size_t kMaxPrimariesReply = 15u << 20;

enum class MessageType : uint16_t {
  kHello = 1,
  kCreate = 2,
  kSeal = 3,
  kAbort = 4,
  kDelete = 5,
  kWait = 6,
  kReleased = 7,
  kStats = 8,
  kDeleteJob = 9,
  kListPrimaries = 10,
  kMakePrimary = 11,
  kReply = 100,
};

struct FrameHeader {
  uint32_t body_size = 0;
  uint16_t type = 0;
  uint16_t flags = 0;
  uint32_t request_id = 0;
  uint32_t reserved = 0;
};

// Appends little-endian fields to a buffer.
class WireWriter {
 public:
  explicit WireWriter(std::string* out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    static_assert(std::is_integral_v<T>);
    char b[sizeof(T)];
    for (size_t i = 0; i < sizeof(T); ++i)
      b[i] = static_cast<char>(static_cast<uint64_t>(v) >> (8 * i));
    out_->append(b, sizeof(T));
  }
  void PutBytes(std::string_view bytes) { out_->append(bytes); }
  void PutId(const ObjectId& id) {
    out_->append(reinterpret_cast<const char*>(id.data()), ObjectId::kSize);
  }

 private:
  std::string* out_;
};

// Reads little-endian fields; each Get returns false (and reads nothing) past the end.
class WireReader {
 public:
  explicit WireReader(std::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T* v) {
    static_assert(std::is_integral_v<T>);
    if (in_.size() < sizeof(T)) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      x |= static_cast<uint64_t>(static_cast<uint8_t>(in_[i])) << (8 * i);
    *v = static_cast<T>(x);
    in_.remove_prefix(sizeof(T));
    return true;
  }
  bool GetBytes(size_t n, std::string_view* bytes) {
    if (in_.size() < n) return false;
    *bytes = in_.substr(0, n);
    in_.remove_prefix(n);
    return true;
  }
  bool GetId(ObjectId* id) {
    if (in_.size() < ObjectId::kSize) return false;
    *id = ObjectId::FromRaw(reinterpret_cast<const uint8_t*>(in_.data()));
    in_.remove_prefix(ObjectId::kSize);
    return true;
  }
  size_t remaining() const { return in_.size(); }

 private:
  std::string_view in_;
};

// Encodes a header into 16 bytes at `out`.
void EncodeHeader(const FrameHeader& h, char* out);
// Decodes 16 bytes; kInvalidArgument when the body is over kMaxBodySize or reserved is not 0.
Status DecodeHeader(const char* in, FrameHeader* h);

// A whole frame: header then body.
std::string MakeFrame(MessageType type, uint16_t flags, uint32_t request_id, std::string_view body);
// The start of a reply body: code and message; the caller appends the payload on success.
std::string ReplyBody(const Status& status);
// Parses the code and message off the front of a reply body. A code outside the enum or a
// truncated body is a kInternal status (the peer is not speaking this protocol).
Status ParseReplyStatus(WireReader* reader);

}  // namespace airt::objectstore::internal

namespace airt::objectstore::internal {

// The Stats reply's payload: every StoreStats field in declaration order, as u64.
void PutStats(WireWriter* w, const StoreStats& s);
bool GetStats(WireReader* r, StoreStats* s);

}  // namespace airt::objectstore::internal
