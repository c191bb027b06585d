"""ray.util.queue.Queue, as Ray's docs write it: producers and consumers over one queue."""
import ray
from ray.util.queue import Empty, Full, Queue

ray.init(num_cpus=2)

queue = Queue(maxsize=100)


@ray.remote
def consumer(id, queue):
    got = []
    while True:
        try:
            got.append(queue.get(timeout=5))
        except Empty:
            return got


[queue.put(i) for i in range(10)]
consumers = [consumer.remote(i, queue) for i in range(2)]
results = ray.get(consumers)
assert sorted(results[0] + results[1]) == list(range(10))
assert queue.empty() and queue.size() == 0

small = Queue(maxsize=2)
small.put_nowait_batch([1, 2])
assert small.full() and small.qsize() == 2
try:
    small.put_nowait(3)
    raise AssertionError("a full queue took an item")
except Full:
    pass
try:
    small.put(3, timeout=0.1)
    raise AssertionError("a full queue took an item")
except Full:
    pass
assert small.get_nowait_batch(2) == [1, 2]
try:
    small.get_nowait()
    raise AssertionError("an empty queue gave an item")
except Empty:
    pass
small.shutdown()
queue.shutdown()
ray.shutdown()
print("queue_usage: ok")
