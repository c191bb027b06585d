"""Tasks, objects, wait and num_returns, as Ray's docs write them."""
import numpy as np
import ray

ray.init(num_cpus=2)


@ray.remote
def square(x):
    return x * x


@ray.remote(num_returns=2)
def split(x):
    return x, -x


@ray.remote
def total(values):
    return sum(values)


futures = [square.remote(i) for i in range(4)]
assert ray.get(futures) == [0, 1, 4, 9]

a, b = split.remote(3)
assert ray.get([a, b]) == [3, -3]

ref = ray.put(np.arange(10))
assert ray.get(ref).sum() == 45
assert ray.get(total.remote(ray.get(futures))) == 14
assert ray.get(square.remote(ray.put(5))) == 25

ready, not_ready = ray.wait(futures, num_returns=2, timeout=30)
assert len(ready) == 2 and len(not_ready) == 2

resources = ray.cluster_resources()
assert resources["CPU"] == 2
assert len(ray.nodes()) == 1
ray.shutdown()
print("tasks_and_objects: ok")
