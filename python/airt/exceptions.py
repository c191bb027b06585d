"""airt's exceptions, with Ray's names and hierarchy (ray.exceptions).

Every failure of airt's core reaches Python as one of these, through one map: airt._airt's
exception translator hands each C++ error's kind (the schema's ErrorKind), message and data to
from_core() below, which picks the type. Every type derives from airt._airt.Error too, so code
catching that works. docs/python.md has the table of which failure gives which type.
"""

import pickle

from airt import _airt


class RayError(_airt.Error):
    """The base of every airt error."""


class RayTaskError(RayError):
    """A task raised; str() names the function and carries the remote traceback. `cause` is the
    exception the task raised (None when it did not travel: a C++ task's, or one that does not
    pickle). Raised as an instance of the cause's type too, so `except ValueError` catches a
    task's ValueError, as in Ray."""

    def __init__(self, message, cause=None):
        super().__init__(message)
        self.cause = cause

    def as_instanceof_cause(self):
        """This error as an instance of both RayTaskError and the cause's type (itself when the
        cause's type cannot be a base)."""
        cause = self.cause
        if cause is None or isinstance(cause, RayTaskError) or not isinstance(cause, Exception):
            return self
        return _dual(type(self), cause, str(self), getattr(self, "_core", None)) or self


class FunctionNotFoundError(RayTaskError):
    """No worker has the function: its library is not on the code search path (airt's; Ray
    raises a RayTaskError)."""


class TaskCancelledError(RayError):
    """The task was cancelled (airt.cancel) before it finished."""


class WorkerCrashedError(RayError):
    """The task's worker process died more often than the task may be retried."""


class RayActorError(RayError):
    """The actor died before or while running the call, or cannot be reached."""


class ActorDiedError(RayActorError):
    """The actor is dead for good (killed, out of restarts, its constructor raised, its driver
    exited)."""


class ActorUnavailableError(RayActorError):
    """The actor cannot be reached for now; a later call may succeed."""


class RaySystemError(RayError):
    """airt's own failure."""


class ObjectStoreFullError(RayError):
    """A put, or a task's return, does not fit in the node's object store even after spilling;
    what the store held before stays."""


class OutOfMemoryError(RayError):
    """The node stopped the task's worker for the memory it used."""


class ObjectLostError(RayError):
    """Every copy of the object is gone: the node holding it lost it or cannot be reached."""


class OwnerDiedError(ObjectLostError):
    """The object's owner died."""


class ObjectReconstructionFailedError(ObjectLostError):
    """The object was lost and re-running its task did not bring it back."""


class ObjectReconstructionFailedMaxAttemptsExceededError(ObjectReconstructionFailedError):
    """The lost object's task was run as many times as its max_retries allows."""


class ObjectReconstructionFailedLineageEvictedError(ObjectReconstructionFailedError):
    """The lost object's lineage was released past the owner's cap (max_lineage_bytes)."""


class GetTimeoutError(RayError, TimeoutError):
    """get() ran out of time."""


class RuntimeEnvSetupError(RayError):
    """The task's runtime_env could not be set up in its worker."""


class InfeasibleError(RayError):
    """No node can ever hold the task's resource request (airt's; the message names it)."""


class UnavailableError(RayError):
    """The head, a node or a worker cannot be reached, or airt is not initialized."""


class InvalidArgumentError(RayError, ValueError):
    """A malformed request (Ray raises ValueError): a bad argument, a name already taken."""


class UnimplementedError(RayError, NotImplementedError):
    """What is not built yet; the message names it."""


# The schema's kinds (common/proto/node.capnp ErrorKind), name -> number, and each one's type.
KINDS = _airt.error_kinds()
_NAMES = {number: name for name, number in KINDS.items()}
TYPES = {
    "userException": RayTaskError,
    "functionNotFound": FunctionNotFoundError,
    "badArguments": RayTaskError,  # raised as a TypeError too
    "cancelled": TaskCancelledError,
    "workerCrashed": WorkerCrashedError,
    "infeasible": InfeasibleError,
    "unavailable": UnavailableError,
    "actorDied": ActorDiedError,
    "actorUnavailable": ActorUnavailableError,
    "objectLost": ObjectLostError,
    "ownerDied": OwnerDiedError,
    "objectReconstructionFailed": ObjectReconstructionFailedError,
    "objectStoreFull": ObjectStoreFullError,
    "outOfMemory": OutOfMemoryError,
    "timeout": GetTimeoutError,
    "runtimeEnvSetup": RuntimeEnvSetupError,
    "invalidArgument": InvalidArgumentError,
    "unimplemented": UnimplementedError,
    "system": RaySystemError,
    "objectReconstructionFailedMaxAttemptsExceeded":
        ObjectReconstructionFailedMaxAttemptsExceededError,
    "objectReconstructionFailedLineageEvicted": ObjectReconstructionFailedLineageEvictedError,
}


def from_core(kind, message, data=b""):
    """The exception for an error of airt's core: `kind` a number of the schema's ErrorKind,
    `message` its text, `data` what it carries (a task's pickled exception). The one map."""
    name = _NAMES.get(kind, "system")
    error_type = TYPES.get(name, RaySystemError)
    core = (kind, message, bytes(data or b""))
    if error_type is not RayTaskError:
        error = error_type(message)
    else:
        cause = _cause(name, message, core[2])
        error = RayTaskError(message, cause)
        error._core = core
        error = error.as_instanceof_cause()
    error._core = core
    return error


def error_kind(error):
    """The schema's name of the kind of `error` (an airt exception), e.g. "objectStoreFull"."""
    core = getattr(error, "_core", None)
    if core is not None:
        return _NAMES.get(core[0], "system")
    for name, error_type in TYPES.items():
        if type(error) is error_type:
            return name
    return "system"


def encode_cause(error):
    """What a task's `error` travels as (TaskError.data): the exception pickled, or b"" when it
    does not pickle. A RayTaskError that came from another task travels as its cause, so the
    caller raises the original type."""
    if isinstance(error, RayTaskError) and error.cause is not None:
        error = error.cause
    try:
        import cloudpickle
        return cloudpickle.dumps(error)
    except Exception:  # an exception that does not pickle travels as its traceback only
        return b""


def translate(error):
    """The user-facing exception for an error of airt._airt: itself, since the translator made it
    one already; a bare airt._airt.Error becomes a RaySystemError."""
    if isinstance(error, RayError):
        return error
    return from_core(KINDS["system"], str(error))


def _cause(name, message, data):
    if name == "badArguments":
        return TypeError(message)
    if not data.startswith(b"\x80"):  # not a pickle: a C++ exception's what()
        return None
    try:
        cause = pickle.loads(data)
    except Exception:  # its type is not importable here: the traceback still tells
        return None
    return cause if isinstance(cause, BaseException) else None


def _dual(base, cause, text, core):
    """An instance of a class derived from `base` (RayTaskError) and the cause's type, whose str()
    is `text`; None when the cause's type cannot be a base."""
    cause_type = type(cause)
    try:
        dual = type(f"RayTaskError({cause_type.__name__})", (base, cause_type), {
            "__init__": lambda self, *a: Exception.__init__(self, text),
            "__str__": lambda self: text,
            "__reduce__": lambda self: (from_core, core) if core else (base, (text, cause)),
            "__getattr__": lambda self, attr: getattr(cause, attr),
        })
        error = dual(text)
    except Exception:  # a layout clash, a final type, a constructor that will not take this
        return None
    error.cause = cause
    return error
