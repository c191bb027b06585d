"""A job's namespace (init(namespace=...)) reaches its tasks and actors: their runtime context
names it, and get_actor without a namespace finds the driver's named actors there (Ray's
behaviour; before, workers used an anonymous namespace of their own)."""

import subprocess
import sys
import textwrap

from conftest import Cluster

DRIVER = textwrap.dedent("""
    import airt

    airt.init(num_cpus=2, namespace="team")

    @airt.remote
    class Counter:
        def value(self):
            return 7

    @airt.remote
    def namespace_here():
        return airt.get_runtime_context().namespace

    @airt.remote
    def value_of_named(name):
        return airt.get(airt.get_actor(name).value.remote())

    @airt.remote
    class Inside:
        def namespace(self):
            return airt.get_runtime_context().namespace

    counter = Counter.options(name="counter").remote()
    print("driver", airt.get_runtime_context().namespace)
    print("task", airt.get(namespace_here.remote()))
    print("actor", airt.get(Inside.remote().namespace.remote()))
    print("lookup", airt.get(value_of_named.remote("counter")))
    airt.shutdown()
""")


def test_tasks_and_actors_run_in_their_drivers_namespace(tmp_path):
    env = Cluster(str(tmp_path)).env()
    env.pop("AIRT_ADDRESS", None)  # the driver starts a local cluster of its own
    env["AIRT_TEMP_DIR"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-c", DRIVER], env=env, capture_output=True,
                            text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == ["driver", "team", "task", "team", "actor", "team",
                                     "lookup", "7"], result.stdout
