"""get_runtime_context(): Ray's RuntimeContext in a driver, a task, an actor and an async actor."""

import asyncio
import json
import os
import subprocess
import sys
import warnings

import pytest

import airt


def test_driver_context_names_its_job_node_worker_and_head(cluster):
    context = airt.get_runtime_context()
    assert context.get_job_id() == airt._airt.job_id()
    local = [n for n in airt.nodes() if n["Local"]][0]
    assert context.get_node_id() == local["NodeID"]
    worker = context.get_worker_id()
    assert len(worker) == 56 and worker == context.get_worker_id()  # 28 bytes, hex
    assert context.get_task_id() is None and context.get_actor_id() is None
    assert context.get_actor_name() is None and context.get_task_name() is None
    assert context.namespace == f"anonymous-job-{context.get_job_id()}"  # no init(namespace=)
    host, port = context.gcs_address.rsplit(":", 1)
    assert host and int(port) > 0
    assert context.get_placement_group_id() is None
    assert context.get_accelerator_ids() == {"GPU": []}
    assert json.loads(context.get_runtime_env_string()) == {}
    with pytest.raises(AssertionError):
        context.get_assigned_resources()  # a driver holds no resources (Ray asserts too)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert context.job_id == context.get_job_id()
        assert context.node_id == context.get_node_id()
        assert context.task_id is None and context.actor_id is None
        assert context.current_placement_group_id is None
    assert len([w for w in caught if issubclass(w.category, DeprecationWarning)]) == 5
    assert set(context.get()) == {"job_id", "node_id", "namespace"}


def test_task_context_has_its_assigned_resources_name_and_ids(cluster):
    @airt.remote
    def default_task():
        c = airt.get_runtime_context()
        return (c.get_assigned_resources(), c.get_task_id(), c.get_worker_id(), c.get_task_name(),
                c.get_actor_id(), c.get_accelerator_ids(), c.get_job_id(), c.get_node_id(),
                sorted(c.get()))

    @airt.remote(num_cpus=0.5, memory=1 << 20)
    def shaped():
        return airt.get_runtime_context().get_assigned_resources()

    (resources, task, worker, name, actor, accelerators, job, node,
     keys) = airt.get(default_task.remote())
    driver = airt.get_runtime_context()
    assert resources == {"CPU": 1.0}
    assert task and worker != driver.get_worker_id()
    assert name == "default_task" and actor is None
    assert accelerators == {"GPU": []}
    assert job == driver.get_job_id() and node == driver.get_node_id()
    assert keys == ["job_id", "namespace", "node_id", "task_id"]
    assert airt.get(default_task.options(name="renamed").remote())[3] == "renamed"
    assert airt.get(shaped.remote()) == {"CPU": 0.5, "memory": 1 << 20}


def test_actor_context_has_the_actors_resources_name_and_restart_state(cluster):
    @airt.remote
    class Plain:
        def __init__(self):
            self.at_init = airt.get_runtime_context().get_actor_id()

        def context(self):
            c = airt.get_runtime_context()
            return (c.get_actor_id(), self.at_init, c.get_actor_name(),
                    c.get_assigned_resources(), c.was_current_actor_reconstructed,
                    c.current_actor == airt.get_actor("ctx-named") if c.get_actor_name() else None)

    @airt.remote(num_cpus=1)
    class Async:
        async def context(self):
            await asyncio.sleep(0)
            c = airt.get_runtime_context()
            return c.get_actor_id(), c.get_actor_name(), c.get_assigned_resources()

    plain = Plain.remote()
    actor_id, at_init, name, resources, restarted, _ = airt.get(plain.context.remote())
    assert actor_id == at_init == plain._actor_id.hex()
    assert name == "" and resources == {} and restarted is False  # Ray's defaults for actors
    named = Plain.options(name="ctx-named", num_cpus=0.5).remote()
    _, _, name, resources, _, is_itself = airt.get(named.context.remote())
    assert (name, resources, is_itself) == ("ctx-named", {"CPU": 0.5}, True)
    other = Async.remote()
    assert airt.get(other.context.remote()) == (other._actor_id.hex(), "", {"CPU": 1.0})
    airt.kill(named)
    airt.kill(other)


_GPU_DRIVER = """
import os, airt
airt.init(num_cpus=1, num_gpus=2)  # a node told it has 2 GPUs (no device needed)

@airt.remote(num_gpus=1)
def gpu_ids():
    context = airt.get_runtime_context()
    return (context.get_accelerator_ids(), os.environ.get("CUDA_VISIBLE_DEVICES"),
            context.get_assigned_resources())

@airt.remote(num_gpus=0)
def no_gpu():
    return airt.get_runtime_context().get_accelerator_ids()

ids, visible, resources = airt.get(gpu_ids.remote(), timeout=120)
assert visible and ids == {"GPU": visible.split(",")} and len(ids["GPU"]) == 1, (ids, visible)
assert resources == {"CPU": 1.0, "GPU": 1.0}, resources
assert airt.get(no_gpu.remote(), timeout=120) == {"GPU": []}
airt.shutdown()
print("ok")
"""


def test_accelerator_ids_come_from_the_workers_visible_devices():
    # A driver of its own: its local cluster's node has GPUs, the session cluster's none.
    env = dict(os.environ)
    env.pop("AIRT_ADDRESS", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    result = subprocess.run([sys.executable, "-c", _GPU_DRIVER], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0 and "ok" in result.stdout, result.stdout + result.stderr


def test_runtime_env_string_is_the_calls_environment(cluster):
    @airt.remote(runtime_env={"env_vars": {"CTX_VAR": "on"}})
    def env_string():
        return airt.get_runtime_context().get_runtime_env_string()

    assert json.loads(airt.get(env_string.remote())) == {"env_vars": {"CTX_VAR": "on"}}
