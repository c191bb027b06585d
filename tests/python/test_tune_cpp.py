"""The C++ sweep (airt/tune/sweep.h) on a local cluster its driver starts
(tests/tune/sweep_driver.cc): trials whose step throws or whose worker exits are retried from
their checkpoints, a sweep whose driver is killed resumes from its folder, HyperBand pauses
trials and resumes them from their checkpoints, and PBT restarts the worst trials from the best
ones' checkpoints, with callbacks and CheckpointConfig(num_to_keep)."""

import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DRIVER = os.path.join(ROOT, os.environ.get("AIRT_BUILD_DIR", "build"), "tests", "tune",
                      "airt_tune_sweep_driver")


def _env():
    if not os.path.exists(DRIVER):
        raise AssertionError(f"{DRIVER} is missing: build the project first")
    env = dict(os.environ)
    env.pop("AIRT_ADDRESS", None)   # the driver starts a local cluster of its own
    env["AIRT_PYTHON"] = sys.executable  # draws the closing plot (python -m airt.tune.progress)
    return env


def _iterations(folder):
    with open(os.path.join(folder, "result.json")) as f:
        return [json.loads(line)["training_iteration"] for line in f if line.strip()]


def test_cpp_sweep_retries_failed_trials_from_their_checkpoints(tmp_path):
    done = subprocess.run([DRIVER, str(tmp_path), "retry"], env=_env(), capture_output=True,
                          text=True, timeout=300, start_new_session=True)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {l.split()[1]: l.split()[2:7] for l in done.stdout.splitlines()
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
    # The closing plot, drawn by the Python package as for a Python sweep.
    png = tmp_path / "retry" / "loss.png"
    assert f"PLOT {png}" in done.stdout.splitlines(), done.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cpp_sweep_without_a_python_for_its_plot_says_why_and_finishes(tmp_path):
    env = _env()
    env["AIRT_PYTHON"] = str(tmp_path / "no-such-python")
    done = subprocess.run([DRIVER, str(tmp_path), "retry"], env=env, capture_output=True,
                          text=True, timeout=300, start_new_session=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PLOT - cannot run " in done.stdout, done.stdout
    assert not (tmp_path / "retry" / "loss.png").exists()


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


def _run(tmp_path, mode):
    done = subprocess.run([DRIVER, str(tmp_path), mode], env=_env(), capture_output=True,
                          text=True, timeout=300, start_new_session=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_cpp_sweep_hyperband_pauses_a_bracket_and_resumes_its_best_from_checkpoints(tmp_path):
    out = _run(tmp_path, "hyperband")
    # status, results, last step, last loaded, failures, i, pauses, exploits
    rows = [l.split()[2:] for l in out.splitlines() if l.startswith("TRIAL")]
    assert len(rows) == 8, out
    # The first bracket (3 trials, to 9) runs to its end.
    for r in rows[:3]:
        assert r[:4] == ["TERMINATED", "9", "9", "0"], rows
    # The second (5 trials, milestone 3): paused at 3 but the last to get there; the best two
    # (i = 3, 4) go on to 9, a paused one resumed on a new actor from the checkpoint taken at its
    # pause; the other three are stopped at 3.
    assert sum(int(r[6]) for r in rows[3:]) == 4, rows
    for n, r in enumerate(rows[3:5], start=4):
        assert r[:3] == ["TERMINATED", "9", "9"], rows
        assert r[3] == ("3" if r[6] == "1" else "0"), rows
        folder = tmp_path / "hyperband" / f"trial_0000{n}"
        assert _iterations(folder) == list(range(1, 10))
        if r[6] == "1":
            assert (folder / "checkpoint_000003" / "state.bin").read_text() == "3"
    for r in rows[5:]:
        assert r[:3] == ["TERMINATED", "3", "3"], rows
    state = json.loads((tmp_path / "hyperband" / "experiment_state.json").read_text())
    assert [t["stopped_early"] for t in state["trials"]] == [False] * 5 + [True] * 3


def test_cpp_sweep_pbt_exploits_the_best_trials_checkpoint(tmp_path):
    out = _run(tmp_path, "pbt")
    rows = [l.split()[2:] for l in out.splitlines() if l.startswith("TRIAL")]
    assert len(rows) == 4 and all(r[:2] == ["TERMINATED", "8"] for r in rows), out
    exploited = [r for r in rows if int(r[7]) > 0]
    assert exploited, out                       # the worst trial took a better one's state
    for r in exploited:
        assert int(r[3]) > 0                    # loaded a donor's checkpoint
        assert float(r[5]) <= 2                 # the donor's i (0 or 1), moved by one at most
    assert rows[0][7] == "0"                    # the best trial is nobody's exploit
    starts, results, completes, errors = map(int, next(
        l for l in out.splitlines() if l.startswith("CALLBACKS")).split()[1:])
    assert (results, completes, errors) == (32, 4, 0)
    assert starts == 4 + sum(int(r[7]) for r in rows)   # an exploit starts a new actor
    for n in range(1, 5):
        folder = tmp_path / "pbt" / f"trial_0000{n}"
        assert _iterations(folder) == list(range(1, 9))
        assert len([p for p in os.listdir(folder) if p.startswith("checkpoint_")]) <= 2
