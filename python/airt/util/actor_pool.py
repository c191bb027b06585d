"""ActorPool: work spread over a fixed set of actors, as Ray's ray.util.ActorPool.

    pool = ActorPool([Worker.remote() for _ in range(4)])
    results = list(pool.map(lambda actor, v: actor.double.remote(v), range(10)))

Each actor runs one submitted call at a time; values submitted while every actor is busy wait
in the pool (in submission order) and go to the next actor that comes back. Actors come back
when their result is taken (get_next, get_next_unordered, or the generators of map)."""

import airt
from airt import exceptions


class ActorPool:
    def __init__(self, actors):
        self._idle = list(actors)
        self._busy = {}        # the call's ref (a tuple for a list of refs) -> (index, actor)
        self._by_index = {}    # submission index -> the call's ref(s), until taken
        self._next_index = 0   # of the next submission
        self._next_return = 0  # the submission get_next answers next
        self._waiting = []     # (fn, value) submitted while no actor was idle

    def map(self, fn, values):
        """Submits fn(actor, v) for each value; a generator of the results in submission order.
        Results still pending from earlier calls are dropped first (as Ray does)."""
        self._drop_pending(ordered=True)
        for v in values:
            self.submit(fn, v)

        def results():
            while self.has_next():
                yield self.get_next()
        return results()

    def map_unordered(self, fn, values):
        """As map, but the generator yields the results as they finish."""
        self._drop_pending(ordered=False)
        for v in values:
            self.submit(fn, v)

        def results():
            while self.has_next():
                yield self.get_next_unordered()
        return results()

    def _drop_pending(self, ordered):
        while self.has_next():
            try:
                if ordered:
                    self.get_next(timeout=0, ignore_if_timedout=True)
                else:
                    self.get_next_unordered(timeout=0, ignore_if_timedout=True)
            except TimeoutError:
                pass

    def submit(self, fn, value):
        """Calls fn(actor, value) on an idle actor (fn returns the call's ObjectRef, or a list of
        them), or keeps it until one is idle."""
        if not self._idle:
            self._waiting.append((fn, value))
            return
        actor = self._idle.pop()
        ref = fn(actor, value)
        self._busy[_key(ref)] = (self._next_index, actor)
        self._by_index[self._next_index] = ref
        self._next_index += 1

    def has_next(self):
        """Whether a submitted call's result is still to be taken."""
        return bool(self._busy)

    def get_next(self, timeout=None, ignore_if_timedout=False):
        """The next result in submission order. TimeoutError after `timeout` seconds; with
        ignore_if_timedout that call is dropped too (its actor goes back to the pool).
        StopIteration when nothing is pending; ValueError after get_next_unordered took a later
        result."""
        if not self.has_next():
            raise StopIteration("No more results to get")
        if self._next_return >= self._next_index:
            raise ValueError("It is not allowed to call get_next() after get_next_unordered().")
        ref = self._by_index[self._next_return]
        if timeout is not None:
            ready, _ = airt.wait(_refs(ref), num_returns=len(_refs(ref)), timeout=timeout)
            if len(ready) < len(_refs(ref)):
                if not ignore_if_timedout:
                    raise TimeoutError("Timed out waiting for result")
                self._take(ref)
                self._next_return += 1
                raise TimeoutError(f"Timed out waiting for result. The task {ref} has been "
                                   f"ignored.")
        self._next_return += 1
        return self._result(ref)

    def get_next_unordered(self, timeout=None, ignore_if_timedout=False):
        """Whichever pending result is ready first. TimeoutError after `timeout` seconds; with
        ignore_if_timedout the oldest pending call is dropped too."""
        if not self.has_next():
            raise StopIteration("No more results to get")
        firsts = {_refs(ref)[0]: ref for ref in self._by_index.values()}
        ready, _ = airt.wait(list(firsts), num_returns=1, timeout=timeout)
        if not ready:
            if not ignore_if_timedout:
                raise TimeoutError("Timed out waiting for result")
            oldest = self._by_index[min(self._by_index)]
            self._take(oldest)
            raise TimeoutError(f"Timed out waiting for result. The task {oldest} has been "
                               f"ignored.")
        ref = firsts[ready[0]]
        index = self._busy[_key(ref)][0]
        self._next_return = max(self._next_return, index + 1)
        return self._result(ref)

    def _take(self, ref):
        """Forgets the call of `ref`; its actor goes back to the pool."""
        index, actor = self._busy.pop(_key(ref))
        del self._by_index[index]
        self._return_actor(actor)

    def _result(self, ref):
        index, actor = self._busy.pop(_key(ref))
        del self._by_index[index]
        alive = True
        try:
            return airt.get(ref)
        except exceptions.ActorDiedError:
            alive = False  # a dead actor leaves the pool
            raise
        finally:
            self._return_actor(actor, alive)

    def _return_actor(self, actor, alive=True):
        if alive:
            self._idle.append(actor)
        if self._waiting and self._idle:
            self.submit(*self._waiting.pop(0))

    def has_free(self):
        """Whether an actor is idle and nothing waits for one."""
        return bool(self._idle) and not self._waiting

    def pop_idle(self):
        """Takes an idle actor out of the pool (None when has_free() is False)."""
        return self._idle.pop() if self.has_free() else None

    def push(self, actor):
        """Adds an actor to the pool (it takes a waiting submission at once). ValueError when
        it is in the pool already."""
        busy = [a for _, a in self._busy.values()]
        if any(_same_actor(actor, a) for a in self._idle + busy):
            raise ValueError("Actor already belongs to current ActorPool")
        self._return_actor(actor)


def _refs(ref):
    return list(ref) if isinstance(ref, (list, tuple)) else [ref]


def _key(ref):
    return tuple(ref) if isinstance(ref, list) else ref


def _same_actor(a, b):
    return a is b or getattr(a, "_actor_id", a) == getattr(b, "_actor_id", b)
