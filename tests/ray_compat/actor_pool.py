"""ray.util.ActorPool, as Ray's docs write it."""
import ray
from ray.util import ActorPool

ray.init(num_cpus=2)


@ray.remote
class Actor:
    def double(self, n):
        return n * 2


a1, a2 = Actor.remote(), Actor.remote()
pool = ActorPool([a1, a2])

# map keeps the order of the values.
assert list(pool.map(lambda a, v: a.double.remote(v), [1, 2, 3, 4])) == [2, 4, 6, 8]
# map_unordered yields them as they finish.
assert sorted(pool.map_unordered(lambda a, v: a.double.remote(v), [1, 2, 3, 4])) == [2, 4, 6, 8]

pool.submit(lambda a, v: a.double.remote(v), 1)
pool.submit(lambda a, v: a.double.remote(v), 2)
assert pool.has_next()
assert pool.get_next() == 2
assert pool.get_next() == 4
assert not pool.has_next()

pool.submit(lambda a, v: a.double.remote(v), 3)
assert pool.get_next_unordered() == 6

assert pool.has_free()
idle = pool.pop_idle()
assert idle is not None
pool.push(idle)
try:
    pool.push(idle)
    raise AssertionError("an actor was pushed twice")
except ValueError:
    pass
ray.shutdown()
print("actor_pool: ok")
