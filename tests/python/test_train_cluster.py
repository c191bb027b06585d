"""airt.train across nodes (a head and nodes as real processes on loopback, drivers as
processes of their own): ranks on nodes declaring GPUs get their node ranks and fall back to
gloo without CUDA; a killed node restarts the gang on the healthy one from the latest
checkpoint, ending as an uninterrupted run; a node that does not see storage_path (its own mount
namespace with a tmpfs over the folder) fails fit() naming the path and the node; label_selector
places the ranks on the labelled nodes, and one no node matches fails fit() instead of hanging."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import BUILD, Cluster


@pytest.fixture(scope="module")
def gpu_nodes(tmp_path_factory):
    cluster = Cluster(str(tmp_path_factory.mktemp("train-gpus")))
    try:
        cluster.start_head()
        for _ in range(2):
            cluster.add_node("--num-cpus=2", "--num-gpus=2", "--gpu-memory=80G")
        yield cluster
    finally:
        cluster.stop()


USE_GPU = """
import json, os, sys, airt
from airt import train
from airt.train.torch import TorchTrainer
airt.init()

def loop():
    import torch.distributed as dist
    ctx = train.get_context()
    seen = {"rank": ctx.get_world_rank(), "node_rank": ctx.get_node_rank(),
            "local_rank": ctx.get_local_rank(), "backend": dist.get_backend(),
            "node": airt.get_runtime_context().get_node_id(),
            "visible": os.environ["CUDA_VISIBLE_DEVICES"], "gpus": airt.get_gpu_ids()}
    out = [None] * ctx.get_world_size()
    dist.all_gather_object(out, seen)
    train.report({"ranks": out})

result = TorchTrainer(loop, scaling_config=train.ScalingConfig(num_workers=3, use_gpu=True),
                      run_config=train.RunConfig(name="gpu", storage_path=sys.argv[1])).fit()
print(json.dumps(result.metrics["ranks"]))
"""


def test_use_gpu_ranks_span_nodes_with_gloo_where_no_cuda_device_is_seen(gpu_nodes, tmp_path):
    out = gpu_nodes.run_driver(USE_GPU, str(tmp_path))
    ranks = json.loads(out.strip().splitlines()[-1])
    assert [r["rank"] for r in ranks] == [0, 1, 2]
    assert [(r["node_rank"], r["local_rank"]) for r in ranks] == [(0, 0), (0, 1), (1, 0)]
    assert {r["backend"] for r in ranks} == {"gloo"}
    assert ranks[0]["node"] == ranks[1]["node"] != ranks[2]["node"]
    for r in ranks:
        same_node = [s for s in ranks if s["node"] == r["node"]]
        visible = r["visible"].split(",")  # one GPU of its own for each local rank
        assert len(set(visible)) == len(visible) == len(same_node), r
        assert all(s["visible"] == r["visible"] for s in same_node)


NODE_KILL = """
import json, os, sys, time, tempfile, airt
from airt import train
airt.init()
folder = sys.argv[1]

def loop(config):
    ctx = train.get_context()
    rank = ctx.get_world_rank()
    start, total = 0, 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        state = json.load(open(os.path.join(checkpoint.path, f"rank{rank}.json")))
        start, total = state["next"], state["total"]
    for step in range(start, 6):
        node = airt.get_runtime_context().get_node_id()
        if step == 3 and node == config["victim"] and not os.path.exists(config["killed"]):
            with open(config["pause"] + ".tmp", "w") as f:
                f.write(node)
            os.replace(config["pause"] + ".tmp", config["pause"])
            time.sleep(60)
        total += step * (rank + 1)
        part = tempfile.mkdtemp()
        with open(os.path.join(part, f"rank{rank}.json"), "w") as f:
            json.dump({"next": step + 1, "total": total}, f)
        train.report({"step": step, "start": start}, checkpoint=train.Checkpoint.from_directory(part))
    return total

config = {"victim": sys.argv[2], "pause": os.path.join(folder, "pause"),
          "killed": os.path.join(folder, "killed")}
result = train.DataParallelTrainer(
    loop, train_loop_config=config,
    scaling_config=train.ScalingConfig(num_workers=2, placement_strategy="SPREAD"),
    run_config=train.RunConfig(name="nodekill", storage_path=os.path.join(folder, "storage"),
                               failure_config=train.FailureConfig(max_failures=1))).fit()
print(json.dumps({"total": result.return_value, "metrics": result.metrics}))
"""


def test_a_killed_node_restarts_the_gang_on_the_healthy_one(tmp_path):
    (tmp_path / "cluster").mkdir()
    cluster = Cluster(str(tmp_path / "cluster"))
    try:
        cluster.start_head()
        cluster.add_node("--num-cpus=2")
        victim = cluster.add_node("--num-cpus=2")
        node_process = cluster.processes[-1]
        driver = subprocess.Popen([sys.executable, "-c", NODE_KILL, str(tmp_path), victim],
                                  env=cluster.env(), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        pause = tmp_path / "pause"
        deadline = time.monotonic() + 120
        while not pause.exists() and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pause.exists(), driver.communicate(timeout=30)
        (tmp_path / "killed").touch()
        node_process.send_signal(signal.SIGKILL)
        out, err = driver.communicate(timeout=180)
        assert driver.returncode == 0, out + err
        done = json.loads(out.strip().splitlines()[-1])
        assert done["total"] == sum(range(6))  # rank 0's, as an uninterrupted run's
        assert done["metrics"] == {"step": 5, "start": 3}
    finally:
        cluster.stop()


STORAGE = """
import sys, airt
from airt import train
airt.init()
try:
    train.DataParallelTrainer(
        lambda: None,
        scaling_config=train.ScalingConfig(num_workers=2, placement_strategy="STRICT_SPREAD"),
        run_config=train.RunConfig(name="r", storage_path=sys.argv[1])).fit()
except train.TrainingFailedError as error:
    print("FAILED", error)
"""


def test_storage_path_not_reachable_from_a_node_fails_naming_path_and_node(tmp_path):
    storage = tmp_path / "storage"
    storage.mkdir()
    if subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                      capture_output=True).returncode != 0:
        pytest.skip("needs mount namespaces (unshare -m) to hide the folder from a node")
    (tmp_path / "cluster").mkdir()
    cluster = Cluster(str(tmp_path / "cluster"))
    try:
        cluster.start_head()
        cluster.add_node("--num-cpus=1")
        # A node whose view of `storage` is an empty tmpfs of its own: another machine's disk.
        log, process = cluster._spawn("hidden", [
            "unshare", "-m", "--propagation", "private", "sh", "-c",
            f"mount -t tmpfs none {storage} && exec \"$@\"", "sh",
            os.path.join(BUILD, "worker", "airt-node"), f"--head-address={cluster.address}",
            f"--temp-dir={cluster.root}", "--object-store-memory=256M", "--num-cpus=1",
            f"--python-executable={sys.executable}"])
        hidden = cluster._wait_line(log, "node ready ", process)
        out = cluster.run_driver(STORAGE, str(storage))
        assert "FAILED" in out, out
        assert f"storage_path {storage} is not reachable from node {hidden}" in out
    finally:
        cluster.stop()


LABELS = """
import json, sys, airt
from airt import train
airt.init()
folder = sys.argv[1]

def nodes(selector, name):
    def loop():
        node = airt.get_runtime_context().get_node_id()
        with open(f"{folder}/{name}.{train.get_context().get_world_rank()}", "w") as f:
            f.write(node)
    train.DataParallelTrainer(
        loop, scaling_config=train.ScalingConfig(num_workers=2, label_selector=selector),
        run_config=train.RunConfig(name=name, storage_path=folder)).fit()
    return [open(f"{folder}/{name}.{r}").read() for r in range(2)]

out = {"b": nodes({"zone": "b"}, "b"), "each": nodes([{"zone": "a"}, {"zone": "b"}], "each"),
       "not_a": nodes({"zone": "!a"}, "not_a")}
try:
    nodes({"zone": "mars"}, "mars")
    out["mars"] = "placed"
except train.TrainingFailedError as error:
    out["mars"] = str(error)
print(json.dumps(out))
"""


def test_label_selector_places_the_ranks_on_the_labelled_nodes(tmp_path):
    (tmp_path / "cluster").mkdir()
    cluster = Cluster(str(tmp_path / "cluster"))
    try:
        cluster.start_head()
        zone_a = cluster.add_node("--num-cpus=2", "--labels=zone=a")
        zone_b = cluster.add_node("--num-cpus=2", "--labels=zone=b")
        out = cluster.run_driver(LABELS, str(tmp_path), timeout=300)
        placed = json.loads(out.strip().splitlines()[-1])
        assert placed["b"] == [zone_b, zone_b]
        assert sorted(placed["each"]) == sorted([zone_a, zone_b])
        assert placed["not_a"] == [zone_b, zone_b]
        # No node has zone=mars and no autoscaler could add one: an error naming it, not a hang.
        assert "the gang cannot be reserved: no alive node can hold" in placed["mars"], placed
        assert "mars" in placed["mars"] and "{'zone': 'mars'}" in placed["mars"], placed
    finally:
        cluster.stop()
