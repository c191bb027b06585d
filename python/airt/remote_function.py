"""@airt.remote functions: pickled once into the head's function table, run by Python workers."""

import hashlib

import cloudpickle

from airt import _airt
from airt import exceptions
from airt.object_ref import ObjectRef, encode_python_args

FUNCTION_NAMESPACE = "airt.functions"
FUNCTION_PREFIX = "py:"


def export(target):
    """Stores `target` (a function or class), cloudpickled, in the head's function table; its
    key (the pickle's SHA-256), which workers fetch it by."""
    data = cloudpickle.dumps(target)
    key = hashlib.sha256(data).hexdigest()
    _airt.kv_put(FUNCTION_NAMESPACE, key, data, False)
    return key


class RemoteFunction:
    """What @airt.remote makes of a function: .remote(*args, **kwargs) submits a task."""

    def __init__(self, function, num_cpus=1, num_gpus=0, resources=None, max_retries=3,
                 num_returns=1):
        if num_returns != 1:
            raise exceptions.UnimplementedError("num_returns other than 1 is not built yet")
        self._function = function
        self._num_cpus = num_cpus
        self._num_gpus = num_gpus
        self._resources = dict(resources or {})
        self._max_retries = max_retries
        self._key = None
        self.__name__ = getattr(function, "__name__", "function")
        self.__doc__ = getattr(function, "__doc__", None)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"remote function {self.__name__} cannot be called directly: "
                        f"use {self.__name__}.remote()")

    def options(self, *, num_cpus=None, num_gpus=None, resources=None, max_retries=None,
                num_returns=1, **unsupported):
        if unsupported:
            raise exceptions.UnimplementedError(
                f"options {sorted(unsupported)} are not built yet for Python tasks")
        copy = RemoteFunction(
            self._function, self._num_cpus if num_cpus is None else num_cpus,
            self._num_gpus if num_gpus is None else num_gpus,
            self._resources if resources is None else resources,
            self._max_retries if max_retries is None else max_retries, num_returns)
        copy._key = self._key
        return copy

    def _exported_key(self):
        if self._key is None:
            self._key = export(self._function)
        return self._key

    def remote(self, *args, **kwargs):
        encoded = encode_python_args(args, kwargs)
        resources = {"CPU": float(self._num_cpus)}
        if self._num_gpus:
            resources["GPU"] = float(self._num_gpus)
        resources.update({k: float(v) for k, v in self._resources.items()})
        try:
            ref = _airt.submit(FUNCTION_PREFIX + self._exported_key(), encoded, resources,
                               self._max_retries, True)
        except _airt.Error as error:
            raise exceptions.translate(error) from None
        return ObjectRef(ref, ObjectRef.PICKLE)
