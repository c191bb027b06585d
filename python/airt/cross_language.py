"""Calling C++ functions registered with AIRT_REMOTE from Python (Ray's cross_language)."""

from airt import _airt
from airt._private import options as _options
from airt import exceptions
from airt.object_ref import ObjectRef, encode_cpp_args
from airt.remote_function import wrap_returns


class CppFunction:
    """A C++ function by its registered name; .remote(*args) submits it. Takes the options of
    Python remote functions, except runtime_env and retry_exceptions (they act in Python
    workers)."""

    def __init__(self, name, options=None):
        self._name = name
        self._options = {**_options.TASK_DEFAULTS, **(options or {})}

    def options(self, **options):
        _options.check(options, _options.TASK_OPTIONS - {"runtime_env", "retry_exceptions"},
                       "C++ functions")
        return CppFunction(self._name, {**self._options, **options})

    def remote(self, *args):
        """Submits the call; arguments are msgpack-encoded values or ObjectRefs (their values)."""
        o = self._options
        strategy, selector = _options.strategy_args(o)
        try:
            ids = _airt.submit(self._name, encode_cpp_args(args), _options.resource_shape(o, 1),
                               int(o["max_retries"]), False, max(o["num_returns"], 1),
                               o["accelerator_type"] or "", o["name"] or self._name, strategy,
                               selector)
        except _airt.Error as error:
            raise exceptions.translate(error) from None
        return wrap_returns(ids, o["num_returns"], ObjectRef.MSGPACK)


def cpp_function(name):
    """The C++ function registered as `name` (AIRT_REMOTE) in the job's code search path."""
    return CppFunction(name)


def cpp_actor_class(create_function_name, class_name):
    """A C++ actor class by its registered factory (AIRT_REMOTE(Counter::Create, ...)); its
    methods are called by their registered names ("Counter::Add", or handle.Add)."""
    from airt.actor import CppActorClass
    return CppActorClass(create_function_name, class_name)
