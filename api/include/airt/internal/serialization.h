// msgpack (de)serialization of argument and return values: one msgpack value per argument, per
// return and per object. Part of airt/remote.h.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <msgpack.hpp>

namespace airt::internal {

// Why bytes could not be read as a value: the message says what was expected and what was found.
class SerializationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Lets msgpack::pack append straight to a std::string. (msgpack wants a non-const write.)
struct StringSink {
  std::string* out;
  void write(const char* data, size_t size) {  // NOLINT(readability-make-member-function-const)
    out->append(data, size);
  }
};

// The msgpack bytes of `value`.
template <typename T>
std::string Serialize(const T& value) {
  std::string out;
  StringSink sink{&out};
  msgpack::pack(sink, value);
  return out;
}

// The msgpack kind of `object` ("str", "positive integer", "array", ...), for error messages.
const char* MsgpackKindName(const msgpack::object& object);
// Throws SerializationError describing why `bytes` are not one well-formed msgpack value.
[[noreturn]] void ThrowMalformed(std::string_view bytes, const char* why);
[[noreturn]] void ThrowWrongType(const msgpack::object& found, const std::type_info& expected);

// Reads exactly one msgpack value from `bytes` as a T. Throws SerializationError for malformed or
// truncated bytes, bytes left over after the value, or a value that does not convert to T
// (another type, an integer out of T's range).
template <typename T>
T Deserialize(std::string_view bytes) {
  msgpack::object_handle handle;
  size_t offset = 0;
  try {
    // Strings and binaries are referenced in `bytes`, not copied into the handle's zone: the
    // conversion below makes the one copy the value needs.
    msgpack::unpack(handle, bytes.data(), bytes.size(), offset,
                    [](msgpack::type::object_type, std::size_t, void*) { return true; });
  } catch (const msgpack::unpack_error& e) {
    ThrowMalformed(bytes, e.what());
  } catch (const std::bad_alloc&) {
    ThrowMalformed(bytes, "a length in it is too large");
  }
  if (offset != bytes.size()) ThrowMalformed(bytes, "bytes are left after the value");
  try {
    return handle.get().as<T>();
  } catch (const msgpack::type_error&) {
    ThrowWrongType(handle.get(), typeid(T));
  }
}

}  // namespace airt::internal
