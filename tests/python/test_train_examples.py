"""The CPU examples run, and the deterministic torch DDP run of examples/train_torch_ddp.py,
with a rank killed by pid mid-run, restarts from its latest complete checkpoint and ends with a
model bitwise equal to the uninterrupted run of the example itself."""

import functools
import os
import signal
import subprocess
import sys
import threading
import time

import cloudpickle
import pytest

pytest.importorskip("torch")

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples")
sys.path.insert(0, EXAMPLES)
import train_torch_ddp  # noqa: E402
from conftest import Cluster  # noqa: E402

cloudpickle.register_pickle_by_value(train_torch_ddp)
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def wait_to_be_killed(folder, epoch, rank):
    """After epoch 2's report, rank 1 of the first attempt writes its pid and waits."""
    if epoch != 2 or rank != 1 or os.path.exists(os.path.join(folder, "killed")):
        return
    with open(os.path.join(folder, "pid.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.replace(os.path.join(folder, "pid.tmp"), os.path.join(folder, "pid"))
    time.sleep(120)


def kill_the_waiting_rank(folder):
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        path = os.path.join(folder, "pid")
        if os.path.exists(path):
            open(os.path.join(folder, "killed"), "w").close()
            os.kill(int(open(path).read()), signal.SIGKILL)
            return
        time.sleep(0.02)


def run_example(name, *args):
    """Runs examples/<name> with its own local cluster; its stdout."""
    env = Cluster("").env()
    env.pop("AIRT_ADDRESS", None)
    result = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_the_distributed_decorator_example_runs():
    out = run_example("distributed_decorator.py")
    assert "allreduce on 2 ranks: [0.0, 3.0, 6.0, 9.0] on every rank" in out
    assert "rank 1 raised, as expected" in out


def test_a_run_resumed_after_a_killed_rank_ends_bitwise_equal(cluster, tmp_path):
    storage = str(tmp_path / "storage")
    out = run_example("train_torch_ddp.py", "--storage-path", storage)
    assert "held-out accuracy" in out
    digest = out.split("model digest ")[1].split()[0]

    folder = str(tmp_path)
    killer = threading.Thread(target=kill_the_waiting_rank, args=(folder,), daemon=True)
    killer.start()
    hook = functools.partial(wait_to_be_killed, folder)
    resumed = train_torch_ddp.make_trainer(storage, "resumed", {"after_epoch": hook},
                                           max_failures=1).fit()
    killer.join()
    assert os.path.exists(os.path.join(folder, "killed"))
    assert resumed.return_value["resumed_at"] in (2, 3)  # epoch 2's ASYNC copy may be cut
    assert resumed.return_value["digest"] == digest
    assert resumed.return_value["accuracy"] >= train_torch_ddp.TARGET_ACCURACY
