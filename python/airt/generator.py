"""Streaming generators, as Ray's: a task or actor method that is a generator returns an
ObjectRefGenerator at once, whose refs arrive while the generator still runs.

    @airt.remote
    def count(n):
        for i in range(n):
            yield i

    for ref in count.remote(3):  # ObjectRefGenerator
        print(airt.get(ref))     # 0, 1, 2 as they are made

Generator functions and methods stream by default (num_returns="streaming", Ray 2.x's default
for generators). num_returns="dynamic" is a deprecated alias: it warns (DeprecationWarning) and
streams the same way, returning an ObjectRefGenerator, not Ray 1.x's ref to one.

Back-pressure: `_generator_backpressure_num_objects=N` (a task option, and an actor method's
.options()) keeps the generator at most N items ahead of what its consumer took: the worker
blocks the generator (never an asyncio loop) until the consumer catches up. The default (None or
<= 0) is Ray's: no limit.

The worker side (drain) runs on a Python worker: it sends each item to the owner as it is made.
"""

import asyncio
import inspect
import pickle
import warnings

from airt import _airt
from airt import exceptions
from airt.object_ref import ObjectRef

STREAMING = "streaming"
DYNAMIC = "dynamic"


def is_generator(function):
    """Whether calling `function` makes a (sync or async) generator."""
    return inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function)


def is_streaming(num_returns):
    """Whether num_returns asks for a stream; warns for the deprecated "dynamic"."""
    if num_returns == DYNAMIC:
        warnings.warn('num_returns="dynamic" is deprecated: generators stream by default '
                      '(num_returns="streaming"), and "dynamic" streams the same way',
                      DeprecationWarning, stacklevel=3)
        return True
    return num_returns == STREAMING


def backpressure(options):
    """The generator back-pressure a call's options give (-1: no limit)."""
    value = options.get("_generator_backpressure_num_objects")
    if value is None:
        return -1
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"_generator_backpressure_num_objects must be an int, got {value!r}")
    return value if value > 0 else -1


class ObjectRefGenerator:
    """The refs of a streaming call's items, in order, each as soon as the generator made it.

    `for ref in gen`, `next(gen)` and, in asyncio, `async for ref in gen` /
    `await gen.__anext__()`; StopIteration (StopAsyncIteration) after the last item. When the
    generator raised after k items, the k+1-th ref holds its error (airt.get raises it) and the
    stream ends after it. `completed()` is a ref ready once the generator finished (None, or the
    error). airt.cancel(gen) cancels the call: the next ref's get raises TaskCancelledError.
    Dropping the generator frees the items not taken and lets the generator run unheld.
    """

    def __init__(self, completed_id, value_format=ObjectRef.PICKLE):
        self._completed = ObjectRef(completed_id, value_format)
        self._hold = _airt.hold_generator(completed_id)
        self._format = value_format

    def completed(self):
        """A ref ready once the generator has finished: None, or it raises the generator's
        error."""
        return self._completed

    def _next_or_none(self, timeout=None):
        try:
            item = _airt.generator_next(self._completed.binary(), timeout)
        except _airt.Error as error:
            raise exceptions.translate(error) from None
        return None if item is None else ObjectRef(item, self._format)

    def _next_sync(self, timeout_s=None):
        """The next ref, waiting at most `timeout_s` seconds (None: no limit): StopIteration at
        the end, GetTimeoutError when none came in time."""
        ref = self._next_or_none(timeout_s)
        if ref is None:
            raise StopIteration
        return ref

    def __iter__(self):
        return self

    def __next__(self):
        return self._next_sync()

    def __aiter__(self):
        return self

    async def __anext__(self):
        # Waited for on a thread: the event loop runs on meanwhile.
        ref = await asyncio.get_running_loop().run_in_executor(None, self._next_or_none)
        if ref is None:
            raise StopAsyncIteration
        return ref

    def __reduce__(self):
        raise TypeError("an ObjectRefGenerator cannot be passed to another task or put: pass "
                        "the refs it gives")

    def __repr__(self):
        return f"ObjectRefGenerator({self._completed.hex()})"


def drain(result, emitter, loop=None, interrupter=None, task_id=None):
    """On a worker: sends each item of `result` (a generator or async generator; `loop` runs an
    actor's async ones) to the owner through `emitter`, pickled; the call's own return (None)."""
    if emitter is None:
        raise RuntimeError("this call was not submitted as a streaming generator")
    if inspect.isasyncgen(result):
        if loop is None:  # a task: a loop of its own for the generator
            own = asyncio.new_event_loop()
            try:
                while True:
                    try:
                        item = own.run_until_complete(result.__anext__())
                    except StopAsyncIteration:
                        break
                    emitter.emit(pickle.dumps(item, protocol=5))
            finally:
                own.close()
        else:
            _drain_on_loop(result, emitter, loop, interrupter, task_id)
    elif inspect.isgenerator(result) or hasattr(result, "__next__"):
        for item in result:
            emitter.emit(pickle.dumps(item, protocol=5))
    else:
        raise TypeError(f"a streaming call must return a generator, got {type(result).__name__}")
    return pickle.dumps(None, protocol=5)


def _drain_on_loop(agen, emitter, loop, interrupter, task_id):
    """An async actor's generator: each step runs on the actor's loop, each send (which may wait
    for the consumer) on this thread, so the loop serves other calls meanwhile."""
    current = [None]

    def cancel():
        future = current[0]
        if future is not None:
            future.cancel()

    def step():
        current[0] = asyncio.run_coroutine_threadsafe(agen.__anext__(), loop)
        return current[0].result()

    def run():
        while True:
            try:
                item = step()
            except StopAsyncIteration:
                return
            emitter.emit(pickle.dumps(item, protocol=5))

    if interrupter is None or task_id is None:
        run()
        return
    with interrupter.cancelling(task_id, cancel):
        run()
