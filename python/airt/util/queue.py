"""Queue: a first-in first-out queue shared by drivers, tasks and actors, as Ray's
ray.util.queue.Queue. It lives in an actor of its own (an asyncio actor, so a blocked get or put
waits there without holding up the others); the handle pickles, so tasks and actors can be given
the queue.

    q = Queue(maxsize=10)
    q.put(1)                 # waits while the queue is full (timeout= seconds at most)
    q.get(timeout=5)         # waits while it is empty; Empty after the timeout
"""

import asyncio
import queue as _queue
from collections.abc import Iterable

import airt


class Empty(_queue.Empty):
    """get_nowait(), or get() after its timeout, on an empty queue."""


class Full(_queue.Full):
    """put_nowait(), or put() after its timeout, on a full queue."""


class Queue:
    def __init__(self, maxsize=0, actor_options=None):
        """maxsize <= 0: unbounded. actor_options: the queue actor's .options(...) (num_cpus,
        name, lifetime, ...)."""
        self.maxsize = maxsize
        self.actor = airt.remote(_QueueActor).options(**(actor_options or {})).remote(maxsize)

    def __len__(self):
        return self.size()

    def size(self):
        """How many items the queue holds now."""
        return airt.get(self.actor.qsize.remote())

    def qsize(self):
        return self.size()

    def empty(self):
        return airt.get(self.actor.empty.remote())

    def full(self):
        return airt.get(self.actor.full.remote())

    def put(self, item, block=True, timeout=None):
        """Adds `item`, waiting while the queue is full: at most `timeout` seconds (None: no
        limit), then Full. block=False: Full at once when the queue is full."""
        airt.get(self._put(item, block, timeout))

    async def put_async(self, item, block=True, timeout=None):
        await self._put(item, block, timeout)

    def _put(self, item, block, timeout):
        if not block:
            return self.actor.put_nowait.remote(item)
        _check_timeout(timeout)
        return self.actor.put.remote(item, timeout)

    def get(self, block=True, timeout=None):
        """Takes the oldest item, waiting while the queue is empty: at most `timeout` seconds
        (None: no limit), then Empty. block=False: Empty at once when the queue is empty."""
        return airt.get(self._get(block, timeout))

    async def get_async(self, block=True, timeout=None):
        return await self._get(block, timeout)

    def _get(self, block, timeout):
        if not block:
            return self.actor.get_nowait.remote()
        _check_timeout(timeout)
        return self.actor.get.remote(timeout)

    def put_nowait(self, item):
        return self.put(item, block=False)

    def put_nowait_batch(self, items):
        """Adds all of `items` at once, or none of them (Full) when they do not fit."""
        if not isinstance(items, Iterable):
            raise TypeError("Argument 'items' must be an Iterable")
        airt.get(self.actor.put_nowait_batch.remote(list(items)))

    def get_nowait(self):
        return self.get(block=False)

    def get_nowait_batch(self, num_items):
        """Takes `num_items` items at once, or none of them (Empty) when fewer are there."""
        if not isinstance(num_items, int) or isinstance(num_items, bool):
            raise TypeError("Argument 'num_items' must be an int")
        if num_items < 0:
            raise ValueError("'num_items' must be nonnegative")
        return airt.get(self.actor.get_nowait_batch.remote(num_items))

    def shutdown(self, force=False, grace_period_s=5):
        """Stops the queue's actor: at once with `force`, else once the calls already made to it
        have finished or grace_period_s seconds passed. The queue is unusable after."""
        if self.actor is None:
            return
        if not force:
            done = self.actor.qsize.remote()  # answered after the calls made before it
            airt.wait([done], timeout=grace_period_s)
        airt.kill(self.actor, no_restart=True)
        self.actor = None


def _check_timeout(timeout):
    if timeout is not None and timeout < 0:
        raise ValueError("'timeout' must be a non-negative number")


class _QueueActor:
    """The queue's state. Every method is a coroutine, so all of them run on the actor's one
    asyncio loop (asyncio.Queue is not thread-safe)."""

    def __init__(self, maxsize):
        self.maxsize = maxsize
        self.queue = asyncio.Queue(maxsize)

    async def qsize(self):
        return self.queue.qsize()

    async def empty(self):
        return self.queue.empty()

    async def full(self):
        return self.queue.full()

    async def put(self, item, timeout=None):
        try:
            await asyncio.wait_for(self.queue.put(item), timeout)
        except asyncio.TimeoutError:
            raise Full(f"the queue stayed full (maxsize {self.maxsize}) for {timeout} s") from None

    async def get(self, timeout=None):
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except asyncio.TimeoutError:
            raise Empty(f"the queue stayed empty for {timeout} s") from None

    async def put_nowait(self, item):
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            raise Full(f"the queue is full (maxsize {self.maxsize})") from None

    async def put_nowait_batch(self, items):
        if self.maxsize > 0 and len(items) + self.queue.qsize() > self.maxsize:
            raise Full(f"Cannot add {len(items)} items to queue of size {self.queue.qsize()} "
                       f"and maxsize {self.maxsize}.")
        for item in items:
            self.queue.put_nowait(item)

    async def get_nowait(self):
        try:
            return self.queue.get_nowait()
        except asyncio.QueueEmpty:
            raise Empty("the queue is empty") from None

    async def get_nowait_batch(self, num_items):
        if num_items > self.queue.qsize():
            raise Empty(f"Cannot get {num_items} items from queue of size "
                        f"{self.queue.qsize()}.")
        return [self.queue.get_nowait() for _ in range(num_items)]
