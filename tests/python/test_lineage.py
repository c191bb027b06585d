"""Lineage reconstruction with real kill -9 (docs/fault_tolerance.md): a head and airt-node
processes on loopback, and drivers as processes of their own. A task's large return (in its
node's store, not inline) whose node is killed is rebuilt on a live node when the driver gets it;
a chain is rebuilt arguments first; max_retries=0 and a tiny lineage cap give Ray's errors."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import BUILD, Cluster

HEAD_FLAGS = ["--heartbeat-interval-ms=200", "--node-timeout-ms=20000",
              "--node-disconnect-grace-ms=300"]
SPECIAL = '--resources={"special": 1}'

# The driver: makes its objects on the {special: 1} node, says "ready", waits for "killed" (the
# test killed that node), then gets them and prints what it got.
DRIVER = r'''
import os, sys, time
import numpy as np
import airt
from airt import exceptions

dirname, case = sys.argv[1], sys.argv[2]
config = {"max_lineage_bytes": 1} if case == "evicted" else None
airt.init(_system_config=config)

def mark(what):
    name = f"{what}-{os.getppid()}-{os.getpid()}-{time.monotonic_ns()}"
    open(os.path.join(dirname, name), "w").close()

@airt.remote(resources={"special": 1})
def make(seed):
    mark(f"made{seed}")
    return np.full(1 << 20, seed, dtype=np.uint8)

@airt.remote(resources={"special": 1})
def add(array, n):
    mark(f"added{n}")
    return array + np.uint8(n)

@airt.remote(resources={"special": 1})
def total(array):
    return int(array.sum())

if case == "rebuild":
    made = make.remote(5)
    added = add.remote(make.remote(3), 10)
    once = make.options(max_retries=0).remote(7)
    refs = [made, added, once]
else:
    refs = [make.remote(9)]
# Ready, without a copy reaching the driver's node (a task beside them reads them).
airt.get([total.remote(r) for r in refs], timeout=60)
open(os.path.join(dirname, "ready"), "w").close()
deadline = time.time() + 120
while not os.path.exists(os.path.join(dirname, "killed")) and time.time() < deadline:
    time.sleep(0.05)

def outcome(ref):
    try:
        value = airt.get(ref, timeout=120)
        return f"value {int(value[0])} {value.size}"
    except exceptions.RayError as error:
        return f"{type(error).__name__}: {error}"

for ref in refs:
    print(outcome(ref), flush=True)
'''


@pytest.fixture
def lineage_cluster(tmp_path, task_functions_dir):
    cluster = Cluster(str(tmp_path))
    try:
        log, process = cluster._spawn("head", [
            os.path.join(BUILD, "head", "airt-head"),
            "--port=0", f"--temp-dir={tmp_path}", *HEAD_FLAGS])
        cluster.address = cluster._wait_line(log, "head ready ", process)
        cluster.add_node("--num-cpus=2", "--cluster-view-interval-ms=100")
        yield cluster
    finally:
        cluster.stop()


def run_until_killed(cluster, tmp_path, case, replace):
    """Runs the driver for `case`; kills the special node once its objects are made (and with
    `replace` starts another special node); the driver's output lines."""
    markers = tmp_path / f"markers-{case}"
    markers.mkdir()
    cluster.add_node("--num-cpus=2", "--cluster-view-interval-ms=100", SPECIAL)
    victim = cluster.processes[-1]
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(markers), case],
                              env=cluster.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        deadline = time.time() + 120
        while not (markers / "ready").exists():
            assert driver.poll() is None, driver.communicate()
            assert time.time() < deadline, "the driver's objects were not made"
            time.sleep(0.05)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=60)
        if replace:
            cluster.add_node("--num-cpus=2", "--cluster-view-interval-ms=100", SPECIAL)
        (markers / "killed").touch()
        out, err = driver.communicate(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert driver.returncode == 0, err
    runs = {}
    for name in os.listdir(markers):
        what, _, rest = name.partition("-")
        if rest:
            runs.setdefault(what, []).append(int(rest.split("-")[0]))
    return out.splitlines(), runs, victim.pid


def test_lost_returns_are_rebuilt_and_the_lineage_errors_say_why(lineage_cluster, tmp_path):
    lines, runs, victim = run_until_killed(lineage_cluster, tmp_path, "rebuild", replace=True)
    survivor = lineage_cluster.processes[-1].pid
    assert lines[0] == f"value 5 {1 << 20}", lines
    assert lines[1] == f"value 13 {1 << 20}", lines
    assert lines[2].startswith("ObjectReconstructionFailedMaxAttemptsExceededError"), lines
    assert "max_retries" in lines[2]
    # Each rebuilt task ran twice: on the killed node, then on the live one.
    for what in ("made5", "made3", "added10"):
        assert sorted(runs[what]) == sorted([victim, survivor]), (what, runs)
    assert runs["made7"] == [victim]


def test_a_tiny_lineage_cap_gives_lineage_evicted(lineage_cluster, tmp_path):
    lines, _, _ = run_until_killed(lineage_cluster, tmp_path, "evicted", replace=False)
    assert lines[0].startswith("ObjectReconstructionFailedLineageEvictedError"), lines
    assert "max_lineage_bytes" in lines[0]
