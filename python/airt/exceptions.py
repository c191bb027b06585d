"""airt's exceptions, with Ray's names and hierarchy (ray.exceptions).

Each is also an instance of the error type of airt's core it comes from (airt._airt.*), so code
catching either works.
"""

import pickle

from airt import _airt


class RayError(Exception):
    """The base of every airt error."""


class RayTaskError(RayError, _airt.TaskError):
    """A task raised; str() names the function and carries the remote message."""


class FunctionNotFoundError(RayTaskError, _airt.FunctionNotFoundError):
    """No worker has the function: its library is not on the code search path."""


class RayActorError(RayError):
    """The actor died before or while running the call."""


class ActorDiedError(RayActorError, _airt.ActorDiedError):
    """The actor is dead for good (killed, out of restarts, its driver exited)."""


class WorkerCrashedError(RayError, _airt.WorkerCrashedError):
    """The task's worker process died more often than the task may be retried."""


class GetTimeoutError(RayError, _airt.TimeoutError):
    """get() or wait() ran out of time."""


class ObjectLostError(RayError):
    """The object's copies are gone (raised by later issues' lineage and node-death paths)."""


class TaskCancelledError(RayError, _airt.TaskCancelledError):
    """The task was cancelled (airt.cancel) before it finished."""


class InfeasibleError(RayError, _airt.InfeasibleError):
    """No node can ever hold the task's resource request."""


class UnavailableError(RayError, _airt.UnavailableError):
    """The head, a node or a worker cannot be reached, or airt is not initialized."""


class UnimplementedError(RayError, NotImplementedError, _airt.UnimplementedError):
    """What is not built yet; the message names it."""


# A task's exception travels at the end of its error message, pickled and base64-encoded after
# this marker, so that the driver's RayTaskError is also an instance of the user's type.
_CAUSE_MARKER = "\n--airt-pickled-cause--\n"


def encode_cause(error):
    """The marker and `error` pickled, or "" when it does not pickle."""
    import base64
    try:
        import cloudpickle
        return _CAUSE_MARKER + base64.b64encode(cloudpickle.dumps(error)).decode("ascii")
    except Exception:  # an exception that does not pickle travels as text only
        return ""


def _task_error(message):
    """RayTaskError for `message`; when it carries the pickled cause, an instance of a class
    derived from both RayTaskError and the cause's class (as Ray's RayTaskError.as_instanceof_cause)."""
    text, marker, encoded = message.partition(_CAUSE_MARKER)
    if not marker:
        return RayTaskError(message)
    try:
        import base64
        cause = pickle.loads(base64.b64decode(encoded))
    except Exception:
        return RayTaskError(text)
    cause_cls = type(cause)
    if not isinstance(cause, Exception) or issubclass(RayTaskError, cause_cls):
        error = RayTaskError(text)
    else:
        try:
            derived = type(f"RayTaskError({cause_cls.__name__})", (RayTaskError, cause_cls),
                           {"__init__": lambda self, *a: Exception.__init__(self, *a),
                            "__str__": lambda self: text})
            error = derived(text)
        except TypeError:  # a cause type that cannot be a base (layout, final)
            error = RayTaskError(text)
    error.cause = cause
    return error


# airt._airt's type -> the one raised to users, most specific first.
_MAPPED = [
    (_airt.FunctionNotFoundError, FunctionNotFoundError),
    (_airt.TaskError, RayTaskError),
    (_airt.ActorDiedError, ActorDiedError),
    (_airt.WorkerCrashedError, WorkerCrashedError),
    (_airt.InfeasibleError, InfeasibleError),
    (_airt.TimeoutError, GetTimeoutError),
    (_airt.UnavailableError, UnavailableError),
    (_airt.UnimplementedError, UnimplementedError),
    (_airt.TaskCancelledError, TaskCancelledError),
    (_airt.Error, RayError),
]


def translate(error):
    """The user-facing exception for an error of airt._airt."""
    for core, user in _MAPPED:
        if isinstance(error, core):
            if user is RayTaskError:
                return _task_error(str(error))
            return user(str(error))
    return error
