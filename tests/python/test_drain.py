"""Draining nodes (docs/cluster.md "Draining a node"), with a head and nodes as real processes
on loopback and drivers as processes of their own: a task submitted after the drain runs on
another node while the one running there finishes (also when the submitter holds a busy lease
there: it takes no new task), and the drained node leaves; `airt drain`'s
deadline stops what still runs (retried elsewhere); a preemption notice (SIGUSR1) drains the
same way (with the node's --preemption-reason and --preemption-grace-ms as reason and deadline); and a drain during a 2-rank torch (gloo) training run checkpoints, resumes on the
other node and ends with the right model, counted against max_preemption_failures."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import BUILD, Cluster

AIRT = os.path.join(BUILD, "cli", "airt")


def wait_for(condition, timeout=120, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def start_driver(cluster, script, *args):
    """A driver process running `script` with `args` on the cluster; its output piped."""
    return subprocess.Popen([sys.executable, "-c", script, *args], env=cluster.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def airt_cli(cluster, *args):
    return subprocess.run([AIRT, *args, f"--address={cluster.address}"], env=cluster.env(),
                          capture_output=True, text=True, timeout=180)


@pytest.fixture
def cluster(tmp_path):
    (tmp_path / "cluster").mkdir()
    c = Cluster(str(tmp_path / "cluster"))
    try:
        c.start_head()
        yield c
    finally:
        c.stop()


DRAIN_AFTER = """
import json, os, sys, time, airt
from airt._private import drain
from airt.util.scheduling_strategies import NodeAffinitySchedulingStrategy
airt.init()
victim, folder = sys.argv[1], sys.argv[2]

@airt.remote(num_cpus=1)
def where():
    return airt.get_runtime_context().get_node_id()

@airt.remote(num_cpus=1)
def slow(started, release):
    open(started, "w").close()
    while not os.path.exists(release):
        time.sleep(0.05)
    return airt.get_runtime_context().get_node_id()

started, release = os.path.join(folder, "started"), os.path.join(folder, "release")
running = slow.options(scheduling_strategy=NodeAffinitySchedulingStrategy(victim, soft=False)
                       ).remote(started, release)
while not os.path.exists(started):
    time.sleep(0.05)
# Asked for the victim (soft affinity): there while it takes work, elsewhere once it drains.
# (`before` asks for another shape, so that the lease it got before the drain is not the one
# the later tasks reuse: a submitter keeps an idle lease 10 ms.)
prefer_victim = where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(victim, soft=True))
before = airt.get(prefer_victim.options(num_cpus=0.5).remote())
drain.drain_node(victim, reason="maintenance", deadline_s=300)
state = drain.drain_states()[victim]
assert state["draining"] and state["reason"] == "maintenance", state
with open(os.path.join(folder, "draining"), "w") as f:
    f.write("1")
after = airt.get([prefer_victim.remote() for _ in range(4)])
while not os.path.exists(os.path.join(folder, "status_seen")):
    time.sleep(0.05)
open(release, "w").close()
finished_on = airt.get(running)
while drain.drain_states()[victim]["alive"]:
    time.sleep(0.1)
print(json.dumps({"before": before, "after": after, "finished_on": finished_on,
                  "cause": drain.drain_states()[victim]["death_cause"]}))
"""


def test_a_task_submitted_after_the_drain_runs_elsewhere_and_the_node_leaves(cluster, tmp_path):
    keeper = cluster.add_node("--num-cpus=2")
    victim = cluster.add_node("--num-cpus=2")
    victim_process = cluster.processes[-1]
    driver = start_driver(cluster, DRAIN_AFTER, victim, str(tmp_path))
    try:
        wait_for(lambda: (tmp_path / "draining").exists() or driver.poll() is not None,
                 what="the drain")
        assert driver.poll() is None, driver.communicate()
        status = airt_cli(cluster, "status").stdout
        line = next(l for l in status.splitlines() if l.startswith(victim[:8]))
        assert "DRAIN" in line, status
        assert "DRAINING until" in status and "maintenance" in status, status
        (tmp_path / "status_seen").touch()
        out, err = driver.communicate(timeout=180)
        assert driver.returncode == 0, out + err
        done = json.loads(out.strip().splitlines()[-1])
        assert done["before"] == victim, done
        assert set(done["after"]) == {keeper}, done   # new work went elsewhere
        assert done["finished_on"] == victim          # the running task finished there
        assert done["cause"] == "it was drained (maintenance) and left the cluster"
        assert victim_process.wait(timeout=60) == 0   # the node exited cleanly
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()


BUSY_LEASE = """
import json, os, sys, time, airt
from airt._private import drain
from airt.util.scheduling_strategies import NodeAffinitySchedulingStrategy
airt.init()
victim, folder = sys.argv[1], sys.argv[2]
prefer_victim = NodeAffinitySchedulingStrategy(victim, soft=True)

@airt.remote(num_cpus=1, scheduling_strategy=prefer_victim)
def hold(started, release):
    open(started, "w").close()
    while not os.path.exists(release):
        time.sleep(0.05)
    return airt.get_runtime_context().get_node_id()

@airt.remote(num_cpus=1, scheduling_strategy=prefer_victim)
def where():
    return airt.get_runtime_context().get_node_id()

started, release = os.path.join(folder, "started"), os.path.join(folder, "release")
# One shape: `hold` keeps its lease on the victim busy, and a busy lease takes more tasks of
# its shape (pipelined) unless the submitter knows its node drains.
held = hold.remote(started, release)
while not os.path.exists(started):
    time.sleep(0.05)
drain.drain_node(victim, reason="maintenance", deadline_s=300)
while not drain.drain_states()[victim]["draining"]:
    time.sleep(0.05)
after = [where.remote() for _ in range(4)]
open(release, "w").close()
print(json.dumps({"held": airt.get(held), "after": airt.get(after)}))
"""


def test_a_busy_lease_on_a_draining_node_takes_no_new_task(cluster, tmp_path):
    keeper = cluster.add_node("--num-cpus=2")
    victim = cluster.add_node("--num-cpus=2")
    out = subprocess.run([sys.executable, "-c", BUSY_LEASE, victim, str(tmp_path)],
                         env=cluster.env(), capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    done = json.loads(out.stdout.strip().splitlines()[-1])
    assert done["held"] == victim, done
    assert set(done["after"]) == {keeper}, done  # none went to the lease held on the victim


STUCK = """
import os, sys, time, airt
from airt.util.scheduling_strategies import NodeAffinitySchedulingStrategy
airt.init()
victim, folder = sys.argv[1], sys.argv[2]

@airt.remote(num_cpus=1, max_retries=2)
def stuck(started):
    node = airt.get_runtime_context().get_node_id()
    open(started, "w").close()
    while node == victim:   # never ends on the drained node
        time.sleep(0.05)
    return node

ref = stuck.options(scheduling_strategy=NodeAffinitySchedulingStrategy(victim, soft=True)
                    ).remote(os.path.join(folder, "started"))
print(airt.get(ref))
"""


def test_airt_drain_deadline_stops_what_still_runs_and_it_is_retried_elsewhere(cluster, tmp_path):
    keeper = cluster.add_node("--num-cpus=1")  # first: the drivers' node
    victim = cluster.add_node("--num-cpus=1")
    victim_process = cluster.processes[-1]
    driver = start_driver(cluster, STUCK, victim, str(tmp_path))
    try:
        wait_for(lambda: (tmp_path / "started").exists() or driver.poll() is not None,
                 what="the task")
        bad = airt_cli(cluster, "drain", victim[:8], "--deadline=abc")
        assert bad.returncode != 0 and "--deadline" in bad.stderr, bad.stderr
        drained = airt_cli(cluster, "drain", victim[:8], "--deadline", "1", "--reason", "cli",
                           "--wait")
        assert drained.returncode == 0, drained.stdout + drained.stderr
        assert "has left the cluster" in drained.stdout, drained.stdout
        out, err = driver.communicate(timeout=180)
        assert driver.returncode == 0, out + err
        assert out.strip().splitlines()[-1] == keeper
        assert victim_process.wait(timeout=60) == 0
        missing = airt_cli(cluster, "drain", victim[:8])
        assert missing.returncode != 0 and "no alive node" in missing.stderr
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()


def test_a_preemption_notice_drains_the_node(cluster):
    cluster.add_node("--num-cpus=1")
    victim = cluster.add_node("--num-cpus=1", "--preemption-grace-ms=30000")
    victim_process = cluster.processes[-1]
    victim_process.send_signal(signal.SIGUSR1)
    assert victim_process.wait(timeout=60) == 0
    out = cluster.run_driver(
        "import airt\nfrom airt._private import drain\nairt.init()\n"
        f"print(drain.drain_states()['{victim}']['death_cause'])\n")
    assert out.strip().splitlines()[-1] == \
        "it was drained (preemption notice (SIGUSR1)) and left the cluster"


PREEMPTED = """
import json, os, sys, time, airt
from airt._private import drain
from airt.util.scheduling_strategies import NodeAffinitySchedulingStrategy
airt.init()
victim, folder = sys.argv[1], sys.argv[2]

@airt.remote(num_cpus=1)
def hold(started, release):
    open(started, "w").close()
    while not os.path.exists(release):
        time.sleep(0.05)
    return airt.get_runtime_context().get_node_id()

running = hold.options(scheduling_strategy=NodeAffinitySchedulingStrategy(victim, soft=False)
                       ).remote(os.path.join(folder, "started"), os.path.join(folder, "release"))
while not drain.drain_states()[victim]["draining"]:
    time.sleep(0.05)
with open(os.path.join(folder, "state.json"), "w") as f:
    json.dump(drain.drain_states()[victim], f)
print(airt.get(running))
"""


def test_a_preemption_notice_drains_with_the_nodes_reason_and_lead(cluster, tmp_path):
    """airt-node's --preemption-reason and --preemption-grace-ms (what the Slurm provider gives
    its nodes): SIGUSR1 drains the node through the head with that reason and a deadline that
    far ahead; the task running there finishes and the node leaves."""
    cluster.add_node("--num-cpus=1")
    victim = cluster.add_node("--num-cpus=1", "--preemption-grace-ms=120000",
                              "--preemption-reason=preempted by Slurm")
    victim_process = cluster.processes[-1]
    driver = start_driver(cluster, PREEMPTED, victim, str(tmp_path))
    try:
        wait_for(lambda: (tmp_path / "started").exists() or driver.poll() is not None,
                 what="the task")
        before = time.time()
        victim_process.send_signal(signal.SIGUSR1)
        wait_for(lambda: (tmp_path / "state.json").exists() or driver.poll() is not None,
                 what="the drain")
        after = time.time()
        state = json.loads((tmp_path / "state.json").read_text())
        assert state["alive"] and state["reason"] == "preempted by Slurm", state
        assert before + 120 - 0.01 <= state["deadline_s"] <= after + 120 + 0.01, state
        (tmp_path / "release").touch()
        out, err = driver.communicate(timeout=180)
        assert driver.returncode == 0, out + err
        assert out.strip().splitlines()[-1] == victim
        assert victim_process.wait(timeout=60) == 0
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    out = cluster.run_driver(
        "import airt\nfrom airt._private import drain\nairt.init()\n"
        f"print(drain.drain_states()['{victim}']['death_cause'])\n")
    assert out.strip().splitlines()[-1] == \
        "it was drained (preempted by Slurm) and left the cluster"


TRAIN = """
import json, os, sys, tempfile, time, airt
import torch
from airt import train
from airt.train.torch import TorchTrainer, prepare_model
airt.init()
folder = sys.argv[1]
STEPS, LR = 8, 0.1

def data(rank):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(16, 4, generator=g)
    y = x @ torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    return x[rank::2], y[rank::2]

def loop(config):
    torch.set_num_threads(1)
    rank = train.get_context().get_world_rank()
    model = torch.nn.Linear(4, 1, bias=False)
    with torch.no_grad():
        model.weight.zero_()
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        state = torch.load(os.path.join(checkpoint.path, f"state{rank}.pt"))
        model.load_state_dict(state["model"])
        start = state["step"]
    model = prepare_model(model)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = data(rank)
    node = airt.get_runtime_context().get_node_id()
    for step in range(start, STEPS):
        if step == 3 and start == 0:
            if rank == 0:
                with open(config["pause"] + ".tmp", "w") as f:
                    f.write(node)
                os.replace(config["pause"] + ".tmp", config["pause"])
            deadline = time.time() + 120
            while train.get_preemption_info() is None and time.time() < deadline:
                time.sleep(0.1)
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        part = None
        info = train.get_preemption_info()
        if info is not None:
            d = tempfile.mkdtemp()
            torch.save({"model": model.module.state_dict(), "step": step + 1},
                       os.path.join(d, f"state{rank}.pt"))
            part = train.Checkpoint.from_directory(d)
        train.report({"step": step, "start": start, "node": node,
                      "told": info.node_id if info else None}, checkpoint=part)
    return model.module.weight.detach().flatten().tolist()

result = TorchTrainer(
    loop, train_loop_config={"pause": os.path.join(folder, "pause")},
    scaling_config=train.ScalingConfig(num_workers=2, placement_strategy="STRICT_PACK"),
    run_config=train.RunConfig(
        name="drain", storage_path=os.path.join(folder, "storage"),
        failure_config=train.FailureConfig(max_failures=0, max_preemption_failures=1))).fit()

# The same steps in one process: DDP averages the two ranks' gradients of equal shards.
w = torch.zeros(1, 4)
for _ in range(STEPS):
    grads = []
    for rank in range(2):
        x, y = data(rank)
        wr = w.clone().requires_grad_(True)
        ((x @ wr.t() - y) ** 2).mean().backward()
        grads.append(wr.grad)
    w = w - LR * (grads[0] + grads[1]) / 2
print(json.dumps({"weights": result.return_value, "expected": w.flatten().tolist(),
                  "metrics": result.metrics}))
"""


def test_a_drain_during_training_checkpoints_and_resumes_on_another_node(cluster, tmp_path):
    pytest.importorskip("torch")
    cluster.add_node("--num-cpus=1")  # the driver's (and the coordinator's)
    first = cluster.add_node("--num-cpus=2")
    second = cluster.add_node("--num-cpus=2")
    processes = {first: cluster.processes[-2], second: cluster.processes[-1]}
    driver = start_driver(cluster, TRAIN, str(tmp_path))
    try:
        pause = tmp_path / "pause"
        wait_for(lambda: pause.exists() or driver.poll() is not None, timeout=240,
                 what="step 3")
        assert pause.exists(), driver.communicate(timeout=30)
        victim = pause.read_text()
        assert victim in processes
        drained = airt_cli(cluster, "drain", victim[:8], "--deadline=120",
                           "--reason=spot reclaim")
        assert drained.returncode == 0, drained.stderr
        out, err = driver.communicate(timeout=300)
        assert driver.returncode == 0, out + err
        done = json.loads(out.strip().splitlines()[-1])
        assert done["metrics"]["step"] == 7
        assert done["metrics"]["start"] == 4, "resumed from the checkpoint made at the drain"
        assert done["metrics"]["node"] != victim
        assert done["weights"] == pytest.approx(done["expected"], abs=1e-5)
        assert processes[victim].wait(timeout=60) == 0  # the drained node left cleanly
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
