"""Actors: state, named actors, async actors and kill, as Ray's docs write them."""
import asyncio

import ray

ray.init(num_cpus=2)


@ray.remote
class Counter:
    def __init__(self):
        self.value = 0

    def increment(self):
        self.value += 1
        return self.value


counter = Counter.remote()
refs = [counter.increment.remote() for _ in range(5)]
assert ray.get(refs) == [1, 2, 3, 4, 5]

named = Counter.options(name="global_counter").remote()
assert ray.get(ray.get_actor("global_counter").increment.remote()) == 1


@ray.remote
class AsyncActor:
    async def run(self, i):
        await asyncio.sleep(0.01)
        return i


async_actor = AsyncActor.remote()
assert ray.get([async_actor.run.remote(i) for i in range(10)]) == list(range(10))

ray.kill(counter)
try:
    ray.get(counter.increment.remote())
    raise AssertionError("a killed actor answered")
except ray.exceptions.RayActorError:
    pass
ray.shutdown()
print("actors: ok")
