// Ray's exception types (ray/api/ray_exception.h) as names of airt's: catching a Ray name catches
// what airt throws for the same failure. All derive from ray::internal::RayException
// (airt::Exception), whose what() carries the message.
#pragma once

#include "airt/driver.h"

namespace ray::internal {

using RayException = airt::Exception;
// The actor died before or while running the call, or is dead for good (killed, ExitActor, out
// of restarts, its constructor threw, its owner exited).
using RayActorException = airt::ActorError;
// The task (or actor method) threw; what() names the function and carries the message.
using RayTaskException = airt::TaskError;
// The task's worker process died more often than the task may be retried.
using RayWorkerException = airt::WorkerCrashedError;
// An object cannot be got back: the node or process holding it is gone. airt reports this as
// UnavailableError, so this name catches the other unavailabilities too (an unreachable head).
using UnreconstructableException = airt::ObjectLostError;
// The worker has no function of that name (its library is not on the code search path).
using RayFunctionNotFound = airt::FunctionNotFoundError;
using RayRuntimeEnvException = airt::RuntimeEnvError;
// A Get's timeout passed.
using RayTimeoutException = airt::TimeoutError;
// airt's too (Ray's C++ API has no cancelling): the task was cancelled.
using RayTaskCancelledException = airt::TaskCancelledError;

}  // namespace ray::internal
