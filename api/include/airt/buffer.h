// airt::Buffer: bytes as an object's value, read without a copy.
//
//   std::vector<uint8_t> bytes = ...;
//   airt::ObjectRef<airt::Buffer> ref = airt::Put(airt::Buffer(std::move(bytes)));
//   std::shared_ptr<airt::Buffer> view = airt::Get(ref);  // from any node
//   Consume(view->data(), view->size());                  // the store's memory, pinned
//
// A Buffer the program makes owns its bytes. One that airt::Get returns views the object where
// it lies, in this node's shared-memory store (pulled there first when it was made on another
// node), and keeps it pinned (never evicted, spilled or freed) while any copy of the Buffer
// lives; reading it copies nothing. Such a Buffer must not be read after airt::Shutdown.
//
// Its msgpack form is a bin, the same as std::vector<uint8_t>'s, so a task may take or return a
// Buffer where the other side speaks std::vector<uint8_t> (a Buffer given to a task as an
// argument, or read by Deserialize, owns a copy: only airt::Get views).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airt/driver.h"

namespace airt {

class Buffer {
 public:
  Buffer() = default;
  // Owns `bytes` (no copy).
  explicit Buffer(std::vector<uint8_t> bytes)
      : owned_(std::make_shared<std::vector<uint8_t>>(std::move(bytes))),
        data_(owned_->data()),
        size_(owned_->size()) {}
  // Owns a copy of `size` bytes at `data`.
  Buffer(const void* data, size_t size)
      : Buffer(std::vector<uint8_t>(static_cast<const uint8_t*>(data),
                                    static_cast<const uint8_t*>(data) + size)) {}
  // Views `size` bytes at `data`, kept alive by `hold` (airt::Get makes these).
  static Buffer View(const uint8_t* data, size_t size, std::shared_ptr<void> hold) {
    Buffer b;
    b.hold_ = std::move(hold);
    b.data_ = data;
    b.size_ = size;
    return b;
  }

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<const uint8_t> span() const { return {data_, size_}; }
  // Whether it views an object in the store (pinned) rather than owning its bytes.
  bool is_view() const { return hold_ != nullptr; }

 private:
  std::shared_ptr<std::vector<uint8_t>> owned_;
  std::shared_ptr<void> hold_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

namespace internal {
// The payload of `bytes` that are one msgpack bin, viewed in place. Throws SerializationError
// otherwise (another type, a truncated bin, bytes after it).
inline std::string_view BinPayload(std::string_view bytes) {
  auto u = [&](size_t i) { return static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])); };
  size_t head = 0;
  uint64_t size = 0;
  if (!bytes.empty() && u(0) == 0xc4 && bytes.size() >= 2) {
    head = 2;
    size = u(1);
  } else if (!bytes.empty() && u(0) == 0xc5 && bytes.size() >= 3) {
    head = 3;
    size = u(1) << 8 | u(2);
  } else if (!bytes.empty() && u(0) == 0xc6 && bytes.size() >= 5) {
    head = 5;
    size = u(1) << 24 | u(2) << 16 | u(3) << 8 | u(4);
  } else {
    throw SerializationError("an airt::Buffer is read from a msgpack bin (a Buffer or a "
                             "std::vector<uint8_t> put); these " + std::to_string(bytes.size()) +
                             " bytes are not one");
  }
  if (bytes.size() != head + size) {
    throw SerializationError("a msgpack bin of " + std::to_string(size) + " bytes in an object of " +
                             std::to_string(bytes.size()) + " bytes");
  }
  return bytes.substr(head);
}
}  // namespace internal

// The bytes of `ref`, viewed where they lie (see above); waits for it, as Get does. Throws as Get.
inline std::shared_ptr<Buffer> Get(const ObjectRef<Buffer>& ref, int64_t timeout_ms = -1) {
  std::vector<internal::PinnedBytes> got = internal::GetPinned({ref.ID()}, timeout_ms);
  std::string_view payload = internal::BinPayload(got[0].bytes);
  return std::make_shared<Buffer>(Buffer::View(reinterpret_cast<const uint8_t*>(payload.data()),
                                               payload.size(), std::move(got[0].hold)));
}

// Each of `refs`, viewed where it lies; the objects on other nodes are pulled in one batch per
// node under one deadline.
inline std::vector<std::shared_ptr<Buffer>> Get(const std::vector<ObjectRef<Buffer>>& refs,
                                                int64_t timeout_ms = -1) {
  std::vector<std::string> ids;
  ids.reserve(refs.size());
  for (const auto& r : refs) ids.push_back(r.ID());
  std::vector<internal::PinnedBytes> got = internal::GetPinned(ids, timeout_ms);
  std::vector<std::shared_ptr<Buffer>> out;
  out.reserve(got.size());
  for (internal::PinnedBytes& g : got) {
    std::string_view payload = internal::BinPayload(g.bytes);
    out.push_back(std::make_shared<Buffer>(Buffer::View(
        reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), std::move(g.hold))));
  }
  return out;
}

}  // namespace airt

namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <>
struct pack<airt::Buffer> {
  template <typename Stream>
  packer<Stream>& operator()(packer<Stream>& o, const airt::Buffer& b) const {
    o.pack_bin(static_cast<uint32_t>(b.size()));
    o.pack_bin_body(reinterpret_cast<const char*>(b.data()), static_cast<uint32_t>(b.size()));
    return o;
  }
};

template <>
struct convert<airt::Buffer> {
  const msgpack::object& operator()(const msgpack::object& o, airt::Buffer& b) const {
    if (o.type != msgpack::type::BIN) throw msgpack::type_error();
    b = airt::Buffer(o.via.bin.ptr, o.via.bin.size);
    return o;
  }
};

}  // namespace adaptor
}  // MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS)
}  // namespace msgpack
