#include "airt/exceptions.h"

namespace airt::internal {

void ThrowError(ErrorKind kind, const std::string& what, std::string data) {
  switch (kind) {
    case ErrorKind::kUserException:
    case ErrorKind::kBadArguments: throw TaskError(kind, what, std::move(data));
    case ErrorKind::kFunctionNotFound: throw FunctionNotFoundError(what);
    case ErrorKind::kCancelled: throw TaskCancelledError(what);
    case ErrorKind::kWorkerCrashed: throw WorkerCrashedError(what);
    case ErrorKind::kInfeasible: throw InfeasibleError(what);
    case ErrorKind::kUnavailable: throw UnavailableError(what);
    case ErrorKind::kActorDied: throw ActorDiedError(what);
    case ErrorKind::kActorUnavailable: throw ActorUnavailableError(what);
    case ErrorKind::kObjectLost: throw ObjectLostError(what);
    case ErrorKind::kOwnerDied: throw OwnerDiedError(what);
    case ErrorKind::kObjectReconstructionFailed: throw ObjectReconstructionFailedError(what);
    case ErrorKind::kObjectStoreFull: throw ObjectStoreFullError(what);
    case ErrorKind::kOutOfMemory: throw OutOfMemoryError(what);
    case ErrorKind::kTimeout: throw TimeoutError(what);
    case ErrorKind::kRuntimeEnvSetup: throw RuntimeEnvSetupError(what);
    case ErrorKind::kInvalidArgument: throw InvalidArgumentError(what);
    case ErrorKind::kUnimplemented: throw UnimplementedError(what);
    case ErrorKind::kSystem: break;
    case ErrorKind::kObjectReconstructionFailedMaxAttemptsExceeded:
      throw ObjectReconstructionFailedMaxAttemptsExceededError(what);
    case ErrorKind::kObjectReconstructionFailedLineageEvicted:
      throw ObjectReconstructionFailedLineageEvictedError(what);
  }
  throw Exception(what);
}

}  // namespace airt::internal
