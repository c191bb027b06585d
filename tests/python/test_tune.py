"""airt.tune on a local cluster: full sweeps, failures and retries from checkpoints, class
trainables, callbacks, PBT, fractional GPU packing and Tuner.restore after the driver is killed
(the last two in drivers of their own: they need a cluster with declared GPUs, or a kill)."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import airt

from airt import tune

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_PYTHON = os.path.join(ROOT, os.environ.get("AIRT_BUILD_DIR", "build"), "python")
QUARTER = {"CPU": 0.25}


def _wait_for_peers(folder, name, count, timeout=30.0):
    """Marks trial `name` started in `folder` and waits (up to `timeout`) until `count` trials
    have, so the trials report side by side instead of one after another when a loaded machine
    starts their actors slowly (an order in which ASHA or PBT has nothing to compare against)."""
    open(os.path.join(folder, f"started-{name}"), "w").close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if sum(f.startswith("started-") for f in os.listdir(folder)) >= count:
            return
        time.sleep(0.02)


def quadratic(config):
    if "peers" in config:
        _wait_for_peers(config["peers"], config["x"], 8)
    for step in range(1, 9):
        tune.report({"loss": (config["x"] - 0.3) ** 2 + 1.0 / step, "step": step})


def test_a_sweep_runs_every_trial_and_asha_stops_poor_ones_early(cluster, tmp_path):
    peers = tmp_path / "peers"
    peers.mkdir()
    tuner = tune.Tuner(
        tune.with_resources(quadratic, QUARTER),
        param_space={"x": tune.grid_search([0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9, 1.2]),
                     "unused": tune.choice(["a", "b"]), "peers": str(peers)},
        tune_config=tune.TuneConfig(metric="loss", mode="min", scheduler=tune.ASHAScheduler(
            max_t=8, grace_period=1, reduction_factor=2)),
        run_config=tune.RunConfig(name="asha", storage_path=str(tmp_path), verbose=0))
    grid = tuner.fit()
    assert len(grid) == 8 and grid.num_errors == 0 and grid.num_terminated == 8, grid.errors
    best = grid.get_best_result()
    assert best.config["x"] == 0.3 and best.metrics["training_iteration"] == 8
    iterations = sorted(r.metrics["training_iteration"] for r in grid)
    assert iterations[0] < 8 and iterations[-1] == 8     # some stopped early, some ran out
    assert grid.experiment_path == str(tmp_path / "asha")
    for result in grid:
        files = set(os.listdir(result.path))
        assert {"params.json", "result.json", "progress.csv"} <= files
        lines = open(os.path.join(result.path, "result.json")).read().splitlines()
        assert len(lines) == result.metrics["training_iteration"]
        assert json.loads(lines[-1])["loss"] == result.metrics["loss"]
        assert len(result.metrics_dataframe) == len(lines)
    assert os.path.getsize(tmp_path / "asha" / "loss.png") > 1000
    assert os.path.exists(tmp_path / "asha" / "experiment_state.json")
    assert len(grid.get_dataframe()) == 8


def counted(config):
    for step in range(1, 6):
        open(os.path.join(config["dir"], f"step-{config['i']}-{step}"), "w").close()
        tune.report({"loss": 1.0 / step})


def test_a_trial_never_runs_a_step_ahead_of_the_tuner(cluster, tmp_path):
    # Stopped after its second result, a trial must not have begun a third step (Ray's
    # function trainables wait in report until the tuner asks for the next result).
    grid = tune.Tuner(tune.with_resources(counted, QUARTER),
                      param_space={"dir": str(tmp_path), "i": tune.grid_search([1, 2])},
                      run_config=tune.RunConfig(storage_path=str(tmp_path), name="ahead",
                                                verbose=0, stop={"training_iteration": 2})).fit()
    assert grid.num_errors == 0 and all(r.metrics["training_iteration"] == 2 for r in grid)
    started = sorted(f for f in os.listdir(tmp_path) if f.startswith("step-"))
    assert started == ["step-1-1", "step-1-2", "step-2-1", "step-2-2"]


def flaky(config):
    """Fails once at iteration 3 (a marker file says it already failed), checkpointing each
    step; a retry resumes from the checkpoint of iteration 3."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with open(os.path.join(checkpoint.path, "step")) as f:
            start = int(f.read())
    marker = os.path.join(config["dir"], f"failed-{config['id']}")
    for step in range(start + 1, 7):
        if step == 4 and not os.path.exists(marker):
            open(marker, "w").close()
            if config["how"] == "raise":
                raise RuntimeError("trial blew up at step 4")
            os._exit(3)  # the worker process dies
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step"), "w") as f:
                f.write(str(step))
            tune.report({"loss": 1.0 / step, "started_at": start},
                        checkpoint=tune.Checkpoint.from_directory(d))


@pytest.mark.parametrize("how", ["raise", "die"])
def test_a_failed_trial_is_retried_from_its_last_checkpoint(cluster, tmp_path, how):
    grid = tune.Tuner(
        tune.with_resources(flaky, QUARTER),
        param_space={"dir": str(tmp_path), "how": how, "id": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="retry", verbose=0,
                                  failure_config=tune.FailureConfig(max_failures=2),
                                  checkpoint_config=tune.CheckpointConfig(num_to_keep=2))).fit()
    assert grid.num_errors == 0 and grid.num_terminated == 2, grid.errors
    for result in grid:
        assert result.metrics["training_iteration"] == 6
        assert result.metrics["started_at"] == 3          # resumed after step 3's checkpoint
        steps = [json.loads(l)["training_iteration"]
                 for l in open(os.path.join(result.path, "result.json"))]
        assert steps == [1, 2, 3, 4, 5, 6]
        assert os.path.basename(result.checkpoint.path) == "checkpoint_000006"
        kept = sorted(f for f in os.listdir(result.path) if f.startswith("checkpoint_"))
        assert kept == ["checkpoint_000005", "checkpoint_000006"]   # num_to_keep=2
        assert "Failure #1" in open(os.path.join(result.path, "error.txt")).read()


def broken(config):
    tune.report({"loss": 1.0})
    if config["bad"]:
        raise ValueError("bad config")
    tune.report({"loss": 0.5})


class Recorder(tune.Callback):
    def __init__(self):
        self.events = []

    def on_trial_start(self, iteration, trials, trial, **info):
        self.events.append(("start", trial.config["bad"]))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.events.append(("result", trial.config["bad"]))

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.events.append(("complete", trial.config["bad"]))

    def on_trial_error(self, iteration, trials, trial, **info):
        self.events.append(("error", trial.config["bad"]))

    def on_experiment_end(self, trials, **info):
        self.events.append(("end", len(trials)))


def test_a_trial_that_raises_ends_in_error_and_the_sweep_goes_on(cluster, tmp_path):
    recorder = Recorder()
    grid = tune.Tuner(
        tune.with_resources(broken, QUARTER),
        param_space={"bad": tune.grid_search([False, True])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="err", verbose=0,
                                  callbacks=[recorder])).fit()
    assert grid.num_errors == 1 and grid.num_terminated == 1 and len(grid.errors) == 1, grid.errors
    bad = [r for r in grid if r.config["bad"]][0]
    assert "ValueError: bad config" in str(bad.error) and "Traceback" in str(bad.error)
    assert grid.get_best_result().config == {"bad": False}
    events = recorder.events
    assert ("error", True) in events and ("complete", False) in events
    assert events.count(("start", True)) == 1 and events[-1] == ("end", 2)
    assert events.index(("start", False)) < events.index(("result", False))


class Counter(tune.Trainable):
    def setup(self, config, offset=0):
        self.value = config["start"] + offset

    def step(self):
        self.value += 1
        return {"value": self.value}

    def save_checkpoint(self, checkpoint_dir):
        return {"value": self.value}

    def load_checkpoint(self, checkpoint):
        self.value = checkpoint["value"]


def test_class_trainables_with_parameters_stop_criteria_and_checkpoints(cluster, tmp_path):
    trainable = tune.with_resources(tune.with_parameters(Counter, offset=100),
                                    tune.PlacementGroupFactory([{"CPU": 0.125}, {"CPU": 0.125}]))
    grid = tune.Tuner(
        trainable, param_space={"start": tune.grid_search([0, 10])},
        tune_config=tune.TuneConfig(metric="value", mode="max"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="cls", verbose=0,
                                  stop={"training_iteration": 4},
                                  checkpoint_config=tune.CheckpointConfig(
                                      checkpoint_frequency=2))).fit()
    assert sorted(r.metrics["value"] for r in grid) == [104, 114]
    assert all(r.metrics["training_iteration"] == 4 for r in grid)
    assert all(os.path.basename(r.checkpoint.path) == "checkpoint_000002" for r in grid)


@airt.remote(num_cpus=0.125)
def _group_of_child():
    return airt.get_runtime_context().get_placement_group_id()


def in_group(config):
    from airt.util.placement_group import get_current_placement_group
    from airt.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    group = get_current_placement_group()
    child = _group_of_child.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        group, placement_group_bundle_index=1)).remote()
    tune.report({"group": group.id.hex(), "child_group": airt.get(child)})


def test_a_placement_group_factory_trial_runs_in_a_group_of_its_own(cluster, tmp_path):
    from airt.util.placement_group import placement_group_table
    factory = tune.PlacementGroupFactory([{"CPU": 0.25}, {"CPU": 0.125}], strategy="PACK")
    grid = tune.Tuner(tune.with_resources(in_group, factory),
                      param_space={"i": tune.grid_search([1, 2])},
                      run_config=tune.RunConfig(storage_path=str(tmp_path), name="pgf",
                                                verbose=0)).fit()
    assert grid.num_errors == 0, grid.errors
    groups = [r.metrics["group"] for r in grid]
    assert len(set(groups)) == 2 and all(groups)          # one group per trial
    assert all(r.metrics["child_group"] == r.metrics["group"] for r in grid)
    table = placement_group_table()
    assert all(table[g]["state"] == "REMOVED" for g in groups if g in table)


def pbt_trainable(config):
    state = {"score": 0.0, "lr": config["lr"]}
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            state["score"] = json.load(f)["score"]
    _wait_for_peers(config["peers"], tune.get_context().get_trial_id(), 2)
    for _ in range(12):
        time.sleep(0.25)  # lets the other trial report between this one's steps
        state["score"] += config["lr"]
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump(state, f)
            tune.report({"score": state["score"]}, checkpoint=tune.Checkpoint.from_directory(d))
        if tune.get_context().get_trial_id() is None:
            raise AssertionError("no trial context")


def test_pbt_copies_the_better_trials_checkpoint(cluster, tmp_path):
    peers = tmp_path / "peers"
    peers.mkdir()
    pbt = tune.PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=3,
                                       hyperparam_mutations={"lr": [0.1, 0.5, 1.0]},
                                       quantile_fraction=0.5, resample_probability=0.0, seed=1)
    grid = tune.Tuner(
        tune.with_resources(pbt_trainable, QUARTER),
        param_space={"lr": tune.grid_search([0.1, 1.0]), "peers": str(peers)},
        tune_config=tune.TuneConfig(metric="score", mode="max", scheduler=pbt),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="pbt", verbose=0,
                                  stop={"training_iteration": 12})).fit()
    assert pbt.num_perturbations >= 1 and grid.num_errors == 0
    weak = [r for r in grid if r.path.endswith("00001")][0]
    scores = [json.loads(l)["score"] for l in open(os.path.join(weak.path, "result.json"))]
    # After an exploit the weak trial jumped to the strong one's score (its checkpoint).
    assert max(b - a for a, b in zip(scores, scores[1:])) > 1.0


def _driver(script, tmp_path, env_extra=None):
    path = tmp_path / "driver.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=BUILD_PYTHON, **(env_extra or {}))
    env.pop("AIRT_ADDRESS", None)
    return subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, text=True,
                            start_new_session=True)


GPU_DRIVER = r"""
import os, time, airt
from airt import tune
airt.init(num_cpus=2, num_gpus=4)
def train(config):
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES")
    for i in range(3):
        tune.report({"loss": config["i"], "gpus": gpus, "pid": os.getpid(), "t": time.time()})
        time.sleep(0.5)
grid = tune.Tuner(tune.with_resources(train, {"CPU": 0.25, "GPU": 0.5}),
                  param_space={"i": tune.grid_search(list(range(8)))},
                  tune_config=tune.TuneConfig(metric="loss", mode="min"),
                  run_config=tune.RunConfig(storage_path=%r, name="gpu", verbose=0)).fit()
for r in grid:
    print("TRIAL", r.metrics["gpus"], r.metrics["pid"])
airt.shutdown()
"""


def test_fractional_gpu_trials_pack_two_per_declared_gpu(tmp_path):
    p = _driver(GPU_DRIVER % str(tmp_path), tmp_path)
    out, _ = p.communicate(timeout=240)
    assert p.returncode == 0, out
    lines = [l.split() for l in out.splitlines() if l.startswith("TRIAL")]
    assert len(lines) == 8
    gpus = [l[1] for l in lines]
    assert sorted(set(gpus)) == ["0", "1", "2", "3"]
    assert all(gpus.count(g) == 2 for g in set(gpus))   # two trials share each declared GPU
    assert len({l[2] for l in lines}) == 8              # eight actors ran at once


RESTORE_DRIVER = r"""
import os, sys, tempfile, time, airt
from airt import tune
airt.init(num_cpus=2)
def train(config):
    start = 0
    if tune.get_checkpoint():
        start = int(open(os.path.join(tune.get_checkpoint().path, "step")).read())
    for step in range(start + 1, 9):
        if step == 5 and config["x"] == 0 and not os.path.exists(%(marker)r):
            open(%(marker)r, "w").close()   # the driver is killed while trials run
        time.sleep(0.3)
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "step"), "w").write(str(step))
            tune.report({"loss": config["x"] + 1.0 / step, "resumed_from": start},
                        checkpoint=tune.Checkpoint.from_directory(d))
path = os.path.join(%(storage)r, "exp")
if sys.argv[-1] == "restore":
    tuner = tune.Tuner.restore(path, tune.with_resources(train, {"CPU": 0.25}))
else:
    tuner = tune.Tuner(tune.with_resources(train, {"CPU": 0.25}),
                       param_space={"x": tune.grid_search([0, 1, 2, 3, 4, 5])},
                       tune_config=tune.TuneConfig(metric="loss", mode="min",
                                                   max_concurrent_trials=3),
                       run_config=tune.RunConfig(storage_path=%(storage)r, name="exp", verbose=0))
grid = tuner.fit()
for r in grid:
    print("TRIAL", r.config["x"], r.metrics["training_iteration"], r.metrics["resumed_from"])
airt.shutdown()
"""


def test_restore_resumes_a_sweep_whose_driver_was_killed(tmp_path):
    marker = str(tmp_path / "mid-sweep")
    script = RESTORE_DRIVER % {"marker": marker, "storage": str(tmp_path)}
    p = _driver(script, tmp_path)
    try:
        deadline = time.time() + 120
        while not os.path.exists(marker):
            assert p.poll() is None, p.stdout.read()
            assert time.time() < deadline, "the sweep never reached the marker"
            time.sleep(0.05)
        time.sleep(0.2)
        os.killpg(p.pid, signal.SIGKILL)   # the driver and its local cluster, by pid
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    path = tmp_path / "exp"
    assert tune.Tuner.can_restore(str(path))
    (tmp_path / "driver.py").write_text(script)
    env = dict(os.environ, PYTHONPATH=BUILD_PYTHON)
    env.pop("AIRT_ADDRESS", None)
    done = subprocess.run([sys.executable, str(tmp_path / "driver.py"), "restore"], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [l.split() for l in done.stdout.splitlines() if l.startswith("TRIAL")]
    assert len(rows) == 6 and all(r[2] == "8" for r in rows)
    assert any(int(r[3]) > 0 for r in rows)   # at least one trial resumed from its checkpoint
    for r in tune.Tuner.restore(str(path), quadratic).get_results():
        steps = [json.loads(l)["training_iteration"]
                 for l in open(os.path.join(r.path, "result.json"))]
        assert steps == list(range(1, 9)), (r.path, steps)


def checkpointed(config):
    start = 0
    if tune.get_checkpoint():
        start = int(open(os.path.join(tune.get_checkpoint().path, "step")).read())
    for step in range(start + 1, 10):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "step"), "w").write(str(step))
            tune.report({"loss": config["x"] / step}, checkpoint=tune.Checkpoint.from_directory(d))


def test_hyperband_pauses_frees_and_resumes_trials_from_checkpoints(cluster, tmp_path):
    # max_t 9, eta 3: the first three trials form a bracket run to 9; the next three a bracket
    # that runs 3 iterations, then keeps the best ceil(5/3) = 2 for 9. Two run at once, so
    # paused trials must free their actors for the others to reach the milestone.
    grid = tune.Tuner(
        tune.with_resources(checkpointed, QUARTER),
        param_space={"x": tune.grid_search([1, 2, 3, 6, 4, 5])},
        tune_config=tune.TuneConfig(metric="loss", mode="min", max_concurrent_trials=2,
                                    scheduler=tune.HyperBandScheduler(max_t=9,
                                                                      reduction_factor=3)),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="hb", verbose=0)).fit()
    assert grid.num_terminated == 6 and grid.num_errors == 0
    ends = {r.config["x"]: r.metrics["training_iteration"] for r in grid}
    assert ends == {1: 9, 2: 9, 3: 9, 4: 9, 5: 9, 6: 3}
    for r in grid:
        steps = [json.loads(l)["training_iteration"]
                 for l in open(os.path.join(r.path, "result.json"))]
        assert steps == list(range(1, ends[r.config["x"]] + 1))


def test_optuna_search_behind_a_concurrency_limiter_drives_a_sweep(cluster, tmp_path):
    search = tune.ConcurrencyLimiter(tune.OptunaSearch(seed=0), max_concurrent=2)
    grid = tune.Tuner(
        tune.with_resources(quadratic, QUARTER),
        param_space={"x": tune.uniform(-1, 1)},
        tune_config=tune.TuneConfig(metric="loss", mode="min", search_alg=search, num_samples=6,
                                    scheduler=tune.MedianStoppingRule(
                                        time_attr="training_iteration", grace_period=2,
                                        min_samples_required=1)),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="optuna", verbose=0)).fit()
    assert len(grid) == 6 and grid.num_errors == 0
    assert all(-1 <= r.config["x"] <= 1 for r in grid)
    assert len(search.searcher._study.trials) == 6
    assert all(t.state.name == "COMPLETE" for t in search.searcher._study.trials)


def forever(config):
    step = 0
    while True:
        step += 1
        time.sleep(0.05)
        tune.report({"loss": 1.0 / step})


def test_time_budget_stops_running_trials_and_the_plain_table_is_printed(cluster, tmp_path,
                                                                          capsys):
    grid = tune.Tuner(
        tune.with_resources(forever, QUARTER),
        param_space={"x": tune.grid_search([1, 2, 3])},
        tune_config=tune.TuneConfig(metric="loss", mode="min", time_budget_s=3,
                                    max_concurrent_trials=2),  # the third may never start
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="budget", verbose=1,
                                  progress_interval_s=0.5)).fit()
    assert grid.num_terminated == 3 and grid.num_errors == 0   # never-ending trials, stopped
    out = capsys.readouterr().out
    assert "time_budget_s of 3 s passed" in out
    assert out.count("== Tune status: 3 trials") >= 2 and "\x1b[" not in out  # plain blocks
    assert "Tune finished in" in out
