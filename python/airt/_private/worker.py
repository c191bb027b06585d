"""A Python worker: `python -m airt._private.worker FLAGS` (the node starts it with airt-worker's flags).

It runs airt-worker's own loop (airt._airt.run_worker); each task names a Python function by the
key under which its driver stored it, cloudpickled, in the head's KV (airt.remote_function), and
carries the call's pickled arguments, the last one the pair (keyword arguments, call settings):
num_returns, retry_exceptions, the runtime_env key, which keyword arguments came as ObjectRefs.

An actor whose class has `async def` methods gets an asyncio loop on a thread of its own: each
call's coroutine runs there, so up to max_concurrency of them interleave at their awaits.
Cancelling such a call cancels its coroutine (asyncio.CancelledError inside it, as Ray does).
"""

import asyncio
import functools
import os
import pickle
import sys
import threading
import traceback

import cloudpickle

from airt import _airt
from airt import generator
from airt import runtime_context
from airt import runtime_env
from airt.actor import METHOD_PREFIX, is_async_class, running_call
from airt.exceptions import KINDS, encode_cause
from airt.object_ref import decode_pickled
from airt.remote_function import FUNCTION_NAMESPACE, FUNCTION_PREFIX

_functions = {}


def _function(name):
    if name not in _functions:
        key = name[len(FUNCTION_PREFIX):]
        data = _airt.kv_get(FUNCTION_NAMESPACE, key)
        if data is None:
            raise LookupError(f"no Python function {key} in the head's function table")
        _functions[name] = cloudpickle.loads(data)
    return _functions[name]


class _Actor:
    """A Python actor's instance, its environment, and its loop when it has async methods."""

    def __init__(self, instance, environment, interrupter):
        self.instance = instance
        self.environment = environment  # kept for the actor's life
        self.interrupter = interrupter  # None: its calls cannot be cancelled
        self.loop = None
        if is_async_class(type(instance)):
            self.loop = asyncio.new_event_loop()
            threading.Thread(target=self.loop.run_forever, name="airt-actor-loop",
                             daemon=True).start()

    def call(self, name, positional, keywords):
        method = getattr(self.instance, name)
        if self.loop is None or not asyncio.iscoroutinefunction(method):
            return method(*positional, **keywords)
        ids = _airt.current_task()

        async def run():
            running_call.set(ids)
            return await method(*positional, **keywords)
        future = asyncio.run_coroutine_threadsafe(run(), self.loop)
        if self.interrupter is None:
            return future.result()
        # Cancelled, result() raises at once; the coroutine gets its CancelledError on the loop.
        with self.interrupter.cancelling(ids[0], future.cancel):
            return future.result()


def _decode_arguments(args):
    positional = [decode_pickled(a) for a in args[:-1]]
    keywords, settings = pickle.loads(args[-1]) if args else ({}, None)
    settings = settings or {}
    ref_kwargs = settings.get("ref_kwargs")
    if ref_kwargs:  # ObjectRef keyword arguments came last among the positional ones
        values = positional[len(positional) - len(ref_kwargs):]
        del positional[len(positional) - len(ref_kwargs):]
        keywords = {**keywords, **dict(zip(ref_kwargs, values))}
    return positional, keywords, settings


def _pickled_returns(result, num_returns):
    """The return's pickle, or with num_returns N != 1 the pickles of its N items."""
    if num_returns == 1:
        return pickle.dumps(result, protocol=5)
    if num_returns == 0:
        return [pickle.dumps(None, protocol=5)]
    items = list(result)
    if len(items) != num_returns:
        raise ValueError(f"the task was declared with num_returns={num_returns} but returned "
                         f"{len(items)} value(s)")
    return [pickle.dumps(item, protocol=5) for item in items]


def _retryable(error, settings):
    retry = settings.get("retry_exceptions")
    if not retry:
        return False
    if retry is True:
        return isinstance(error, Exception)
    return isinstance(error, cloudpickle.loads(retry))


class _EnvSetupFailed(Exception):
    """The call's runtime_env could not be set up (the error that stopped it is __cause__)."""


def _apply_env(key):
    """Applies the runtime_env `key` to this process; its Applied (restore() undoes it)."""
    applied = None
    try:
        applied = runtime_env.Applied(key)
        if key:
            runtime_env.set_parent(runtime_env.fetch(key), key)
        return applied
    except Exception as error:
        if applied is not None:
            applied.restore()
        raise _EnvSetupFailed(f"the runtime_env {key} could not be set up in worker "
                              f"{os.getpid()}: {error!r}") from error


def _run_task(target, positional, keywords, settings, finish=None):
    """Runs `target` in the call's runtime_env, retrying as retry_exceptions allows; `finish`
    (a generator's drain) runs on its result there too, and is never retried (its items went)."""
    key = settings.get("env")
    saved_parent = runtime_env.parent()
    applied = _apply_env(key)
    try:
        # -1: for as long as it raises; a generator is never retried here (its items went)
        retries = 0 if finish else int(settings.get("max_retries", 0))
        attempt = 0
        while True:
            try:
                result = target(*positional, **keywords)
                return finish(result) if finish else result
            except Exception as error:  # retry_exceptions: run it again while it may
                attempt += 1
                if (0 <= retries < attempt) or not _retryable(error, settings):
                    raise
                print(f"airt: {getattr(target, '__name__', 'task')} raised {error!r}; retrying "
                      f"({attempt}/{retries if retries >= 0 else 'unlimited'})",
                      file=sys.stderr)
    finally:
        applied.restore()
        runtime_env.set_parent(*saved_parent)


def _call(kind, name, actor, args, interrupter=None):
    """Runs one task: "task" and "method" answer (True, pickled return or list of them),
    "create" (True, the new actor); a failure (False, the remote traceback, the pickled exception
    (TaskError.data), the kind's number: userException, or runtimeEnvSetup). `interrupter`
    (airt._private.cancellable) cancels an async actor's calls."""
    try:
        positional, keywords, settings = _decode_arguments(args)
        num_returns = settings.get("num_returns", 1)
        # A generator's call: its items go to the owner as they are made (airt.generator).
        emitter = _airt.current_generator() if num_returns == generator.STREAMING else None
        if kind == "method":
            if not name.startswith(METHOD_PREFIX):
                return False, f"{name} is not a method of a Python actor"
            result = actor.call(name[len(METHOD_PREFIX):], positional, keywords)
            if emitter is not None:
                return True, generator.drain(result, emitter, actor.loop, actor.interrupter,
                                             _airt.current_task()[0])
            return True, _pickled_returns(result, num_returns)
        if not name.startswith(FUNCTION_PREFIX):
            return False, f"{name} is not a Python function of airt (a C++ one on a Python worker?)"
        target = _function(name)
        if kind == "create":
            runtime_context.record_actor_creation(settings.get("capture_pg", False))
            environment = _apply_env(settings.get("env"))  # never restored: the actor's process
            return True, _Actor(target(*positional, **keywords), environment, interrupter)
        runtime_context.set_task_capture(settings.get("capture_pg", False))
        if emitter is not None:
            return True, _run_task(target, positional, keywords, settings,
                                   lambda result: generator.drain(result, emitter))
        return True, _pickled_returns(_run_task(target, positional, keywords, settings),
                                      num_returns)
    except _EnvSetupFailed as error:
        return False, traceback.format_exc(), b"", KINDS["runtimeEnvSetup"]
    except BaseException as error:  # the user's error, whatever it is, goes back to the caller
        return False, traceback.format_exc(), encode_cause(error), KINDS["userException"]


def _flag(argv, name):
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return None


def main():
    # Tasks from C++ name modules on the job's code search path (airt._private.pymodule); tasks run on
    # the main thread, where cancel can interrupt them (airt._private.cancellable).
    from airt._private import cancellable as _cancellable, pymodule as _pymodule
    runtime_context.enter_worker_mode()
    from airt._private import gpu_memory as _gpu_memory
    _gpu_memory.install()  # a fractional GPU's memory share, for torch once user code imports it
    argv = sys.argv[1:]
    socket = _flag(argv, "--store-socket")
    if socket:  # the node's folder: runtime_env packages are unpacked under it
        os.environ["AIRT_NODE_DIR"] = os.path.dirname(os.path.abspath(socket))
    _pymodule.add_code_search_path(argv)
    interrupter = _cancellable.Interrupter()
    call = functools.partial(_call, interrupter=interrupter)
    return _cancellable.run_worker(argv, interrupter, _pymodule.dispatching(call))


if __name__ == "__main__":
    sys.exit(main())
