// airt's exceptions: one type per kind of failure, with Ray's names where Ray has one. Every
// failure a driver sees (a task's, a Get's, a Put's, the API's own) is thrown as exactly one of
// these, by one mapping (api/driver.cc): docs/cpp_api.md has the table of which failure gives
// which type.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace airt {

// The kinds of failure. The schema's ErrorKind (common/proto/node.capnp) is the definition; this
// is its C++ face for code that links only the API (no Cap'n Proto), value for value (the core
// checks each at compile time).
enum class ErrorKind : uint16_t {
  kUserException = 0,
  kFunctionNotFound = 1,
  kBadArguments = 2,
  kCancelled = 3,
  kWorkerCrashed = 4,
  kInfeasible = 5,
  kUnavailable = 6,
  kActorDied = 7,
  kActorUnavailable = 8,
  kObjectLost = 9,
  kOwnerDied = 10,
  kObjectReconstructionFailed = 11,
  kObjectStoreFull = 12,
  kOutOfMemory = 13,
  kTimeout = 14,
  kRuntimeEnvSetup = 15,
  kInvalidArgument = 16,
  kUnimplemented = 17,
  kSystem = 18,
  kObjectReconstructionFailedMaxAttemptsExceeded = 19,
  kObjectReconstructionFailedLineageEvicted = 20,
};
inline constexpr int kNumErrorKinds = 21;

// The base of every airt error (Ray: ray::internal::RayException). kind() says which failure it
// is; data() what the failure carries besides its message (a task's exception: below).
class Exception : public std::runtime_error {
 public:
  // An error of airt itself (kSystem).
  explicit Exception(const std::string& what) : Exception(ErrorKind::kSystem, what) {}
  ErrorKind kind() const { return kind_; }
  const std::string& data() const { return data_; }

 protected:
  Exception(ErrorKind kind, const std::string& what, std::string data = {})
      : std::runtime_error(what), kind_(kind), data_(std::move(data)) {}

 private:
  ErrorKind kind_;
  std::string data_;
};

// The task raised (kUserException), or its arguments did not fit its parameters (kBadArguments).
// what() names the function and carries the remote message (a Python task's traceback); data()
// is the exception itself: a C++ task's what(), a Python task's pickled exception.
class TaskError : public Exception {
 public:
  explicit TaskError(const std::string& what, std::string data = {})
      : Exception(ErrorKind::kUserException, what, std::move(data)) {}
  TaskError(ErrorKind kind, const std::string& what, std::string data = {})
      : Exception(kind, what, std::move(data)) {}
};
// The worker has no function of the task's name: its library is not on the code search path, or
// lacks the AIRT_REMOTE line. what() names the function, the search path and what is registered.
class FunctionNotFoundError : public TaskError {
 public:
  explicit FunctionNotFoundError(const std::string& what)
      : TaskError(ErrorKind::kFunctionNotFound, what) {}
};
// The task's worker process died more often than the task may be retried; what() names the task.
class WorkerCrashedError : public Exception {
 public:
  explicit WorkerCrashedError(const std::string& what)
      : Exception(ErrorKind::kWorkerCrashed, what) {}
};
// The task was cancelled (airt::Cancel, ray.cancel) before it finished. Ray: TaskCancelledError.
class TaskCancelledError : public Exception {
 public:
  explicit TaskCancelledError(const std::string& what) : Exception(ErrorKind::kCancelled, what) {}
};
// The base of an actor's failures (Ray: RayActorError).
class ActorError : public Exception {
 protected:
  using Exception::Exception;
};
// The actor died before or while running the call, or is dead for good (killed, out of
// restarts, its constructor raised, its owner exited). Ray: ActorDiedError (RayActorException).
class ActorDiedError : public ActorError {
 public:
  explicit ActorDiedError(const std::string& what) : ActorError(ErrorKind::kActorDied, what) {}
};
// The actor cannot be reached for now; a later call may succeed. Ray: ActorUnavailableError.
class ActorUnavailableError : public ActorError {
 public:
  explicit ActorUnavailableError(const std::string& what)
      : ActorError(ErrorKind::kActorUnavailable, what) {}
};
// No node can ever hold the task's resource request; what() names it and the nodes' totals.
class InfeasibleError : public Exception {
 public:
  explicit InfeasibleError(const std::string& what) : Exception(ErrorKind::kInfeasible, what) {}
};
// Every copy of the object is gone: the node that held it lost it or cannot be reached. what()
// names the object and the node. Ray: ObjectLostError.
class ObjectLostError : public Exception {
 public:
  explicit ObjectLostError(const std::string& what) : Exception(ErrorKind::kObjectLost, what) {}

 protected:
  using Exception::Exception;
};
// The object's owner died, and with it what it knew of the object. Ray: OwnerDiedError.
class OwnerDiedError : public ObjectLostError {
 public:
  explicit OwnerDiedError(const std::string& what) : ObjectLostError(ErrorKind::kOwnerDied, what) {}
};
// The object was lost and re-running its task did not bring it back. Ray's name.
class ObjectReconstructionFailedError : public ObjectLostError {
 public:
  explicit ObjectReconstructionFailedError(const std::string& what)
      : ObjectLostError(ErrorKind::kObjectReconstructionFailed, what) {}

 protected:
  ObjectReconstructionFailedError(ErrorKind kind, const std::string& what)
      : ObjectLostError(kind, what) {}
};
// The lost object's task has been run as many times as its max_retries allows. Ray's name.
class ObjectReconstructionFailedMaxAttemptsExceededError : public ObjectReconstructionFailedError {
 public:
  explicit ObjectReconstructionFailedMaxAttemptsExceededError(const std::string& what)
      : ObjectReconstructionFailedError(ErrorKind::kObjectReconstructionFailedMaxAttemptsExceeded,
                                        what) {}
};
// The lost object's lineage was released to keep the owner under its cap (max_lineage_bytes).
// Ray's name.
class ObjectReconstructionFailedLineageEvictedError : public ObjectReconstructionFailedError {
 public:
  explicit ObjectReconstructionFailedLineageEvictedError(const std::string& what)
      : ObjectReconstructionFailedError(ErrorKind::kObjectReconstructionFailedLineageEvicted,
                                        what) {}
};
// A Put, or a task's return, does not fit in the node's object store even after evicting and
// spilling; what() names the object, its size and the store's capacity. What the store held
// before stays. Ray: ObjectStoreFullError.
class ObjectStoreFullError : public Exception {
 public:
  explicit ObjectStoreFullError(const std::string& what)
      : Exception(ErrorKind::kObjectStoreFull, what) {}
};
// The node stopped the task's worker for the memory it used. Ray: OutOfMemoryError.
class OutOfMemoryError : public Exception {
 public:
  explicit OutOfMemoryError(const std::string& what) : Exception(ErrorKind::kOutOfMemory, what) {}
};
// A Get's timeout (or another deadline) passed. Ray: GetTimeoutError.
class TimeoutError : public Exception {
 public:
  explicit TimeoutError(const std::string& what) : Exception(ErrorKind::kTimeout, what) {}
};
using GetTimeoutError = TimeoutError;
// The task's runtime environment could not be set up in its worker. Ray: RuntimeEnvSetupError.
class RuntimeEnvSetupError : public Exception {
 public:
  explicit RuntimeEnvSetupError(const std::string& what)
      : Exception(ErrorKind::kRuntimeEnvSetup, what) {}
};
// The head, a node or a worker could not be reached, or the API was used before Init.
class UnavailableError : public Exception {
 public:
  explicit UnavailableError(const std::string& what) : Exception(ErrorKind::kUnavailable, what) {}
};
// A malformed request: a bad Config, a bad argument to an API call, a name already taken.
class InvalidArgumentError : public Exception {
 public:
  explicit InvalidArgumentError(const std::string& what)
      : Exception(ErrorKind::kInvalidArgument, what) {}
};
// A malformed runtime environment (RuntimeEnv's Set, Get, SetJsonStr; env_vars that are not
// strings). Ray: RayRuntimeEnvException.
class RuntimeEnvError : public InvalidArgumentError {
 public:
  using InvalidArgumentError::InvalidArgumentError;
};
// What is not built yet (kUnimplemented); what() names it.
class UnimplementedError : public Exception {
 public:
  explicit UnimplementedError(const std::string& what)
      : Exception(ErrorKind::kUnimplemented, what) {}
};

namespace internal {
// Throws the type of `kind` above with `what` (and `data`, which only TaskError keeps). The one
// place a kind becomes a C++ exception; a kind outside the enum throws Exception (kSystem).
[[noreturn]] void ThrowError(ErrorKind kind, const std::string& what, std::string data = {});
}  // namespace internal

}  // namespace airt
