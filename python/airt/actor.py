"""@airt.remote classes: actors on Python workers, as Ray's ActorClass and ActorHandle."""

from airt import _airt
from airt import exceptions
from airt.object_ref import ObjectRef, encode_cpp_args, encode_python_args
from airt.remote_function import FUNCTION_PREFIX, export

METHOD_PREFIX = "py.method:"


class ActorMethod:
    """handle.method: .remote(*args, **kwargs) calls it; calls run in the order they were made."""

    def __init__(self, actor_id, name, cpp=False):
        self._actor_id = actor_id
        self._name = name
        self._cpp = cpp  # a C++ actor's method: msgpack arguments and return

    def remote(self, *args, **kwargs):
        if self._cpp:
            if kwargs:
                raise TypeError("C++ methods take positional arguments only")
            encoded = encode_cpp_args(args)
            name, value_format = self._name, ObjectRef.MSGPACK
        else:
            encoded = encode_python_args(args, kwargs)
            name, value_format = METHOD_PREFIX + self._name, ObjectRef.PICKLE
        try:
            ref = _airt.submit_actor_task(self._actor_id, name, encoded)
        except _airt.Error as error:
            raise exceptions.translate(error) from None
        return ObjectRef(ref, value_format)

    def options(self, **unsupported):
        if unsupported:
            raise exceptions.UnimplementedError(
                f"actor method options {sorted(unsupported)} are not built yet")
        return self


class ActorHandle:
    """A handle to a live actor: handle.method.remote(...)."""

    def __init__(self, actor_id, class_name="actor"):
        self._actor_id = actor_id
        self._class_name = class_name

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return ActorMethod(self._actor_id, name)

    def __repr__(self):
        return f"Actor({self._class_name}, {self._actor_id.hex()})"

    def __reduce__(self):
        # A handle travels as the actor's id: the receiving worker asks the head where it lives.
        return ActorHandle, (self._actor_id, self._class_name)


class ActorClass:
    """What @airt.remote makes of a class: .remote(*args) creates an actor."""

    def __init__(self, cls, num_cpus=0, num_gpus=0, resources=None, max_restarts=0,
                 max_concurrency=1, name="", namespace="", lifetime=None, max_task_retries=0):
        if lifetime not in (None, "non_detached"):
            raise exceptions.UnimplementedError(f"lifetime={lifetime!r} is not built yet")
        if max_task_retries:
            raise exceptions.UnimplementedError("max_task_retries is not built yet")
        self._cls = cls
        self._options = dict(num_cpus=num_cpus, num_gpus=num_gpus, resources=dict(resources or {}),
                             max_restarts=max_restarts, max_concurrency=max_concurrency,
                             name=name or "", namespace=namespace or "")
        self._key = None
        self.__name__ = cls.__name__

    def __call__(self, *args, **kwargs):
        raise TypeError(f"actor class {self.__name__} cannot be instantiated directly: "
                        f"use {self.__name__}.remote()")

    def options(self, **options):
        merged = dict(self._options)
        merged.update({k: v for k, v in options.items() if v is not None})
        copy = ActorClass(self._cls, **merged)
        copy._key = self._key
        return copy

    def remote(self, *args, **kwargs):
        if self._key is None:
            self._key = export(self._cls)
        o = self._options
        resources = {}
        if o["num_cpus"]:
            resources["CPU"] = float(o["num_cpus"])
        if o["num_gpus"]:
            resources["GPU"] = float(o["num_gpus"])
        resources.update({k: float(v) for k, v in o["resources"].items()})
        try:
            actor_id = _airt.create_actor(FUNCTION_PREFIX + self._key, encode_python_args(args, kwargs),
                                          resources, o["name"], o["namespace"],
                                          int(o["max_restarts"]), int(o["max_concurrency"]), True)
        except _airt.Error as error:
            message = str(error)
            if "already" in message and "name" in message.lower():
                raise ValueError(message) from None
            raise exceptions.translate(error) from None
        return ActorHandle(actor_id, self.__name__)


class CppActorHandle:
    """A C++ actor from Python: handle.method("Counter::Add").remote(...), or
    handle.Add.remote(...) for Class::Add."""

    def __init__(self, actor_id, class_name):
        self._actor_id = actor_id
        self._class_name = class_name

    def method(self, registered_name):
        return ActorMethod(self._actor_id, registered_name, cpp=True)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return ActorMethod(self._actor_id, f"{self._class_name}::{name}", cpp=True)


class CppActorClass:
    """cpp_actor_class(factory, class): .remote(*args) creates the C++ actor (msgpack args)."""

    def __init__(self, factory, class_name, options=None):
        self._factory = factory
        self._class_name = class_name
        self._options = dict(options or {})

    def options(self, **options):
        return CppActorClass(self._factory, self._class_name, {**self._options, **options})

    def remote(self, *args):
        encoded = encode_cpp_args(args)
        o = self._options
        try:
            actor_id = _airt.create_actor(
                self._factory, encoded, {k: float(v) for k, v in o.get("resources", {}).items()},
                o.get("name", ""), o.get("namespace", ""), int(o.get("max_restarts", 0)),
                int(o.get("max_concurrency", 1)), False)
        except _airt.Error as error:
            raise exceptions.translate(error) from None
        return CppActorHandle(actor_id, self._class_name)


def get_actor(name, namespace=None):
    """The live actor named `name` (in this job's namespace, or `namespace`). ValueError if none."""
    actor_id = _airt.get_actor(name, namespace or "")
    if actor_id is None:
        raise ValueError(f"Failed to look up actor with name '{name}'")
    return ActorHandle(actor_id)


def kill(actor, *, no_restart=True):
    """Stops the actor's process now; with no_restart it is dead for good."""
    if not isinstance(actor, ActorHandle):
        raise TypeError(f"kill() takes an actor handle, got {type(actor).__name__}")
    try:
        _airt.kill_actor(actor._actor_id, no_restart)
    except _airt.Error as error:
        raise exceptions.translate(error) from None
