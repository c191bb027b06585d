"""Collective communication among actors, as Ray's docs write it (ray.util.collective)."""
import numpy as np
import ray
from ray.util import collective as col

ray.init(num_cpus=4)


@ray.remote(num_cpus=1)
class Worker:
    def __init__(self):
        self.buffer = np.ones((10,), dtype=np.float32)

    def setup(self, world_size, rank):
        col.init_collective_group(world_size, rank, "gloo", "default")
        return True

    def compute(self):
        col.allreduce(self.buffer, "default")
        return self.buffer

    def gather(self):
        out = [np.zeros(2, dtype=np.float32) for _ in range(col.get_collective_group_size())]
        col.allgather(out, np.full(2, col.get_rank(), dtype=np.float32))
        return [o.tolist() for o in out]

    def destroy(self):
        col.destroy_collective_group()


# Imperative: each actor joins itself.
workers = [Worker.remote() for _ in range(2)]
ray.get([w.setup.remote(2, i) for i, w in enumerate(workers)])
results = ray.get([w.compute.remote() for w in workers])
assert all((r == 2).all() for r in results), results
assert ray.get([w.gather.remote() for w in workers]) == [
    [[0.0, 0.0], [1.0, 1.0]]] * 2
ray.get([w.destroy.remote() for w in workers])

# Declarative: the driver declares the group; the actors join on first use.
others = [Worker.remote() for _ in range(2)]
col.create_collective_group(others, world_size=2, ranks=[0, 1], backend="gloo")
results = ray.get([w.compute.remote() for w in others])
assert all((r == 2).all() for r in results), results
print("collective ok")
