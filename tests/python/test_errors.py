"""The error map from Python: every kind of the schema's ErrorKind raises its documented type
(docs/python.md, "Errors"), a task's exception travels in the error's data field and is caught by
its own type, and real failures (a full store, a missing function, a dead worker, a broken
runtime_env) reach the driver as their types."""

import os
import pickle
import subprocess
import sys
import textwrap
import uuid

import cloudpickle
import pytest

import airt
from airt import _airt, exceptions

from conftest import Cluster

# docs/python.md's table: each schema kind and the type it raises.
DOCUMENTED = {
    "userException": exceptions.RayTaskError,
    "functionNotFound": exceptions.FunctionNotFoundError,
    "badArguments": exceptions.RayTaskError,
    "cancelled": exceptions.TaskCancelledError,
    "workerCrashed": exceptions.WorkerCrashedError,
    "infeasible": exceptions.InfeasibleError,
    "unavailable": exceptions.UnavailableError,
    "actorDied": exceptions.ActorDiedError,
    "actorUnavailable": exceptions.ActorUnavailableError,
    "objectLost": exceptions.ObjectLostError,
    "ownerDied": exceptions.OwnerDiedError,
    "objectReconstructionFailed": exceptions.ObjectReconstructionFailedError,
    "objectStoreFull": exceptions.ObjectStoreFullError,
    "outOfMemory": exceptions.OutOfMemoryError,
    "timeout": exceptions.GetTimeoutError,
    "runtimeEnvSetup": exceptions.RuntimeEnvSetupError,
    "invalidArgument": exceptions.InvalidArgumentError,
    "unimplemented": exceptions.UnimplementedError,
    "system": exceptions.RaySystemError,
    "objectReconstructionFailedMaxAttemptsExceeded":
        exceptions.ObjectReconstructionFailedMaxAttemptsExceededError,
    "objectReconstructionFailedLineageEvicted":
        exceptions.ObjectReconstructionFailedLineageEvictedError,
}


def test_every_kind_of_the_schema_raises_its_documented_type():
    kinds = _airt.error_kinds()
    assert set(kinds) == set(DOCUMENTED), "the schema and the documented table differ"
    assert sorted(kinds.values()) == list(range(len(kinds)))
    for name, number in kinds.items():
        error = exceptions.from_core(number, f"message of {name}")
        assert isinstance(error, DOCUMENTED[name]), name
        assert isinstance(error, exceptions.RayError) and isinstance(error, _airt.Error), name
        assert f"message of {name}" in str(error)
        assert exceptions.error_kind(error) == name
    # A kind this build does not know is airt's own error.
    assert type(exceptions.from_core(len(kinds) + 5, "?")) is exceptions.RaySystemError


def test_types_keep_rays_hierarchy():
    assert issubclass(exceptions.ActorDiedError, exceptions.RayActorError)
    assert issubclass(exceptions.ActorUnavailableError, exceptions.RayActorError)
    assert issubclass(exceptions.OwnerDiedError, exceptions.ObjectLostError)
    assert issubclass(exceptions.ObjectReconstructionFailedError, exceptions.ObjectLostError)
    for lineage in (exceptions.ObjectReconstructionFailedMaxAttemptsExceededError,
                    exceptions.ObjectReconstructionFailedLineageEvictedError):
        assert issubclass(lineage, exceptions.ObjectReconstructionFailedError)
    assert issubclass(exceptions.GetTimeoutError, TimeoutError)
    assert issubclass(exceptions.FunctionNotFoundError, exceptions.RayTaskError)
    assert issubclass(exceptions.InvalidArgumentError, ValueError)
    assert issubclass(exceptions.UnimplementedError, NotImplementedError)
    assert not issubclass(exceptions.ObjectStoreFullError, exceptions.ObjectLostError)


def test_the_data_field_round_trips_a_user_exception():
    class Mine(Exception):
        pass

    kinds = _airt.error_kinds()
    data = exceptions.encode_cause(Mine("kaputt", 7))
    error = exceptions.from_core(kinds["userException"], "f: Traceback ... Mine: kaputt", data)
    assert isinstance(error, exceptions.RayTaskError) and isinstance(error, Mine)
    assert error.cause.args == ("kaputt", 7)
    assert str(error) == "f: Traceback ... Mine: kaputt"
    # It pickles as its kind and data (an error inside a value), and comes back the same.
    again = pickle.loads(cloudpickle.dumps(error))
    assert isinstance(again, Mine) and isinstance(again, exceptions.RayTaskError)
    assert again.cause.args == ("kaputt", 7)
    # An upstream task's error travels as its cause: the caller raises the original type.
    assert pickle.loads(exceptions.encode_cause(error)).args == ("kaputt", 7)
    # A C++ task's data is its what(), not a pickle: a RayTaskError with no cause.
    cpp = exceptions.from_core(kinds["userException"], "Fail: failed", b"failed")
    assert type(cpp) is exceptions.RayTaskError and cpp.cause is None
    # Bad arguments are a TypeError too, as Ray's are.
    bad = exceptions.from_core(kinds["badArguments"], "bad arguments for 'add'")
    assert isinstance(bad, TypeError) and isinstance(bad, exceptions.RayTaskError)


def test_a_user_exception_is_caught_by_its_own_type(cluster):
    class QuotaExceeded(Exception):
        def __init__(self, user, limit):
            super().__init__(user, limit)
            self.user = user

    @airt.remote(max_retries=0)
    def charge(user):
        raise QuotaExceeded(user, 10)

    @airt.remote(max_retries=0)
    def after(value):
        return value

    with pytest.raises(QuotaExceeded) as caught:
        airt.get(charge.remote("ada"))
    assert isinstance(caught.value, exceptions.RayTaskError)
    assert caught.value.user == "ada"
    assert "QuotaExceeded" in str(caught.value) and "Traceback" in str(caught.value)
    # Through a task that takes the failed ref as its argument, too.
    with pytest.raises(QuotaExceeded):
        airt.get(after.remote(charge.remote("bob")))


def test_an_unregistered_function_raises_function_not_found_naming_it(cluster):
    with pytest.raises(exceptions.FunctionNotFoundError) as caught:
        airt.get(airt.cpp_function("NoFunctionOfThisName").remote(), timeout=30)
    assert "'NoFunctionOfThisName'" in str(caught.value)
    assert "code search path" in str(caught.value)


def test_a_worker_death_raises_worker_crashed_naming_the_task(cluster):
    @airt.remote(max_retries=0)
    def dies_at_once():
        os._exit(1)

    ref = dies_at_once.remote()
    with pytest.raises(exceptions.WorkerCrashedError) as caught:
        airt.get(ref, timeout=60)
    task_id = ref.hex()[:48]  # an object id starts with its task's id
    assert f"task {task_id}" in str(caught.value)
    assert "dies_at_once" in str(caught.value)


def test_a_broken_runtime_env_raises_runtime_env_setup_error(cluster, tmp_path):
    from airt import runtime_env
    (tmp_path / "marker.txt").write_text(uuid.uuid4().hex)  # a package of its own
    env = {"working_dir": str(tmp_path)}
    key = runtime_env.key_for(env)
    sha = runtime_env.fetch(key)["working_dir"][len(runtime_env.URI_PREFIX):]
    _airt.kv_put(runtime_env.KV_NAMESPACE, f"pkg:{sha}:0", b"not the package", True)

    @airt.remote(max_retries=0)
    def runs_there():
        return os.getcwd()

    with pytest.raises(exceptions.RuntimeEnvSetupError) as caught:
        airt.get(runs_there.options(runtime_env=env).remote(), timeout=60)
    assert sha in str(caught.value)


STORE_FULL_DRIVER = textwrap.dedent("""
    import numpy as np
    import airt
    from airt import exceptions

    airt.init(num_cpus=1, object_store_memory=16 << 20)
    kept = airt.put(np.arange(4 << 20, dtype=np.uint8))
    try:
        airt.put(np.zeros(20 << 20, dtype=np.uint8))
        print("no error")
    except exceptions.ObjectStoreFullError as error:
        assert "capacity" in str(error), str(error)
        print("put: ObjectStoreFullError")
    back = airt.get(kept)
    assert np.array_equal(back, np.arange(4 << 20, dtype=np.uint8))
    print("kept: intact")

    @airt.remote(max_retries=0)
    def huge():
        return np.zeros(20 << 20, dtype=np.uint8)

    try:
        airt.get(huge.remote(), timeout=60)
        print("no error")
    except exceptions.ObjectStoreFullError as error:
        print("return: ObjectStoreFullError")
    assert airt.get(airt.put(b"fits")) == b"fits"
    airt.shutdown()
    print("OK")
""")


def test_a_put_larger_than_a_small_store_raises_object_store_full(tmp_path):
    env = Cluster(str(tmp_path)).env()
    env.pop("AIRT_ADDRESS", None)  # the driver starts a local cluster of its own
    env["AIRT_TEMP_DIR"] = str(tmp_path)
    env["AIRT_OBJECT_STORE_FALLBACK_LIMIT"] = "0"  # no fallback memory on disk: a full store
    result = subprocess.run([sys.executable, "-c", STORE_FULL_DRIVER], env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == ["put:", "ObjectStoreFullError", "kept:", "intact",
                                     "return:", "ObjectStoreFullError", "OK"], result.stdout


def test_a_call_in_flight_is_unavailable_while_its_actor_restarts_and_dead_once_it_cannot(cluster):
    import signal
    import time

    @airt.remote(max_restarts=1)
    class Sleeper:
        def pid(self):
            return os.getpid()

        def sleep(self, seconds):
            time.sleep(seconds)

    sleeper = Sleeper.remote()
    pid = airt.get(sleeper.pid.remote(), timeout=60)
    busy = sleeper.sleep.remote(60)
    os.kill(pid, signal.SIGKILL)
    # Ray's ActorUnavailableError: the call is not sent again (max_task_retries=0), the actor
    # comes back.
    with pytest.raises(exceptions.ActorUnavailableError, match="restarting"):
        airt.get(busy, timeout=60)
    second = airt.get(sleeper.pid.remote(), timeout=60)  # queued behind the restart
    assert second != pid
    busy = sleeper.sleep.remote(60)
    os.kill(second, signal.SIGKILL)
    # Its one restart is spent: dead for good.
    with pytest.raises(exceptions.ActorDiedError, match="max_restarts=1"):
        airt.get(busy, timeout=60)


OOM_DRIVER = textwrap.dedent("""
    import os, sys, time
    import airt
    from airt import exceptions

    usage = sys.argv[1]
    airt.init()

    @airt.remote(max_retries=0)
    def hog():
        time.sleep(60)

    with open(usage + ".new", "w") as f:  # what the node reads as its memory use
        f.write(f"{99 << 30} {100 << 30}\\n")
    os.replace(usage + ".new", usage)
    try:
        airt.get(hog.remote(), timeout=60)
        print("no error")
    except exceptions.OutOfMemoryError as error:
        print("OutOfMemoryError:", error)
""")


def test_a_node_above_its_memory_threshold_stops_the_task_and_get_raises_out_of_memory(tmp_path):
    usage = str(tmp_path / "memory-usage")
    cluster = Cluster(str(tmp_path))
    try:
        cluster.start_head()
        cluster.add_node("--num-cpus=1", "--memory-monitor-interval-ms=50",
                         f"--memory-usage-file={usage}")
        out = cluster.run_driver(OOM_DRIVER, usage)
    finally:
        cluster.stop()
    assert out.startswith("OutOfMemoryError:"), out
    assert "hog" in out and "99.00 GiB of 100.00 GiB in use (0.990)" in out, out
    assert "threshold 0.950" in out, out
