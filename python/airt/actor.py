"""@airt.remote classes: actors on Python workers, as Ray's ActorClass and ActorHandle."""

import contextvars
import inspect

from airt import _airt
from airt._private import options as _options
from airt import exceptions
from airt import generator
from airt import runtime_env
from airt.object_ref import ObjectRef, encode_cpp_args, encode_python_args
from airt.remote_function import FUNCTION_PREFIX, export, wrap_returns

METHOD_PREFIX = "py.method:"
# Ray's max_concurrency for an actor with async methods when none is given.
ASYNC_DEFAULT_CONCURRENCY = 1000
# The (task id, actor id) of the coroutine running on an async actor's loop, whose thread is not
# the one the worker records its running task on (airt._private.worker sets it).
running_call = contextvars.ContextVar("airt_running_call", default=None)


def method(*args, **kwargs):
    """@airt.method(num_returns=N) on an actor method: its calls' default options (Ray's
    ray.method)."""
    def decorate(function):
        for key in kwargs:
            if key not in ("num_returns", "concurrency_group"):
                raise ValueError(f"Invalid option keyword {key} for actor methods")
        function.__airt_method_options__ = dict(kwargs)
        return function
    if args:
        raise TypeError("airt.method takes keyword options only: @airt.method(num_returns=2)")
    return decorate


class ActorMethod:
    """handle.method: .remote(*args, **kwargs) calls it; calls run in the order they were made."""

    def __init__(self, actor_id, name, cpp=False, num_returns=1, backpressure=None):
        self._actor_id = actor_id
        self._name = name
        self._cpp = cpp  # a C++ actor's method: msgpack arguments and return
        self._num_returns = num_returns
        self._backpressure = backpressure  # _generator_backpressure_num_objects

    def remote(self, *args, **kwargs):
        num_returns = self._num_returns
        if not self._cpp and generator.is_streaming(num_returns):
            encoded = encode_python_args(args, kwargs, {"num_returns": generator.STREAMING})
            try:
                completed = _airt.submit_streaming_actor_task(
                    self._actor_id, METHOD_PREFIX + self._name, encoded,
                    generator.backpressure(
                        {"_generator_backpressure_num_objects": self._backpressure}))
            except _airt.Error as error:
                raise exceptions.translate(error) from None
            return generator.ObjectRefGenerator(completed)
        if self._cpp:
            if kwargs:
                raise TypeError("C++ methods take positional arguments only")
            encoded = encode_cpp_args(args)
            name, value_format = self._name, ObjectRef.MSGPACK
        else:
            settings = {"num_returns": num_returns} if num_returns != 1 else None
            encoded = encode_python_args(args, kwargs, settings)
            name, value_format = METHOD_PREFIX + self._name, ObjectRef.PICKLE
        try:
            ids = _airt.submit_actor_task(self._actor_id, name, encoded, max(num_returns, 1))
        except _airt.Error as error:
            raise exceptions.translate(error) from None
        return wrap_returns(ids, num_returns, value_format)

    def options(self, num_returns=None, _generator_backpressure_num_objects=None, **unsupported):
        if unsupported:
            raise ValueError(f"Invalid option keywords {sorted(unsupported)} for actor methods "
                             "(num_returns and _generator_backpressure_num_objects are the ones "
                             "they take)")
        if num_returns is None:
            num_returns = self._num_returns
        _options.check({"num_returns": num_returns}, {"num_returns"}, "actor methods")
        return ActorMethod(self._actor_id, self._name, self._cpp, num_returns,
                           _generator_backpressure_num_objects
                           if _generator_backpressure_num_objects is not None
                           else self._backpressure)


class ActorHandle:
    """A handle to a live actor: handle.method.remote(...)."""

    def __init__(self, actor_id, class_name="actor", method_returns=None):
        self._actor_id = actor_id
        self._class_name = class_name
        self._method_returns = dict(method_returns or {})  # @airt.method(num_returns=) ones

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return ActorMethod(self._actor_id, name, num_returns=self._method_returns.get(name, 1))

    def __repr__(self):
        return f"Actor({self._class_name}, {self._actor_id.hex()})"

    def __eq__(self, other):  # handles to one actor are equal, as Ray's
        if not isinstance(other, ActorHandle):
            return NotImplemented
        return self._actor_id == other._actor_id

    def __hash__(self):
        return hash(self._actor_id)

    def __reduce__(self):
        # A handle travels as the actor's id: the receiving worker asks the head where it lives.
        return ActorHandle, (self._actor_id, self._class_name, self._method_returns)


def _method_returns(cls):
    returns = {}
    for name, member in inspect.getmembers(cls, callable):
        options = getattr(member, "__airt_method_options__", None)
        if options and "num_returns" in options:
            returns[name] = options["num_returns"]
        elif generator.is_generator(member):
            returns[name] = generator.STREAMING  # Ray 2.x's default for generator methods
    return returns


def is_async_class(cls):
    return any(inspect.iscoroutinefunction(m) or inspect.isasyncgenfunction(m)
               for _, m in inspect.getmembers(cls, inspect.isfunction))


class ActorClass:
    """What @airt.remote makes of a class: .remote(*args) creates an actor."""

    def __init__(self, cls, **options):
        _options.check(options, _options.ACTOR_OPTIONS, "actors")
        self._cls = cls
        self._options = {**_options.ACTOR_DEFAULTS, **options}
        self._key = None
        self._method_returns = _method_returns(cls)
        self._is_async = is_async_class(cls)
        self.__name__ = cls.__name__

    def __call__(self, *args, **kwargs):
        raise TypeError(f"actor class {self.__name__} cannot be instantiated directly: "
                        f"use {self.__name__}.remote()")

    def options(self, **options):
        _options.check(options, _options.ACTOR_OPTIONS, "actors")
        copy = ActorClass.__new__(ActorClass)
        copy.__dict__.update(self.__dict__)
        copy._options = {**self._options, **options}
        return copy

    def remote(self, *args, **kwargs):
        o = self._options
        lifetime = o["lifetime"]
        if lifetime not in (None, "non_detached", "detached"):
            raise ValueError(f"lifetime must be 'detached' or 'non_detached', got {lifetime!r}")
        if lifetime == "detached" and not o["name"]:
            raise ValueError("a detached actor must be named (name=...)")
        if o["get_if_exists"] and o["name"]:
            existing = _airt.get_actor(o["name"], o["namespace"] or "")
            if existing is not None:
                return ActorHandle(existing, self.__name__, self._method_returns)
        if self._key is None:
            self._key = export(self._cls)
        concurrency = o["max_concurrency"]
        if concurrency is None:
            concurrency = ASYNC_DEFAULT_CONCURRENCY if self._is_async else 1
        env_key = runtime_env.key_for(o["runtime_env"])
        encoded = encode_python_args(
            args, kwargs,
            _options.call_settings({"scheduling_strategy": o["scheduling_strategy"]}, env_key))
        try:
            actor_id = _create_actor(
                FUNCTION_PREFIX + self._key, encoded, _options.resource_shape(o, 0), o,
                int(concurrency), True)
        except _airt.Error as error:
            message = str(error)
            if "already" in message and "name" in message.lower():
                raise ValueError(message) from None
            raise exceptions.translate(error) from None
        return ActorHandle(actor_id, self.__name__, self._method_returns)


def _create_actor(factory, encoded, shape, o, concurrency, python):
    strategy, selector = _options.strategy_args(o)
    return _airt.create_actor(factory, encoded, shape, o.get("name") or "",
                              o.get("namespace") or "", int(o.get("max_restarts") or 0),
                              concurrency, python, o.get("accelerator_type") or "",
                              o.get("lifetime") == "detached", int(o.get("max_task_retries") or 0),
                              strategy, selector)


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
        _options.check(options, _options.ACTOR_OPTIONS, "actors")
        return CppActorClass(self._factory, self._class_name, {**self._options, **options})

    def remote(self, *args):
        o = {**_options.ACTOR_DEFAULTS, **self._options}
        try:
            actor_id = _create_actor(self._factory, encode_cpp_args(args),
                                     _options.resource_shape(o, 0), o,
                                     int(o["max_concurrency"] or 1), False)
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
    """Stops the actor's process now, as ray.kill. no_restart=True: the actor is dead for good
    (its calls raise ActorDiedError). no_restart=False: it restarts as after a crash when it
    has restarts left (max_restarts; the kill counts as one), running its constructor again on
    a new process; calls in flight are resent up to max_task_retries, later calls wait for the
    restart. Without restarts left it is dead."""
    if not isinstance(actor, (ActorHandle, CppActorHandle)):
        raise TypeError(f"kill() takes an actor handle, got {type(actor).__name__}")
    try:
        _airt.kill_actor(actor._actor_id, no_restart)
    except _airt.Error as error:
        raise exceptions.translate(error) from None
