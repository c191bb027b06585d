"""airt.util: ActorPool, queue.Queue and get_node_ip_address, on a local cluster."""

import asyncio
import queue as std_queue
import sys
import threading
import time

import cloudpickle
import pytest

import airt
from airt.util import ActorPool, as_completed, get_node_ip_address, map_unordered
from airt.util.queue import Empty, Full, Queue

# Workers cannot import this test module: its functions and classes travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@airt.remote(num_cpus=0)
class Doubler:
    def double(self, v):
        return 2 * v

    def slow_double(self, v, seconds):
        time.sleep(seconds)
        return 2 * v

    def wait_for(self, gate):
        return airt.get(gate) * 2


def _pool(n=2):
    return ActorPool([Doubler.remote() for _ in range(n)])


def test_actor_pool_map_keeps_order_and_map_unordered_yields_all(cluster):
    pool = _pool()
    assert list(pool.map(lambda a, v: a.double.remote(v), range(8))) == [2 * v for v in range(8)]
    # The slowest value first: unordered yields it after the quick ones.
    values = [(1, 2.0)] + [(v, 0.0) for v in range(2, 6)]
    got = list(pool.map_unordered(lambda a, v: a.slow_double.remote(*v), values))
    assert sorted(got) == [2 * v for v, _ in values]
    assert got[-1] == 2
    assert not pool.has_next()


def test_actor_pool_submit_queues_values_while_every_actor_is_busy(cluster):
    pool = _pool(2)
    for v in range(5):
        pool.submit(lambda a, v: a.double.remote(v), v)
    assert not pool.has_free()  # both actors busy, three values waiting
    assert pool.pop_idle() is None
    results = []
    while pool.has_next():
        results.append(pool.get_next())
    assert results == [0, 2, 4, 6, 8]
    assert pool.has_free()
    with pytest.raises(StopIteration):
        pool.get_next()
    with pytest.raises(StopIteration):
        pool.get_next_unordered()


def test_actor_pool_get_next_times_out_and_can_drop_the_call(cluster):
    pool = _pool(1)
    pool.submit(lambda a, v: a.slow_double.remote(v, 30), 1)
    with pytest.raises(TimeoutError):
        pool.get_next(timeout=0.2)
    assert pool.has_next()  # still pending
    with pytest.raises(TimeoutError, match="ignored"):
        pool.get_next(timeout=0.2, ignore_if_timedout=True)
    assert not pool.has_next() and pool.has_free()  # dropped; the actor is back
    # The actor still sleeps in the dropped call, so the next one cannot finish yet.
    pool.submit(lambda a, v: a.double.remote(v), 2)
    with pytest.raises(TimeoutError) as first:
        pool.get_next_unordered(timeout=0.2)
    assert "ignored" not in str(first.value) and pool.has_next()
    with pytest.raises(TimeoutError, match="ignored"):
        pool.get_next_unordered(timeout=0.2, ignore_if_timedout=True)
    assert not pool.has_next() and pool.has_free()


def test_actor_pool_push_pop_idle_and_get_next_after_unordered(cluster):
    a, b = Doubler.remote(), Doubler.remote()
    pool = ActorPool([a])
    pool.push(b)
    with pytest.raises(ValueError, match="already belongs"):
        pool.push(a)
    idle = pool.pop_idle()
    assert idle in (a, b)
    assert pool.pop_idle() is not None and pool.pop_idle() is None
    pool.push(a)
    pool.submit(lambda actor, v: actor.double.remote(v), 1)
    pool.submit(lambda actor, v: actor.double.remote(v), 2)  # waits for the one actor
    assert pool.get_next_unordered(timeout=60) == 2
    assert pool.get_next_unordered(timeout=60) == 4
    pool.submit(lambda actor, v: actor.double.remote(v), 3)
    pool.submit(lambda actor, v: actor.double.remote(v), 4)
    assert pool.get_next_unordered(timeout=60) == 6
    assert pool.get_next(timeout=60) == 8


def test_queue_put_get_sizes_and_nowait_errors(cluster):
    q = Queue(maxsize=3)
    assert q.empty() and not q.full() and q.size() == 0 and len(q) == 0
    q.put(1)
    q.put_nowait(2)
    q.put_nowait_batch([3])
    assert q.full() and q.qsize() == 3
    with pytest.raises(Full):
        q.put_nowait(4)
    with pytest.raises(std_queue.Full):  # Ray's Full is a queue.Full
        q.put(4, block=False)
    with pytest.raises(Full):
        q.put_nowait_batch([4])
    with pytest.raises(Full):
        q.put(4, timeout=0.2)
    assert q.get() == 1
    assert q.get_nowait_batch(2) == [2, 3]
    with pytest.raises(Empty):
        q.get_nowait()
    with pytest.raises(std_queue.Empty):
        q.get(block=False)
    with pytest.raises(Empty):
        q.get(timeout=0.2)
    with pytest.raises(Empty):
        q.get_nowait_batch(1)
    with pytest.raises(ValueError):
        q.get(timeout=-1)
    with pytest.raises(ValueError):
        q.get_nowait_batch(-1)
    with pytest.raises(TypeError):
        q.put_nowait_batch(5)
    q.shutdown()
    assert q.actor is None


def test_queue_blocking_get_waits_for_a_put_from_a_task(cluster):
    q = Queue()

    @airt.remote(num_cpus=0)
    def producer(queue, items):
        for item in items:
            queue.put(item)
        return len(items)

    # A shape of its own: airt pipelines tasks of one shape onto one leased worker, where the
    # producer would wait behind the blocked consumer (Ray sends one task per worker at a time).
    @airt.remote(num_cpus=1)
    def consumer(queue, n):
        return [queue.get(timeout=60) for _ in range(n)]

    got = consumer.remote(q, 4)  # blocks in the queue actor until the producer's puts arrive
    assert airt.get(producer.remote(q, ["a", "b", "c", "d"]), timeout=60) == 4
    assert airt.get(got, timeout=60) == ["a", "b", "c", "d"]
    assert q.empty()
    q.shutdown(force=True)


def test_queue_blocking_put_waits_for_room(cluster):
    q = Queue(maxsize=1)
    q.put("first")
    taken = []
    thread = threading.Thread(target=lambda: taken.append(q.get(timeout=60)))
    thread.start()
    q.put("second", timeout=60)  # fits once the thread took the first
    thread.join(timeout=60)
    assert taken == ["first"] and q.get_nowait() == "second"

    async def use_async():
        await q.put_async("third")
        return await q.get_async(timeout=10)
    assert asyncio.run(use_async()) == "third"
    q.shutdown()


def test_get_node_ip_address_is_the_local_nodes(cluster):
    @airt.remote(num_cpus=0)
    def remote_ip():
        return get_node_ip_address()

    ip = get_node_ip_address()
    local = [n for n in airt.nodes() if n["Local"]][0]
    assert local["NodeManagerAddress"].startswith(ip + ":")
    assert airt.get(remote_ip.remote()) == ip


def test_as_completed_and_map_unordered_yield_every_result(cluster):
    @airt.remote(num_cpus=0)
    def slow_square(x):
        time.sleep(x / 10)
        return x * x

    refs = [slow_square.remote(x) for x in (5, 1, 3)]
    assert sorted(as_completed(refs, chunk_size=1)) == [1, 9, 25]
    assert set(as_completed(refs, yield_obj_refs=True)) == set(refs)
    got = list(map_unordered(slow_square, range(6), backpressure_size=2, chunk_size=1))
    assert sorted(got) == [x * x for x in range(6)]
    with pytest.raises(ValueError):
        list(as_completed(refs, chunk_size=0))
    with pytest.raises(ValueError):
        list(map_unordered(slow_square, [1], backpressure_size=0))
    with pytest.raises(ValueError, match="chunk_size"):
        list(as_completed(refs, num_returns=2))
