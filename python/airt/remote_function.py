"""@airt.remote functions: pickled once into the head's function table, run by Python workers."""

import hashlib

import cloudpickle

from airt import _airt
from airt._private import options as _options
from airt import exceptions
from airt import generator
from airt import runtime_env
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


def wrap_returns(ids, num_returns, value_format=ObjectRef.PICKLE):
    """What .remote() gives for a call with `num_returns`: one ObjectRef, a list, or None."""
    refs = [ObjectRef(i, value_format) for i in ids]
    if num_returns == 1:
        return refs[0]
    if num_returns == 0:
        return None
    return refs


class RemoteFunction:
    """What @airt.remote makes of a function: .remote(*args, **kwargs) submits a task."""

    def __init__(self, function, **options):
        _options.check(options, _options.TASK_OPTIONS, "remote functions")
        self._function = function
        self._options = {**_options.TASK_DEFAULTS, **options}
        if "num_returns" not in options and generator.is_generator(function):
            self._options["num_returns"] = generator.STREAMING  # Ray 2.x's default
        self._key = None
        self.__name__ = getattr(function, "__name__", "function")
        self.__doc__ = getattr(function, "__doc__", None)

    def __call__(self, *args, **kwargs):
        raise TypeError(f"remote function {self.__name__} cannot be called directly: "
                        f"use {self.__name__}.remote()")

    def options(self, **options):
        """A copy with `options` over this one's (Ray's .options())."""
        _options.check(options, _options.TASK_OPTIONS, "remote functions")
        copy = RemoteFunction.__new__(RemoteFunction)
        copy.__dict__.update(self.__dict__)
        copy._options = {**self._options, **options}
        return copy

    def _exported_key(self):
        if self._key is None:
            self._key = export(self._function)
        return self._key

    def remote(self, *args, **kwargs):
        o = self._options
        if generator.is_streaming(o["num_returns"]):
            return self._remote_streaming(o, args, kwargs)
        env_key = runtime_env.key_for(o["runtime_env"])
        encoded = encode_python_args(args, kwargs, _options.call_settings(o, env_key))
        # A zero-return task still gets one (None) return to wait on inside airt.
        num_returns = o["num_returns"]
        strategy, selector = _options.strategy_args(o)
        try:
            ids = _airt.submit(FUNCTION_PREFIX + self._exported_key(), encoded,
                               _options.resource_shape(o, 1), int(o["max_retries"]), True,
                               max(num_returns, 1), o["accelerator_type"] or "",
                               o["name"] or self.__name__, strategy, selector)
        except _airt.Error as error:
            raise exceptions.translate(error) from None
        return wrap_returns(ids, num_returns)

    def _remote_streaming(self, o, args, kwargs):
        """A generator's call: its ObjectRefGenerator (airt.generator)."""
        o = {**o, "num_returns": generator.STREAMING}
        env_key = runtime_env.key_for(o["runtime_env"])
        encoded = encode_python_args(args, kwargs, _options.call_settings(o, env_key))
        strategy, selector = _options.strategy_args(o)
        try:
            completed = _airt.submit_streaming(
                FUNCTION_PREFIX + self._exported_key(), encoded, _options.resource_shape(o, 1),
                int(o["max_retries"]), True, o["accelerator_type"] or "",
                o["name"] or self.__name__, generator.backpressure(o), strategy, selector)
        except _airt.Error as error:
            raise exceptions.translate(error) from None
        return generator.ObjectRefGenerator(completed)
