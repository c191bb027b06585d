"""The C++ sweep (airt/tune/sweep.h) on a local cluster its driver starts
(tests/tune/sweep_driver.cc): trials whose step throws or whose worker exits are retried from
their checkpoints, and a sweep whose driver is killed resumes from its folder."""

import json
import os
import signal
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVER = os.path.join(ROOT, os.environ.get("AIRT_BUILD_DIR", "build"), "tests", "tune",
                      "airt_tune_sweep_driver")


def _env():
    if not os.path.exists(DRIVER):
        raise AssertionError(f"{DRIVER} is missing: build the project first")
    env = dict(os.environ)
    env.pop("AIRT_ADDRESS", None)   # the driver starts a local cluster of its own
    return env


def _iterations(folder):
    with open(os.path.join(folder, "result.json")) as f:
        return [json.loads(line)["training_iteration"] for line in f if line.strip()]


def test_cpp_sweep_retries_failed_trials_from_their_checkpoints(tmp_path):
    done = subprocess.run([DRIVER, str(tmp_path), "retry"], env=_env(), capture_output=True,
                          text=True, timeout=300, start_new_session=True)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {l.split()[1]: l.split()[2:] for l in done.stdout.splitlines()
            if l.startswith("TRIAL")}
    # status, results, last step, last loaded, failures
    assert rows["none"] == ["TERMINATED", "5", "5", "0", "0"]
    assert rows["throw"] == ["TERMINATED", "5", "5", "2", "1"]   # from the checkpoint after 2
    status, results, step, loaded, failures = rows["exit"]
    assert (status, results, step, failures) == ("TERMINATED", "5", "5", "1")
    assert int(loaded) >= 1            # from its latest checkpoint the worker's death left
    for n, name in ((2, "throw"), (3, "exit")):
        folder = tmp_path / "retry" / f"trial_0000{n}"
        assert _iterations(folder) == [1, 2, 3, 4, 5]
        assert "Failure #1" in (folder / "error.txt").read_text()
    state = json.loads((tmp_path / "retry" / "experiment_state.json").read_text())
    assert [t["num_failures"] for t in state["trials"]] == [0, 1, 1]


def test_cpp_sweep_resumes_after_its_driver_was_killed(tmp_path):
    p = subprocess.Popen([DRIVER, str(tmp_path), "slow"], env=_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not any(f.startswith("mid-sweep-") for f in os.listdir(tmp_path)):
            assert p.poll() is None, p.stdout.read()
            assert time.monotonic() < deadline, "the sweep never reached its third step"
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGKILL)   # the driver and its local cluster, by pid
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    state = json.loads((tmp_path / "slow" / "experiment_state.json").read_text())
    assert any(t["status"] != "TERMINATED" for t in state["trials"])
    done = subprocess.run([DRIVER, str(tmp_path), "resume"], env=_env(), capture_output=True,
                          text=True, timeout=300, start_new_session=True)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [l.split()[2:] for l in done.stdout.splitlines() if l.startswith("TRIAL")]
    assert len(rows) == 4 and all(r[:3] == ["TERMINATED", "6", "6"] for r in rows), rows
    assert any(int(r[3]) > 0 for r in rows)   # at least one resumed from its checkpoint
    for n in range(1, 5):
        assert _iterations(tmp_path / "slow" / f"trial_0000{n}") == [1, 2, 3, 4, 5, 6]
