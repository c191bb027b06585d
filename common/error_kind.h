// The kinds of failure (the schema's ErrorKind, common/proto/node.capnp) as C++ code below the API
// uses them, and the one map from a Status to its kind.
#pragma once

#include <string_view>

#include "common/proto/node.capnp.h"
#include "common/status.h"

namespace airt {

// The kind a failed `status` is when it ends a task or reaches the API:
//   kDeadlineExceeded -> TIMEOUT, kResourceExhausted -> OBJECT_STORE_FULL (a store that cannot
//   take the object even after spilling), kUnavailable -> UNAVAILABLE, kCancelled -> CANCELLED,
//   kInvalidArgument, kAlreadyExists, kNotFound -> INVALID_ARGUMENT, kUnimplemented ->
//   UNIMPLEMENTED, kFailedPrecondition, kInternal (and ok, our bug to ask) -> SYSTEM.
proto::ErrorKind ErrorKindOf(const Status& status);

// Whether `kind` (read off the wire) is one of the schema's.
bool IsKnownErrorKind(proto::ErrorKind kind);

// The schema's name of `kind` ("objectStoreFull"); "" when it is not one.
std::string_view ErrorKindName(proto::ErrorKind kind);

// How many kinds the schema has (they are numbered 0..N-1).
size_t NumErrorKinds();

}  // namespace airt
