#include "common/error_kind.h"

#include <capnp/schema.h>

namespace airt {

proto::ErrorKind ErrorKindOf(const Status& status) {
  switch (status.code()) {
    case Code::kDeadlineExceeded: return proto::ErrorKind::TIMEOUT;
    case Code::kResourceExhausted: return proto::ErrorKind::OBJECT_STORE_FULL;
    case Code::kUnavailable: return proto::ErrorKind::UNAVAILABLE;
    case Code::kCancelled: return proto::ErrorKind::CANCELLED;
    case Code::kInvalidArgument:
    case Code::kAlreadyExists:
    case Code::kNotFound: return proto::ErrorKind::INVALID_ARGUMENT;
    case Code::kUnimplemented: return proto::ErrorKind::UNIMPLEMENTED;
    case Code::kOk:
    case Code::kFailedPrecondition:
    case Code::kInternal: return proto::ErrorKind::SYSTEM;
  }
  return proto::ErrorKind::SYSTEM;  // a code outside the enum
}

size_t NumErrorKinds() { return capnp::Schema::from<proto::ErrorKind>().getEnumerants().size(); }

bool IsKnownErrorKind(proto::ErrorKind kind) { return static_cast<size_t>(kind) < NumErrorKinds(); }

std::string_view ErrorKindName(proto::ErrorKind kind) {
  if (!IsKnownErrorKind(kind)) return "";
  auto enumerant = capnp::Schema::from<proto::ErrorKind>().getEnumerants()[static_cast<uint>(kind)];
  auto name = enumerant.getProto().getName();
  return std::string_view(name.cStr(), name.size());
}

}  // namespace airt
