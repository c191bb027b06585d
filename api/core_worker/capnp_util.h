// Small conversions at the core worker's RPC edge.
#pragma once

#include <map>
#include <string>

#include <capnp/blob.h>

namespace airt::core_worker {

inline std::string ToString(capnp::Data::Reader d) {
  return std::string(reinterpret_cast<const char*>(d.begin()), d.size());
}

inline capnp::Data::Reader AsData(const std::string& s) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

// Writes `amounts` into a List(ResourceAmount) the caller initialised to amounts.size(), as
// `SetAmounts(shape.initResources(n), amounts)`.
template <typename ResourceList>
void SetAmounts(ResourceList list, const std::map<std::string, double>& amounts) {
  unsigned i = 0;
  for (const auto& [name, amount] : amounts) {
    list[i].setName(name);
    list[i++].setAmount(amount);
  }
}

}  // namespace airt::core_worker
