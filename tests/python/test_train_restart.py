"""A deterministic torch DDP run (examples/train_torch_ddp.py) whose rank is killed by pid mid-run
restarts from its latest complete checkpoint and ends with a model bitwise equal to an
uninterrupted run's."""

import functools
import os
import signal
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


def test_a_run_resumed_after_a_killed_rank_ends_bitwise_equal(cluster, tmp_path):
    storage = str(tmp_path / "storage")
    whole = train_torch_ddp.make_trainer(storage, "whole").fit()
    assert whole.return_value["resumed_at"] == 0
    assert whole.return_value["accuracy"] >= train_torch_ddp.TARGET_ACCURACY

    folder = str(tmp_path)
    killer = threading.Thread(target=kill_the_waiting_rank, args=(folder,), daemon=True)
    killer.start()
    hook = functools.partial(wait_to_be_killed, folder)
    resumed = train_torch_ddp.make_trainer(storage, "resumed", {"after_epoch": hook},
                                           max_failures=1).fit()
    killer.join()
    assert os.path.exists(os.path.join(folder, "killed"))
    assert resumed.return_value["resumed_at"] in (2, 3)  # epoch 2's ASYNC copy may be cut
    assert resumed.return_value["digest"] == whole.return_value["digest"]
    assert resumed.metrics == whole.metrics
