"""Calling C++ functions registered with AIRT_REMOTE from Python (Ray's cross_language)."""

from airt import _airt
from airt import exceptions
from airt.object_ref import ObjectRef, encode_cpp_args


class CppFunction:
    """A C++ function by its registered name; .remote(*args) submits it."""

    def __init__(self, name, resources=None, max_retries=3):
        self._name = name
        self._resources = dict(resources or {})
        self._max_retries = max_retries

    def options(self, *, num_cpus=None, num_gpus=None, resources=None, max_retries=None):
        merged = dict(self._resources)
        if num_cpus is not None:
            merged["CPU"] = float(num_cpus)
        if num_gpus is not None:
            merged["GPU"] = float(num_gpus)
        merged.update({k: float(v) for k, v in (resources or {}).items()})
        return CppFunction(self._name, merged,
                           self._max_retries if max_retries is None else max_retries)

    def remote(self, *args):
        """Submits the call; arguments are msgpack-encoded values or ObjectRefs (their values)."""
        encoded = encode_cpp_args(args)
        resources = dict(self._resources) or {"CPU": 1.0}
        try:
            ref = _airt.submit(self._name, encoded, resources, self._max_retries, False)
        except _airt.Error as error:
            raise exceptions.translate(error) from None
        return ObjectRef(ref, ObjectRef.MSGPACK)


def cpp_function(name):
    """The C++ function registered as `name` (AIRT_REMOTE) in the job's code search path."""
    return CppFunction(name)


def cpp_actor_class(create_function_name, class_name):
    """A C++ actor class by its registered factory (AIRT_REMOTE(Counter::Create, ...)); its
    methods are called by their registered names ("Counter::Add", or handle.Add)."""
    from airt.actor import CppActorClass
    return CppActorClass(create_function_name, class_name)
