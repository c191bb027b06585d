"""Streaming generators (Ray's ObjectRefGenerator) against the session's local cluster: items
arrive while the generator runs, back-pressure holds a generator at most N items ahead of its
consumer, an error mid-stream lands on the next item, actor methods (sync and async) stream,
a generator whose worker died is re-run without duplicates, cancel stops it; and across two
nodes. Generators and consumers synchronize through files (never through timing)."""

import asyncio
import os
import time
import warnings

import pytest

import airt
from airt import exceptions

# The remote functions below are pickled by value (the workers cannot import this file), so each
# defines what it uses itself.


def wait_for(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def read_count(path):
    try:
        with open(path) as f:
            text = f.read()
        return int(text) if text else 0
    except FileNotFoundError:
        return 0


@airt.remote
def gated(go_file, n):
    """Yields 0, then waits for `go_file` (the consumer writes it after item 0) before the rest."""
    import os
    import time
    yield 0
    deadline = time.monotonic() + 60
    while not os.path.exists(go_file):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{go_file} never appeared")
        time.sleep(0.01)
    for i in range(1, n):
        yield i


def test_items_arrive_while_the_generator_still_runs(cluster, tmp_path):
    go = str(tmp_path / "go")
    gen = gated.remote(go, 4)
    assert isinstance(gen, airt.ObjectRefGenerator)
    first = next(gen)
    # The generator waits for `go`, which only this consumer writes after item 0: it is still
    # running, and its last item is not made yet.
    assert airt.get(first) == 0
    assert airt.wait([gen.completed()], timeout=0)[0] == []
    open(go, "w").close()
    assert [airt.get(ref) for ref in gen] == [1, 2, 3]
    assert airt.get(gen.completed()) is None
    with pytest.raises(StopIteration):
        next(gen)


@airt.remote
def counting(count_file, n):
    """Yields 0..n-1, writing how many items it made into `count_file` before each yield."""
    import os
    for i in range(n):
        with open(count_file + ".partial", "w") as f:
            f.write(str(i + 1))
        os.rename(count_file + ".partial", count_file)
        yield i


def test_backpressure_holds_the_generator_n_items_ahead_of_its_consumer(cluster, tmp_path):
    count = str(tmp_path / "count")
    n, ahead = 12, 3
    gen = counting.options(_generator_backpressure_num_objects=ahead).remote(count, n)
    taken = 0
    values = []
    for ref in gen:
        taken += 1
        values.append(airt.get(ref))
        if taken + ahead <= n:
            # It runs up to the window...
            assert wait_for(lambda: read_count(count) >= taken + ahead), read_count(count)
        # ...and never past it.
        assert read_count(count) <= taken + ahead, (read_count(count), taken)
    assert values == list(range(n))


def test_without_backpressure_the_generator_runs_to_its_end(cluster, tmp_path):
    count = str(tmp_path / "count")
    gen = counting.remote(count, 8)
    airt.get(gen.completed())  # nobody took an item: it ran to its end anyway (Ray's default)
    assert read_count(count) == 8
    assert [airt.get(r) for r in gen] == list(range(8))


@airt.remote
def fails_after(k):
    for i in range(k):
        yield i
    raise ValueError(f"failed after {k} items")


def test_an_exception_after_k_items_surfaces_on_the_next_items_get(cluster):
    gen = fails_after.remote(2)
    refs = list(gen)  # the items, then the one holding the error, then StopIteration
    assert len(refs) == 3
    assert airt.get(refs[:2]) == [0, 1]
    with pytest.raises(exceptions.RayTaskError) as raised:
        airt.get(refs[2])
    assert isinstance(raised.value, ValueError)
    assert "failed after 2 items" in str(raised.value)
    with pytest.raises(exceptions.RayTaskError):
        airt.get(gen.completed())


def test_a_non_generator_function_still_returns_a_ref(cluster):
    @airt.remote
    def plain():
        return 5
    assert airt.get(plain.remote()) == 5


def test_dynamic_is_a_deprecated_alias_that_streams(cluster):
    @airt.remote(num_returns="dynamic")
    def two():
        yield "a"
        yield "b"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gen = two.remote()
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert [airt.get(r) for r in gen] == ["a", "b"]


def test_async_for_and_anext_in_asyncio(cluster):
    @airt.remote
    def three():
        for i in range(3):
            yield i * 10

    async def consume():
        gen = three.remote()
        first = await gen.__anext__()
        rest = [await ref async for ref in gen]
        return [await first] + rest

    assert asyncio.run(consume()) == [0, 10, 20]


def test_large_items_stream_through_the_object_store(cluster):
    @airt.remote
    def blocks(n):
        import numpy as np
        for i in range(n):
            yield np.full(1 << 20, i, dtype=np.uint8)  # 1 MiB: above the inline threshold

    arrays = [airt.get(ref) for ref in blocks.remote(3)]
    assert [int(a[0]) for a in arrays] == [0, 1, 2]
    assert all(a.shape == (1 << 20,) for a in arrays)


@airt.remote
class Streamer:
    def __init__(self):
        self.calls = 0

    def items(self, go_file, n):
        import os
        import time
        self.calls += 1
        yield "first"
        deadline = time.monotonic() + 60
        while not os.path.exists(go_file):
            if time.monotonic() > deadline:
                raise TimeoutError(go_file)
            time.sleep(0.01)
        for i in range(n):
            yield i

    def count_calls(self):
        return self.calls


def test_an_actor_method_generator_streams(cluster, tmp_path):
    actor = Streamer.remote()
    go = str(tmp_path / "go")
    gen = actor.items.remote(go, 3)
    assert airt.get(next(gen)) == "first"
    open(go, "w").close()
    assert [airt.get(r) for r in gen] == [0, 1, 2]
    assert airt.get(actor.count_calls.remote()) == 1


@airt.remote
class AsyncStreamer:
    async def ticks(self, n):
        import asyncio
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    async def ping(self):
        return "pong"


def test_an_async_actor_generator_streams_and_the_loop_serves_other_calls(cluster):
    actor = AsyncStreamer.remote()
    gen = actor.ticks.options(_generator_backpressure_num_objects=1).remote(5)
    assert airt.get(next(gen)) == 0
    # The generator is held back (one item ahead) on a worker thread, not on the actor's loop:
    # another call runs meanwhile.
    assert airt.get(actor.ping.remote(), timeout=30) == "pong"
    assert [airt.get(r) for r in gen] == [1, 2, 3, 4]


@airt.remote(max_retries=2)
def dies_once(marker, n, k):
    """Yields 0..n-1; on its first attempt its process exits right after item k went out."""
    import os
    first = not os.path.exists(marker)
    for i in range(n):
        yield i
        if first and i == k:
            open(marker, "w").close()
            os._exit(1)


def test_a_retried_generator_resumes_without_duplicates(cluster, tmp_path):
    marker = str(tmp_path / "died")
    gen = dies_once.remote(marker, 6, 2)
    values = [airt.get(ref) for ref in gen]
    assert os.path.exists(marker)  # the first attempt died
    assert values == list(range(6))


@airt.remote(max_retries=0)
def endless(count_file, stopped_file):
    import os
    import time
    i = 0
    try:
        while True:
            with open(count_file + ".partial", "w") as f:
                f.write(str(i + 1))
            os.rename(count_file + ".partial", count_file)
            yield i
            i += 1
            time.sleep(0.01)
    finally:
        open(stopped_file, "w").close()


def test_cancel_stops_the_generator_and_the_next_get_raises(cluster, tmp_path):
    count, stopped = str(tmp_path / "count"), str(tmp_path / "stopped")
    gen = endless.remote(count, stopped)
    assert airt.get(next(gen)) == 0
    airt.cancel(gen)
    assert wait_for(lambda: os.path.exists(stopped))  # the generator's finally ran
    with pytest.raises(exceptions.TaskCancelledError):
        for ref in gen:  # items made before the cancel arrived may come first
            airt.get(ref)


def test_cancel_stops_a_generator_held_back_by_its_consumer(cluster, tmp_path):
    count, stopped = str(tmp_path / "count"), str(tmp_path / "stopped")
    gen = endless.options(_generator_backpressure_num_objects=1).remote(count, stopped)
    assert airt.get(next(gen)) == 0
    assert wait_for(lambda: read_count(count) >= 2)  # made item 1, held back from item 2
    airt.cancel(gen)
    assert wait_for(lambda: os.path.exists(stopped))
    assert read_count(count) <= 2
    with pytest.raises(exceptions.TaskCancelledError):
        for ref in gen:
            airt.get(ref)


def test_next_sync_times_out_while_no_item_comes(cluster, tmp_path):
    go = str(tmp_path / "go")
    gen = gated.remote(go, 2)
    assert airt.get(next(gen)) == 0
    with pytest.raises(exceptions.GetTimeoutError):
        gen._next_sync(timeout_s=0.2)
    open(go, "w").close()
    assert [airt.get(r) for r in gen] == [1]


def test_across_two_nodes(two_nodes):
    code = """
import sys
import numpy as np
import airt
airt.init()
node1, node2 = sys.argv[1], sys.argv[2]

@airt.remote(resources={"node2": 1})
def made_on_node2(n):
    here = airt.get_runtime_context().get_node_id()
    for i in range(n):
        yield here, np.full(1 << 20, i, dtype=np.uint8)

items = [airt.get(ref) for ref in made_on_node2.remote(3)]
assert [where for where, _ in items] == [node2] * 3, items
assert [int(a[0]) for _, a in items] == [0, 1, 2]

@airt.remote(resources={"node2": 1})
class Far:
    def where(self, n):
        for i in range(n):
            yield airt.get_runtime_context().get_node_id(), i

far = Far.remote()
assert [airt.get(r) for r in far.where.remote(2)] == [(node2, 0), (node2, 1)]
print("OK")
"""
    assert two_nodes.run_driver(code, *two_nodes.node_ids).strip().endswith("OK")


def test_an_async_generator_function_streams_as_a_task(cluster):
    @airt.remote
    async def ticks(n):
        import asyncio
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    assert [airt.get(r) for r in ticks.remote(3)] == [0, 1, 2]


def test_streaming_a_function_that_is_no_generator_fails_on_the_first_item(cluster):
    @airt.remote(num_returns="streaming")
    def plain():
        return 1

    refs = list(plain.remote())
    assert len(refs) == 1
    with pytest.raises(exceptions.RayTaskError, match="must return a generator"):
        airt.get(refs[0])
