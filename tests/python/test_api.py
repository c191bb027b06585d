"""Ray's Python API points on a local cluster: options, num_returns, retries, runtime context,
runtime_env, async actors, zero-copy gets and worker deaths."""

import asyncio
import os
import threading
import time

import numpy as np
import pytest

import airt
from airt.exceptions import (ActorDiedError, GetTimeoutError, InfeasibleError, RayTaskError,
                             WorkerCrashedError)
from airt.util.scheduling_strategies import NodeAffinitySchedulingStrategy


def test_num_returns_on_tasks_and_methods(cluster):
    @airt.remote(num_returns=2)
    def pair(x):
        return x, x * 2

    @airt.remote(num_returns=0)
    def nothing():
        pass

    @airt.remote
    class Splitter:
        @airt.method(num_returns=3)
        def three(self):
            return "a", "b", "c"

        def two(self):
            return 1, 2

    a, b = pair.remote(21)
    assert airt.get([a, b]) == [21, 42]
    assert nothing.remote() is None
    assert airt.get(pair.options(num_returns=1).remote(1)) == (1, 2)
    splitter = Splitter.remote()
    assert airt.get(splitter.three.remote()) == ["a", "b", "c"]
    assert airt.get(splitter.two.options(num_returns=2).remote()) == [1, 2]
    bad = pair.options(num_returns=3).remote(1)
    with pytest.raises(RayTaskError, match="num_returns=3"):
        airt.get(bad)


def test_options_are_checked_as_ray_checks_them(cluster):
    @airt.remote
    def f():
        return 1

    with pytest.raises(ValueError, match="Invalid option keyword max_restarts"):
        f.options(max_restarts=1)
    with pytest.raises(ValueError, match="num_cpus"):
        f.options(resources={"CPU": 1})
    with pytest.raises(ValueError, match="whole"):
        f.options(num_gpus=1.5)
    with pytest.raises(ValueError, match="Invalid option keyword"):
        airt.remote(bogus=1)(f._function)
    # memory and name are resources and labels of the request; a fitting one runs.
    assert airt.get(f.options(memory=1 << 20, name="named-f").remote()) == 1


def test_requests_no_node_fits_fail_naming_them(cluster):
    @airt.remote
    def f():
        return 1

    refs = [f.options(accelerator_type="H100").remote(), f.options(memory=1 << 45).remote()]
    for ref, named in zip(refs, ["H100", "memory"]):
        with pytest.raises(InfeasibleError, match=named):
            airt.get(ref, timeout=60)


def test_num_cpus_zero_tasks_hold_no_cpu(cluster):
    @airt.remote(num_cpus=0)
    def free():
        return "ran"

    @airt.remote(num_cpus=2)
    def hog(seconds):
        time.sleep(seconds)
        return "hog"

    held = hog.remote(3)
    time.sleep(0.5)  # the hog holds both CPUs now; a CPU-less task still runs
    assert airt.get(free.remote(), timeout=30) == "ran"
    assert airt.get(held) == "hog"


def test_retry_exceptions_runs_the_task_again(cluster, tmp_path):
    counter = str(tmp_path / "attempts")

    @airt.remote(max_retries=3, retry_exceptions=True)
    def flaky(path):
        with open(path, "a") as f:
            f.write("x")
        if len(open(path).read()) < 3:
            raise IOError("not yet")
        return "third time"

    assert airt.get(flaky.remote(counter)) == "third time"
    assert len(open(counter).read()) == 3

    other = str(tmp_path / "other")

    @airt.remote(max_retries=3, retry_exceptions=[ValueError])
    def wrong_kind(path):
        with open(path, "a") as f:
            f.write("x")
        raise KeyError("not retried")

    with pytest.raises(KeyError):
        airt.get(wrong_kind.remote(other))
    assert len(open(other).read()) == 1


def test_a_worker_that_dies_is_retried_then_reported(cluster, tmp_path):
    marker = str(tmp_path / "died-once")

    @airt.remote(max_retries=2)
    def dies_once(path):
        if not os.path.exists(path):
            open(path, "w").close()
            os._exit(1)
        return "survived"

    @airt.remote(max_retries=0)
    def always_dies():
        os._exit(1)

    assert airt.get(dies_once.remote(marker), timeout=60) == "survived"
    with pytest.raises(WorkerCrashedError):
        airt.get(always_dies.remote(), timeout=60)


def test_an_actor_whose_process_dies_without_restarts_is_dead(cluster):
    @airt.remote
    class Fragile:
        def die(self):
            os._exit(1)

        def ping(self):
            return "pong"

    actor = Fragile.remote()
    assert airt.get(actor.ping.remote()) == "pong"
    with pytest.raises(ActorDiedError):
        airt.get(actor.die.remote(), timeout=60)
    with pytest.raises(ActorDiedError):
        airt.get(actor.ping.remote(), timeout=60)


def test_max_task_retries_resends_calls_to_the_restarted_actor(cluster, tmp_path):
    @airt.remote(max_restarts=1, max_task_retries=1)
    class Survivor:
        def __init__(self, marker):
            self.marker = marker
            self.calls = 0

        def work(self, value):
            self.calls += 1
            if not os.path.exists(self.marker):
                open(self.marker, "w").close()
                os._exit(1)  # the first attempt kills the process
            return value, self.calls

    survivor = Survivor.remote(str(tmp_path / "died"))
    assert airt.get(survivor.work.remote(7), timeout=60) == (7, 1)
    assert airt.get(survivor.work.remote(8), timeout=60) == (8, 2)
    with pytest.raises(ValueError, match="named"):
        Survivor.options(lifetime="detached").remote("x")


def test_runtime_context_names_the_task_and_the_actor(cluster):
    @airt.remote
    def ids():
        context = airt.get_runtime_context()
        return context.get_task_id(), context.get_actor_id(), context.get_job_id()

    @airt.remote
    class Who:
        def me(self):
            return airt.get_runtime_context().get_actor_id()

        async def me_async(self):
            await asyncio.sleep(0)
            return airt.get_runtime_context().get_actor_id()

        def me_from_a_thread(self):  # a thread the actor started (a Tune trial's, say)
            out = []
            thread = threading.Thread(
                target=lambda: out.append(airt.get_runtime_context().get_actor_id()))
            thread.start()
            thread.join()
            return out[0]

    driver = airt.get_runtime_context()
    assert driver.get_task_id() is None and driver.get_actor_id() is None
    (task1, actor1, job1), (task2, _, _) = airt.get([ids.remote(), ids.remote()])
    assert task1 and task2 and task1 != task2
    assert actor1 is None
    assert job1 == driver.get_job_id()
    who = Who.remote()
    assert airt.get(who.me.remote()) == who._actor_id.hex()
    assert airt.get(who.me_async.remote()) == who._actor_id.hex()
    assert airt.get(who.me_from_a_thread.remote()) == who._actor_id.hex()


def test_node_affinity_pins_work_to_a_node(cluster):
    @airt.remote
    def where():
        return airt.get_runtime_context().get_node_id()

    node = airt.get_runtime_context().get_node_id()
    hard = NodeAffinitySchedulingStrategy(node, soft=False)
    assert airt.get(where.options(scheduling_strategy=hard).remote()) == node
    gone = NodeAffinitySchedulingStrategy("ab" * 28, soft=True)  # no such node: soft runs anyway
    assert airt.get(where.options(scheduling_strategy=gone).remote()) == node
    assert airt.get(where.options(scheduling_strategy="SPREAD").remote()) == node
    with pytest.raises(ValueError, match="scheduling_strategy"):
        where.options(scheduling_strategy="NOPE").remote()


def test_env_vars_apply_to_the_call_only(cluster):
    @airt.remote
    def read(name):
        return os.environ.get(name)

    with_env = read.options(runtime_env={"env_vars": {"AIRT_TEST_VAR": "set"}})
    assert airt.get(with_env.remote("AIRT_TEST_VAR")) == "set"
    assert airt.get(read.remote("AIRT_TEST_VAR")) is None  # the worker's own env is back
    with pytest.raises(TypeError, match="env_vars"):
        read.options(runtime_env={"env_vars": {"N": 1}}).remote("N")
    with pytest.raises(airt.exceptions.UnimplementedError, match="pip"):
        read.options(runtime_env={"pip": ["requests"]}).remote("N")


def test_working_dir_is_packed_and_unpacked_on_the_node(cluster, tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "helper_module_for_airt.py").write_text("def answer():\n    return 42\n")
    (folder / "data.txt").write_text("payload")

    @airt.remote(runtime_env={"working_dir": str(folder)})
    def use_it():
        import helper_module_for_airt
        return helper_module_for_airt.answer(), open("data.txt").read(), os.getcwd()

    @airt.remote(runtime_env={"working_dir": str(folder)})
    class InDir:
        def cwd(self):
            return os.getcwd(), open("data.txt").read()

    answer, data, cwd = airt.get(use_it.remote())
    assert (answer, data) == (42, "payload")
    assert os.path.realpath(cwd) != os.path.realpath(folder), "unpacked, not the driver's folder"
    assert "runtime_resources" in cwd
    actor_cwd, actor_data = airt.get(InDir.remote().cwd.remote())
    assert actor_data == "payload" and actor_cwd == cwd
    with pytest.raises(ValueError, match="not a directory"):
        use_it.options(runtime_env={"working_dir": str(tmp_path / "missing")}).remote()


@airt.remote
def double(x):
    return 2 * x


def test_async_actor_methods_interleave(cluster):
    @airt.remote
    class Gate:
        def __init__(self):
            self.event = asyncio.Event()
            self.waiting = 0

        async def wait(self):
            self.waiting += 1
            await self.event.wait()
            return "through"

        async def open(self):
            self.event.set()
            return self.waiting

        async def fetch(self):
            # ObjectRefs are awaitable: a put's, and a task's this actor submits.
            return await airt.put(1) + await double.remote(1)

    gate = Gate.remote()
    waiters = [gate.wait.remote() for _ in range(3)]
    time.sleep(0.5)
    # One at a time, the first wait() would never end and open() would never run.
    assert airt.get(gate.open.remote(), timeout=30) == 3
    assert airt.get(waiters, timeout=30) == ["through"] * 3
    assert airt.get(gate.fetch.remote(), timeout=60) == 3


def _mapping_of(address):
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, *rest = line.split()
            low, high = (int(x, 16) for x in span.split("-"))
            if low <= address < high:
                return " ".join(rest[4:])
    return None


def test_get_of_a_large_array_reads_it_in_place(cluster):
    array = np.arange(64 << 20, dtype=np.uint8)  # 64 MiB
    ref = airt.put(array)
    got = airt.get(ref)
    assert np.array_equal(got, array)
    assert not got.flags.writeable, "a view of the store is read-only, as Ray's"
    assert "airt-object-store" in _mapping_of(got.ctypes.data), "the bytes were copied"
    again = airt.get(ref)
    assert again.ctypes.data == got.ctypes.data

    @airt.remote
    def make():
        return np.ones(8 << 20, dtype=np.float32)

    returned = airt.get(make.remote())
    assert returned.sum() == 8 << 20


def test_wait_accepts_fetch_local_and_get_times_out(cluster):
    @airt.remote
    def slow():
        time.sleep(3)

    ref = slow.remote()
    ready, not_ready = airt.wait([ref], timeout=0.1, fetch_local=False)
    assert (ready, not_ready) == ([], [ref])
    with pytest.raises(GetTimeoutError):
        airt.get(ref, timeout=0.2)


def test_object_refs_inside_values_travel_as_references(cluster):
    @airt.remote
    def total(refs):
        return sum(airt.get(refs))

    @airt.remote
    def fan_out(n):
        return [double.remote(i) for i in range(n)]

    @airt.remote
    def forward(holder):
        return double.remote(airt.get(holder["ref"]))

    @airt.remote
    def fails():
        raise ValueError("inner")

    refs = [airt.put(i) for i in range(5)]
    assert airt.get(total.remote(refs)) == 10
    children = airt.get(fan_out.remote(3))
    assert airt.get(children) == [0, 2, 4]
    ready, _ = airt.wait(children, num_returns=3, timeout=10)
    assert len(ready) == 3
    assert airt.get(airt.get(forward.remote({"ref": airt.put(21)}))) == 42
    boxed = airt.get(airt.put({"inner": refs[1]}))
    assert airt.get(boxed["inner"]) == 1
    # A ref to a failed task carries its error.
    with pytest.raises(RayTaskError, match="inner"):
        airt.get(airt.get(airt.put([fails.remote()]))[0])


def test_the_layers_load_on_first_use_as_rays_do():
    import subprocess
    import sys
    # A process of its own: nothing imported the layers before.
    code = ("import sys, airt\n"
            "assert 'airt.data' not in sys.modules\n"
            "assert callable(airt.data.range)\n"
            "assert airt.tune.Tuner and airt.train.ScalingConfig and airt.autoscaler\n"
            "try:\n    airt.no_such_layer\nexcept AttributeError as e:\n"
            "    assert 'no_such_layer' in str(e)\nelse:\n    raise SystemExit('no error')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
