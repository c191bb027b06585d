#include "objectstore/internal/protocol.h"

namespace airt::objectstore::internal {

void EncodeHeader(const FrameHeader& h, char* out) {
  std::string buf;
  buf.reserve(kHeaderSize);
  WireWriter w(&buf);
  w.Put(h.body_size);
  w.Put(h.type);
  w.Put(h.flags);
  w.Put(h.request_id);
  w.Put(h.reserved);
  std::memcpy(out, buf.data(), kHeaderSize);
}

Status DecodeHeader(const char* in, FrameHeader* h) {
  WireReader r(std::string_view(in, kHeaderSize));
  r.Get(&h->body_size);
  r.Get(&h->type);
  r.Get(&h->flags);
  r.Get(&h->request_id);
  r.Get(&h->reserved);
  if (h->body_size > kMaxBodySize) {
    return InvalidArgument("frame body of " + std::to_string(h->body_size) +
                           " bytes is over the limit of " + std::to_string(kMaxBodySize));
  }
  if (h->reserved != 0) return InvalidArgument("frame header's reserved field is not 0");
  return Status::Ok();
}

std::string MakeFrame(MessageType type, uint16_t flags, uint32_t request_id,
                      std::string_view body) {
  std::string frame(kHeaderSize, '\0');
  EncodeHeader(
      {static_cast<uint32_t>(body.size()), static_cast<uint16_t>(type), flags, request_id, 0},
      frame.data());
  frame.append(body);
  return frame;
}

std::string ReplyBody(const Status& status) {
  std::string body;
  WireWriter w(&body);
  w.Put(static_cast<uint8_t>(status.code()));
  w.Put(static_cast<uint32_t>(status.message().size()));
  w.PutBytes(status.message());
  return body;
}

Status ParseReplyStatus(WireReader* reader) {
  uint8_t code;
  uint32_t size;
  std::string_view message;
  if (!reader->Get(&code) || !reader->Get(&size) || !reader->GetBytes(size, &message)) {
    return Internal("truncated reply from the object store");
  }
  if (code > static_cast<uint8_t>(Code::kInternal)) {
    return Internal("reply from the object store has unknown code " + std::to_string(code));
  }
  if (code == static_cast<uint8_t>(Code::kOk)) return Status::Ok();
  return Status(static_cast<Code>(code), std::string(message));
}

}  // namespace airt::objectstore::internal

namespace airt::objectstore::internal {
namespace {
template <typename Fn>
void ForEachStatsField(StoreStats& s, Fn&& fn) {
  fn(s.capacity_bytes);
  fn(s.used_bytes);
  fn(s.largest_free_block);
  fn(s.num_objects);
  fn(s.num_sealed);
  fn(s.num_creating);
  fn(s.num_spilled);
  fn(s.spilled_bytes);
  fn(s.num_pinned);
  fn(s.total_evicted);
  fn(s.total_spilled);
  fn(s.total_restored);
  fn(s.num_clients);
  fn(s.mapped_bytes);
  fn(s.prefault_target_bytes);
  fn(s.prefaulted_bytes);
  fn(s.num_fallback);
  fn(s.fallback_bytes);
  fn(s.total_fallback);
  fn(s.num_primary);
  fn(s.total_sealed_bytes);
  fn(s.total_pulled_bytes);
  fn(s.transfer_objects_served);
  fn(s.transfer_bytes_served);
}
}  // namespace

void PutStats(WireWriter* w, const StoreStats& s) {
  StoreStats copy = s;
  ForEachStatsField(copy, [w](auto& field) { w->Put(static_cast<uint64_t>(field)); });
}

bool GetStats(WireReader* r, StoreStats* s) {
  bool ok = true;
  ForEachStatsField(*s, [&](auto& field) {
    uint64_t v = 0;
    ok = ok && r->Get(&v);
    field = static_cast<std::remove_reference_t<decltype(field)>>(v);
  });
  return ok;
}

}  // namespace airt::objectstore::internal
