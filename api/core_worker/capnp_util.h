// Small conversions at the core worker's RPC edge.
#pragma once

#include <string>

#include <capnp/blob.h>

namespace airt::core {

inline std::string ToString(capnp::Data::Reader d) {
  return std::string(reinterpret_cast<const char*>(d.begin()), d.size());
}

inline capnp::Data::Reader AsData(const std::string& s) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

}  // namespace airt::core
