"""The airt package against a real local cluster (airt.init() with no address): put, get and
wait of Python values, reference counting, C++ functions called from Python, and errors with
Ray's names."""

import gc
import os

import numpy as np
import pytest

import airt
from airt import exceptions


def test_init_twice_is_refused_unless_asked(cluster):
    assert airt.is_initialized()
    with pytest.raises(RuntimeError):
        airt.init()
    airt.init(ignore_reinit_error=True)


def test_put_and_get_round_trip_python_values(cluster):
    values = [1, "text", {"a": [1, 2.5, None]}, b"\x00\x01", (1, 2), list(range(1000))]
    refs = [airt.put(v) for v in values]
    assert airt.get(refs) == values
    assert airt.get(refs[2]) == {"a": [1, 2.5, None]}


def test_a_large_numpy_array_goes_through_the_store(cluster):
    array = np.arange(8 << 20, dtype=np.uint8)  # 8 MiB: over the inline limit
    ref = airt.put(array)
    back = airt.get(ref)
    assert back.dtype == np.uint8 and back.shape == array.shape
    assert np.array_equal(back, array)


def test_cpp_functions_run_with_values_and_refs(cluster):
    add = airt.cpp_function("Add")
    five = add.remote(2, 3)
    assert airt.get(five) == 5
    assert airt.get(add.remote(five, 10)) == 15  # a ref's value, resolved before the call
    greet = airt.cross_language.cpp_function("Greet")
    assert airt.get(greet.remote("python")) == "hello python"
    assert airt.get(airt.cpp_function("Bytes").remote(4, 1)) == bytes([1, 8, 15, 22])


def test_a_cpp_exception_is_a_ray_task_error(cluster):
    with pytest.raises(exceptions.RayTaskError) as caught:
        airt.get(airt.cpp_function("Fail").remote(7))
    assert "failed on purpose with 7" in str(caught.value)
    assert isinstance(caught.value, exceptions.RayError)


def test_an_unknown_function_is_named(cluster):
    with pytest.raises(exceptions.FunctionNotFoundError) as caught:
        airt.get(airt.cpp_function("NoSuchFunction").remote(), timeout=30)
    assert "NoSuchFunction" in str(caught.value)


def test_an_infeasible_request_fails_naming_the_shape(cluster):
    with pytest.raises(exceptions.InfeasibleError) as caught:
        airt.get(airt.cpp_function("Add").options(num_gpus=8).remote(1, 2), timeout=60)
    assert "GPU: 8" in str(caught.value)


def test_get_times_out_with_get_timeout_error(cluster):
    slow = airt.cpp_function("SleepMs").remote(3000)
    with pytest.raises(exceptions.GetTimeoutError):
        airt.get(slow, timeout=0.1)
    assert airt.get(slow) == 3000  # still there, and answered in the end


def test_wait_splits_ready_and_not_ready(cluster):
    fast = airt.put(1)
    slow = airt.cpp_function("SleepMs").remote(2000)
    ready, not_ready = airt.wait([fast, slow], num_returns=1, timeout=1)
    assert ready == [fast] and not_ready == [slow]
    ready, not_ready = airt.wait([fast, slow], num_returns=2)
    assert len(ready) == 2 and not not_ready


def test_objects_leave_the_store_with_their_last_ref(cluster):
    # 200 puts of 1 MiB each, each dropped at once: a store of the default size never fills.
    for i in range(200):
        ref = airt.put(np.full(1 << 20, i % 256, dtype=np.uint8))
        del ref
    gc.collect()
    assert airt.get(airt.put("still fine")) == "still fine"


def test_bad_strategies_and_selectors_are_value_errors(cluster):
    from airt.util.placement_group import placement_group
    from airt.util.scheduling_strategies import NodeAffinitySchedulingStrategy, NodeLabelSchedulingStrategy

    @airt.remote
    def f():
        return 1

    with pytest.raises(ValueError, match="one dict per bundle"):
        placement_group([{"CPU": 1}], bundle_label_selector=[{}, {}])
    with pytest.raises(ValueError, match="in"):
        placement_group([{"CPU": 1}], bundle_label_selector=[{"zone": "in(a"}])
    with pytest.raises(ValueError, match="label_selector"):
        f.options(label_selector={"zone": "in(a,)"}).remote()
    with pytest.raises(ValueError, match="label_selector"):
        f.options(label_selector=["zone"]).remote()
    with pytest.raises(ValueError, match="not a node's hex id"):
        f.options(scheduling_strategy=NodeAffinitySchedulingStrategy("zz", soft=False)).remote()
    with pytest.raises(ValueError, match="cannot both be empty"):
        NodeLabelSchedulingStrategy({})
    with pytest.raises(ValueError, match="scheduling_strategy"):
        f.options(scheduling_strategy="NEAREST").remote()


def test_a_placement_group_strategy_needs_a_placement_group(cluster):
    from airt.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    with pytest.raises(TypeError, match="must be a PlacementGroup"):
        PlacementGroupSchedulingStrategy(None)


def test_python_functions_run_on_python_workers(cluster):
    @airt.remote
    def square(x, offset=0):
        return x * x + offset

    assert airt.get(square.remote(7)) == 49
    assert airt.get(square.remote(3, offset=1)) == 10
    assert airt.get([square.remote(i) for i in range(20)]) == [i * i for i in range(20)]
    four = airt.put(4)
    assert airt.get(square.remote(four)) == 16  # a ref's value, resolved before the call
    assert airt.get(square.options(num_cpus=0.5).remote(square.remote(2))) == 16


def test_a_python_exception_carries_the_remote_traceback(cluster):
    @airt.remote(max_retries=0)
    def broken():
        raise ValueError("no such thing")

    with pytest.raises(exceptions.RayTaskError) as caught:
        airt.get(broken.remote())
    assert "ValueError: no such thing" in str(caught.value)
    assert "Traceback" in str(caught.value)
    assert "airt-pickled-cause" not in str(caught.value)
    # Also an instance of the user's exception type, as Ray's RayTaskError is.
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value.cause, ValueError)
    with pytest.raises(ValueError):
        airt.get(broken.remote())


def test_python_workers_see_their_pid_and_numpy(cluster):
    @airt.remote
    def where():
        import numpy
        return os.getpid(), numpy.arange(3).sum()

    pid, total = airt.get(where.remote())
    assert pid != os.getpid() and total == 3


def test_the_installed_package_imports_with_no_paths_set(tmp_path):
    # scripts/setup ran `pip install .` into this environment.
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", "import airt, airt.util.scheduling_strategies; "
                          "print(airt.__file__)"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "site-packages" in out.stdout


@airt.remote
class Counter:
    def __init__(self, start):
        self.value = start
        self.seen = []

    def add(self, k):
        self.value += k
        return self.value

    def append(self, k):
        self.seen.append(k)
        return list(self.seen)

    def pid(self):
        return os.getpid()

    def fail(self):
        raise RuntimeError("no thanks")


def test_actor_methods_run_in_order_on_one_instance(cluster):
    counter = Counter.remote(10)
    calls = [counter.append.remote(i) for i in range(100)]
    assert airt.get(calls[-1]) == list(range(100))
    assert airt.get(counter.add.remote(5)) == 15
    assert airt.get(counter.add.remote(airt.put(5))) == 20


def test_a_method_error_is_a_task_error_and_the_actor_lives_on(cluster):
    counter = Counter.remote(1)
    with pytest.raises(exceptions.RayTaskError, match="no thanks"):
        airt.get(counter.fail.remote())
    assert airt.get(counter.add.remote(1)) == 2


def test_named_actors_are_found_and_killed_actors_fail(cluster):
    named = Counter.options(name="the-counter").remote(7)
    assert airt.get(named.add.remote(0)) == 7
    again = airt.get_actor("the-counter")
    assert airt.get(again.add.remote(1)) == 8
    with pytest.raises(ValueError):
        airt.get_actor("no-such-actor")
    airt.kill(again)
    with pytest.raises(exceptions.ActorDiedError):
        airt.get(named.add.remote(1), timeout=30)


def test_a_killed_process_restarts_the_actor(cluster):
    import signal
    counter = Counter.options(max_restarts=1).remote(3)
    pid = airt.get(counter.pid.remote())
    os.kill(pid, signal.SIGKILL)
    value = None
    for _ in range(200):
        try:
            value = airt.get(counter.add.remote(0), timeout=20)
            break
        except exceptions.RayActorError:
            continue  # the call in flight when it died (unavailable while it restarts)
    assert value == 3  # the constructor ran again
    assert airt.get(counter.pid.remote()) != pid


def test_get_gpu_ids_reads_the_workers_devices(cluster):
    @airt.remote
    def gpus():
        return airt.get_gpu_ids()

    assert airt.get(gpus.remote()) == []


def test_actor_handles_travel_into_tasks(cluster):
    counter = Counter.remote(100)

    @airt.remote
    def add_through(handle, k):
        return airt.get(handle.add.remote(k))

    assert airt.get(add_through.remote(counter, 5)) == 105
    assert airt.get(counter.add.remote(0)) == 105


def test_cpp_actors_are_called_from_python(cluster):
    counter = airt.cross_language.cpp_actor_class("Counter::Create", "Counter").remote(10)
    assert airt.get(counter.Add.remote(5)) == 15
    assert airt.get(counter.method("Counter::Value").remote()) == 15


def test_cluster_resources_nodes_and_runtime_context(cluster):
    nodes = airt.nodes()
    assert len(nodes) == 1 and nodes[0]["Alive"] and nodes[0]["Local"]
    assert airt.cluster_resources()["CPU"] == 2.0
    assert 0.0 <= airt.available_resources().get("CPU", 0.0) <= 2.0
    context = airt.get_runtime_context()
    assert context.get_node_id() == nodes[0]["NodeID"]
    assert len(context.get_job_id()) == 8


def test_object_refs_are_awaitable(cluster):
    import asyncio

    @airt.remote
    def double(x):
        return 2 * x

    async def main():
        return await double.remote(21)

    assert asyncio.run(main()) == 42


def test_what_a_task_prints_reaches_the_driver_with_its_pid(cluster, capfd):
    import time

    @airt.remote
    def speak(word):
        print("the worker says", word)
        return os.getpid()

    pid = airt.get(speak.remote("hello"))
    seen = ""
    for _ in range(50):
        time.sleep(0.1)
        seen += capfd.readouterr().out
        if "the worker says hello" in seen:
            break
    assert f"(pid={pid}, node=" in seen and "the worker says hello" in seen
