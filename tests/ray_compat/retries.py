"""Retries as Ray's docs write them: max_retries=-1 retries a task whose worker dies for as long
as it dies; max_restarts and max_task_retries bring an actor back; ray.kill(no_restart=False)
restarts it."""
import os
import tempfile
import time

import ray

ray.init(num_cpus=2)
folder = tempfile.mkdtemp()


def deaths(path):
    return len(open(path).read()) if os.path.exists(path) else 0


@ray.remote(max_retries=-1)
def flaky(path, times):
    if deaths(path) < times:
        with open(path, "a") as f:
            f.write("x")
        os._exit(1)  # the worker process dies
    return "done"


counter = os.path.join(folder, "task")
assert ray.get(flaky.remote(counter, 5)) == "done"  # more deaths than the default 3 retries
assert deaths(counter) == 5


@ray.remote(max_retries=2, retry_exceptions=True)
def raises(path):
    with open(path, "a") as f:
        f.write("x")
    if deaths(path) < 3:
        raise ValueError("not yet")
    return "third time"


assert ray.get(raises.remote(os.path.join(folder, "raises"))) == "third time"


@ray.remote(max_restarts=-1, max_task_retries=-1)
class Phoenix:
    def __init__(self):
        self.calls = 0

    def work(self, path, times):
        self.calls += 1
        if deaths(path) < times:
            with open(path, "a") as f:
                f.write("x")
            os._exit(1)
        return self.calls, ray.get_runtime_context().was_current_actor_reconstructed


phoenix = Phoenix.remote()
assert ray.get(phoenix.work.remote(os.path.join(folder, "actor"), 4)) == (1, True)


@ray.remote(max_restarts=1, max_task_retries=-1)
class Counter:
    def __init__(self):
        self.n = 0

    def add(self):
        self.n += 1
        return self.n, ray.get_runtime_context().was_current_actor_reconstructed


c = Counter.remote()
assert ray.get([c.add.remote(), c.add.remote()]) == [(1, False), (2, False)]
ray.kill(c, no_restart=False)
# ray.kill does not wait: a call may still reach the old process before it goes.
deadline = time.time() + 120
while True:
    n, restarted = ray.get(c.add.remote())
    if restarted:
        break
    assert time.time() < deadline, "the killed actor was not restarted"
assert n == 1  # the restarted actor starts afresh
ray.kill(c)
try:
    ray.get(c.add.remote())
    raise AssertionError("a killed actor answered")
except ray.exceptions.RayActorError:
    pass
ray.shutdown()
print("retries: ok")
