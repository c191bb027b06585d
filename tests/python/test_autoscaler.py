"""The autoscaler end to end (local provider): `airt up` a cluster whose head node has no GPU,
then scale from zero for a GPU task, an actor and a placement group; the infeasible error for a
shape no node type holds; max_workers under a burst; idle scale-down; a failed launch retried
(fault provider); a drained node stopped, not a failed launch; a bad provider key failing `airt
up`; `airt status` showing it all; `airt down` stopping everything."""

import os
import subprocess
import sys
import time

import pytest

from conftest import BUILD

AIRT = os.path.join(BUILD, "cli", "airt")

CONFIG = """
cluster_name: {name}
max_workers: 3
idle_timeout_minutes: 0.02
provider: {provider}
available_node_types:
  head:
    resources: {{CPU: 1}}
  cpu_node:
    resources: {{CPU: 1, spread_me: 1}}
    max_workers: 2
  gpu_node:
    resources: {{CPU: 1, GPU: 1}}
    labels: {{accelerator_type: H100}}
    max_workers: 2
head_node_type: head
"""


def env():
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(BUILD, "python")] + [p for p in e.get("PYTHONPATH", "").split(os.pathsep) if p])
    e["AIRT_PYTHON"] = sys.executable
    e.pop("AIRT_ADDRESS", None)
    return e


class UpCluster:
    def __init__(self, root, name, provider="{type: local}"):
        self.root = str(root)
        self.config = os.path.join(self.root, "cluster.yaml")
        with open(self.config, "w") as f:
            f.write(CONFIG.format(name=name, provider=provider))
        self.temp = os.path.join(self.root, "airt")
        up = self.airt("up", self.config, "--infeasible-grace-ms=1500",
                       f"--python-executable={sys.executable}")
        assert up.returncode == 0, up.stdout + up.stderr
        with open(os.path.join(self.temp, "session", "head_address")) as f:
            self.address = f.read().strip()

    def airt(self, *args):
        return subprocess.run([AIRT, *args, f"--temp-dir={self.temp}"], env=env(),
                              capture_output=True, text=True, timeout=120)

    def status(self):
        return self.airt("status").stdout

    def driver(self, code, timeout=120):
        prelude = f"import time, airt\nairt.init(address={self.address!r})\n"
        result = subprocess.run([sys.executable, "-c", prelude + code], env=env(),
                                capture_output=True, text=True, timeout=timeout)
        assert result.returncode == 0, f"driver failed:\n{result.stdout}\n{result.stderr}\n" + \
            self.status()
        return result.stdout

    def wait_status(self, predicate, what, timeout=60):
        deadline = time.time() + timeout
        text = ""
        while time.time() < deadline:
            text = self.status()
            if predicate(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"no {what} within {timeout} s:\n{text}")

    def down(self):
        result = self.airt("down", self.config)
        assert result.returncode == 0, result.stdout + result.stderr


def alive_nodes(text):
    for line in text.splitlines():
        if line.startswith("Nodes: "):
            return int(line.split()[1])
    return -1


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    cluster = UpCluster(tmp_path_factory.mktemp("autoscaler"), "scaling")
    try:
        yield cluster
    finally:
        cluster.down()


def test_a_gpu_task_scales_from_zero_and_the_node_goes_when_idle(up):
    out = up.driver("""
head = airt.get_runtime_context().get_node_id()
@airt.remote(num_gpus=1)
def where():
    return airt.get_runtime_context().get_node_id()
node = airt.get(where.remote(), timeout=60)
assert node != head, node
resources = [n["Resources"] for n in airt.nodes() if n["NodeID"] == node][0]
assert resources.get("GPU") == 1.0, resources
print("OK", node)
""")
    assert "OK" in out
    text = up.wait_status(lambda t: alive_nodes(t) == 1 and "idle for" in t, "idle scale-down")
    assert "gpu_node" in text


def test_idle_scale_down_moves_a_nodes_primary_objects_before_it_stops(up, tmp_path):
    """A GPU task's large return lives in the GPU node's store (its only copy); when the node goes
    idle the autoscaler has it moved to another node, its owner (the driver) told, and only then
    stops it: the driver reads the value after the node is gone, with no re-run of the task."""
    marks = str(tmp_path)
    out = up.driver(f"""
import os
import numpy as np
marks = {marks!r}
@airt.remote(num_gpus=1)
def make():
    open(os.path.join(marks, "run-%d" % os.getpid()), "w").close()
    return np.arange(1 << 18, dtype=np.int64)  # 2 MiB: stored in its node's store
before = {{n["NodeID"] for n in airt.nodes()}}
ref = make.remote()
gpu = None
deadline = time.time() + 90
while time.time() < deadline:  # a GPU node came, ran it, went idle and went
    nodes = airt.nodes()
    new = [n for n in nodes if n["NodeID"] not in before and n["Resources"].get("GPU")]
    if new:
        gpu = new[0]["NodeID"]
    if gpu and not [n for n in nodes if n["NodeID"] == gpu and n["Alive"]]:
        break
    time.sleep(0.2)
assert gpu and not [n for n in airt.nodes() if n["NodeID"] == gpu and n["Alive"]], airt.nodes()
value = airt.get(ref, timeout=60)
assert (value == np.arange(1 << 18, dtype=np.int64)).all()
print("OK", gpu)
""", timeout=180)
    assert "OK" in out
    assert len(os.listdir(marks)) == 1, os.listdir(marks)  # ran once: read, not rebuilt
    text = up.wait_status(lambda t: "primary objects moved" in t, "the evacuation in the status")
    assert "1 primary objects moved to other nodes first" in text, text


def test_an_actor_and_a_placement_group_scale_from_zero(up):
    out = up.driver("""
from airt.util.placement_group import placement_group
@airt.remote(num_gpus=1)
class Holder:
    def node(self):
        return airt.get_runtime_context().get_node_id()
h = Holder.remote()
assert airt.get(h.node.remote(), timeout=60)
pg = placement_group([{"spread_me": 1}, {"spread_me": 1}], strategy="STRICT_SPREAD")
assert pg.wait(60), "the group was not placed"
print("OK")
""")
    assert "OK" in out


def test_a_shape_no_node_type_holds_is_infeasible_and_launches_nothing(up):
    out = up.driver("""
@airt.remote(resources={"TPU": 1})
def f():
    return 1
try:
    airt.get(f.remote(), timeout=60)
    print("NO ERROR")
except Exception as e:
    print("ERROR", type(e).__name__, e)
""")
    assert "ERROR" in out and "TPU" in out, out
    assert "for {TPU" not in up.status()  # nothing was launched for it


def test_a_burst_never_exceeds_max_workers(up):
    out = up.driver("""
import threading
@airt.remote(num_gpus=1)
def work(i):
    time.sleep(0.5)
    return airt.get_runtime_context().get_node_id()
most = [0]
done = threading.Event()
def watch():
    while not done.is_set():
        gpu = sum(1 for n in airt.nodes() if n["Alive"] and n["Resources"].get("GPU"))
        most[0] = max(most[0], gpu)
        time.sleep(0.05)
t = threading.Thread(target=watch)
t.start()
nodes = airt.get([work.remote(i) for i in range(8)], timeout=120)
done.set()
t.join()
assert 1 <= len(set(nodes)) <= 2, nodes
assert most[0] <= 2, most[0]
print("OK", most[0])
""")
    assert "OK" in out


def test_request_resources_launches_nodes_until_replaced(up):
    up.driver("""
from airt.autoscaler.sdk import request_resources
request_resources(bundles=[{"GPU": 1}], bundle_label_selectors=[{"accelerator_type": "H100"}])
""")
    up.wait_status(lambda t: "request_resources" in t and "gpu_node" in t and alive_nodes(t) >= 2,
                   "a node for request_resources")
    up.driver("""
from airt.autoscaler.sdk import request_resources
request_resources()
""")
    up.wait_status(lambda t: alive_nodes(t) == 1, "scale-down after the request was cleared")


def test_a_failed_launch_is_retried_and_shown(tmp_path):
    cluster = UpCluster(tmp_path, "faulty", provider="{type: fault, fail_launches: 1}")
    try:
        out = cluster.driver("""
@airt.remote(num_gpus=1)
def f():
    return 7
print("OK", airt.get(f.remote(), timeout=60))
""")
        assert "OK 7" in out
        text = cluster.status()
        assert "Failed launches (latest):\n" in text and "fail_launches 1" in text, text
    finally:
        cluster.down()


def test_up_fails_on_a_bad_provider_key_before_starting_anything(tmp_path):
    config = tmp_path / "cluster.yaml"
    temp = tmp_path / "airt"
    for provider, words in [
            ("{type: slurm, preemption_notice_s: 0}",
             "provider.preemption_notice_s: must be a whole number of seconds from 1 to 3600"),
            ("{type: slurm, sbatch_args: '--signal=B:USR2@30'}",
             "provider.sbatch_args: '--signal=B:USR2@30'"),
            ("{type: local, preemption_notice_s: 60}",
             "provider.preemption_notice_s: unknown key for the local provider")]:
        config.write_text(CONFIG.format(name="bad", provider=provider))
        result = subprocess.run([AIRT, "up", str(config), f"--temp-dir={temp}"], env=env(),
                                capture_output=True, text=True, timeout=60)
        assert result.returncode != 0, result.stdout
        assert words in result.stderr and str(config) in result.stderr, result.stderr
        assert not (temp / "session" / "head_address").exists()


def test_a_drained_node_is_a_stop_not_a_failed_launch(tmp_path):
    """A drained node (`airt drain`, a provider's preemption notice) leaves, then its process
    ends: the autoscaler records a stop with the drain's reason, not a failed launch, even
    within a minute of its registration."""
    cluster = UpCluster(tmp_path, "drained")
    try:
        out = cluster.driver("""
from airt.autoscaler.sdk import request_resources
request_resources(bundles=[{"GPU": 1}])

@airt.remote(num_gpus=1)
def where():
    return airt.get_runtime_context().get_node_id()
print("NODE", airt.get(where.remote(), timeout=60))
""")
        node = out.split("NODE ")[1].split()[0]
        drained = cluster.airt("drain", node, "--reason", "preempted by Slurm", "--deadline", "30",
                               "--wait", f"--address={cluster.address}")
        assert drained.returncode == 0, drained.stdout + drained.stderr
        text = cluster.wait_status(
            lambda t: "it was drained (preempted by Slurm)" in t, "the drained node's stop")
        assert "Failed launches (latest): none" in text, text
        # The request still stands: a node replaces it, with no backoff.
        text = cluster.wait_status(lambda t: alive_nodes(t) >= 2 and "Launching: none" in t,
                                   "a node in place of the drained one")
        assert "Failed launches (latest): none" in text, text
    finally:
        cluster.down()
