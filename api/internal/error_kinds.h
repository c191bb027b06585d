// airt::ErrorKind (the API's, airt/exceptions.h) is the schema's proto::ErrorKind value for value:
// checked here at compile time, so the two cannot drift apart, and converted by a cast.
#pragma once

#include "airt/exceptions.h"
#include "common/error_kind.h"

namespace airt::internal {

#define AIRT_SAME_KIND(api, schema)                                                  \
  static_assert(static_cast<uint16_t>(ErrorKind::api) ==                             \
                    static_cast<uint16_t>(proto::ErrorKind::schema),                 \
                "airt::ErrorKind::" #api " differs from the schema's ErrorKind " #schema)
AIRT_SAME_KIND(kUserException, USER_EXCEPTION);
AIRT_SAME_KIND(kFunctionNotFound, FUNCTION_NOT_FOUND);
AIRT_SAME_KIND(kBadArguments, BAD_ARGUMENTS);
AIRT_SAME_KIND(kCancelled, CANCELLED);
AIRT_SAME_KIND(kWorkerCrashed, WORKER_CRASHED);
AIRT_SAME_KIND(kInfeasible, INFEASIBLE);
AIRT_SAME_KIND(kUnavailable, UNAVAILABLE);
AIRT_SAME_KIND(kActorDied, ACTOR_DIED);
AIRT_SAME_KIND(kActorUnavailable, ACTOR_UNAVAILABLE);
AIRT_SAME_KIND(kObjectLost, OBJECT_LOST);
AIRT_SAME_KIND(kOwnerDied, OWNER_DIED);
AIRT_SAME_KIND(kObjectReconstructionFailed, OBJECT_RECONSTRUCTION_FAILED);
AIRT_SAME_KIND(kObjectStoreFull, OBJECT_STORE_FULL);
AIRT_SAME_KIND(kOutOfMemory, OUT_OF_MEMORY);
AIRT_SAME_KIND(kTimeout, TIMEOUT);
AIRT_SAME_KIND(kRuntimeEnvSetup, RUNTIME_ENV_SETUP);
AIRT_SAME_KIND(kInvalidArgument, INVALID_ARGUMENT);
AIRT_SAME_KIND(kUnimplemented, UNIMPLEMENTED);
AIRT_SAME_KIND(kSystem, SYSTEM);
AIRT_SAME_KIND(kObjectReconstructionFailedMaxAttemptsExceeded,
               OBJECT_RECONSTRUCTION_FAILED_MAX_ATTEMPTS_EXCEEDED);
AIRT_SAME_KIND(kObjectReconstructionFailedLineageEvicted,
               OBJECT_RECONSTRUCTION_FAILED_LINEAGE_EVICTED);
#undef AIRT_SAME_KIND

inline proto::ErrorKind ToProto(ErrorKind kind) { return static_cast<proto::ErrorKind>(kind); }
inline ErrorKind FromProto(proto::ErrorKind kind) { return static_cast<ErrorKind>(kind); }

// The one map from a failed Status to the API's exception: the type of its kind (ErrorKindOf:
// kDeadlineExceeded -> TimeoutError, kResourceExhausted -> ObjectStoreFullError, kUnavailable ->
// UnavailableError, kInvalidArgument -> InvalidArgumentError, kUnimplemented ->
// UnimplementedError, ...) with the status's message.
[[noreturn]] inline void ThrowStatus(const Status& status) {
  ThrowError(FromProto(ErrorKindOf(status)), status.message());
}

}  // namespace airt::internal
