"""Sweeps on a local cluster whose schedulers pause trials or outlive the tuner:
MedianStoppingRule(hard_stop=False), synchronous PBT, and Tuner.restore continuing ASHA's rungs.
Trials wait on each other through files (never on wall time), so the order the schedulers see
does not depend on how fast a loaded machine starts the trials' actors."""

import json
import os
import tempfile
import time

import pytest

from airt import tune

QUARTER = {"CPU": 0.25}


def _wait_for(path, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)


class Launches(tune.Callback):
    def __init__(self):
        self.starts, self.results, self.by_id = {}, [], []

    def on_trial_start(self, iteration, trials, trial, **info):
        self.starts[trial.config["name"]] = self.starts.get(trial.config["name"], 0) + 1

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.results.append((trial.config["name"], result["training_iteration"]))
        self.by_id.append((trial.trial_id, result["training_iteration"]))


def judged(config):
    """Good trials mark each step the tuner took; the bad one reports step k only after
    every good trial's step k was taken, so the median rule has them to compare with."""
    for step in range(1, 7):
        if config["name"] == "bad":
            for good in ("good1", "good2"):
                _wait_for(os.path.join(config["marks"], f"{good}-{step}"))
        tune.report({"loss": config["loss"], "step": step})
        open(os.path.join(config["marks"], f"{config['name']}-{step}"), "w").close()


@pytest.mark.parametrize("hard_stop", [True, False])
def test_median_stopping_without_hard_stop_pauses_the_poor_trial_until_the_others_end(
        cluster, tmp_path, hard_stop):
    marks = tmp_path / "marks"
    marks.mkdir()
    launches = Launches()
    rule = tune.MedianStoppingRule(time_attr="training_iteration", grace_period=0,
                                   min_samples_required=1, hard_stop=hard_stop)
    grid = tune.Tuner(
        tune.with_resources(judged, QUARTER),
        param_space={"name": tune.grid_search(["good1", "good2", "bad"]), "marks": str(marks),
                     "loss": tune.sample_from(lambda spec: 9.0 if spec.config.name == "bad"
                                              else 1.0)},
        tune_config=tune.TuneConfig(metric="loss", mode="min", scheduler=rule),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name=f"median{hard_stop}",
                                  verbose=0, callbacks=[launches])).fit()
    assert grid.num_errors == 0, grid.errors
    bad = [r for r in grid if r.config["name"] == "bad"][0]
    steps = [json.loads(l)["step"] for l in open(os.path.join(bad.path, "result.json"))]
    if hard_stop:
        assert steps == [1] and launches.starts["bad"] == 1
        return
    # Paused at its first step, resumed (from the start: it has no checkpoint) once both good
    # trials had ended, then run to its end without being judged again.
    assert steps == list(range(1, 7)) and launches.starts["bad"] == 2
    first_bad = launches.results.index(("bad", 1))
    last_good = max(i for i, (name, _) in enumerate(launches.results) if name != "bad")
    assert launches.results[first_bad + 1:].count(("bad", 1)) == 1
    assert launches.results.index(("bad", 2)) > last_good


def synced(config):
    """Checkpoints every step. The strong trial is slow (it waits for the weak one's mark of
    the same step), so an asynchronous PBT would rank the weak one ahead of it."""
    state = {"score": 0.0}
    if tune.get_checkpoint():
        with open(os.path.join(tune.get_checkpoint().path, "state.json")) as f:
            state = json.load(f)
    start = tune.get_context().get_trial_id()
    for _ in range(9):
        state["step"] = state.get("step", 0) + 1
        if config["lr"] > 0.5:
            _wait_for(os.path.join(config["marks"], f"weak-{state['step']}"), timeout=2.0)
        state["score"] += config["lr"]
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump(state, f)
            tune.report({"score": state["score"], "start": start},
                        checkpoint=tune.Checkpoint.from_directory(d))
        if config["lr"] < 0.5:
            open(os.path.join(config["marks"], f"weak-{state['step']}"), "w").close()


def test_synchronous_pbt_exploits_only_once_every_trial_reached_the_interval(cluster, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    launches = Launches()
    pbt = tune.PopulationBasedTraining(time_attr="training_iteration", perturbation_interval=3,
                                       hyperparam_mutations={"lr": [0.1, 1.0]},
                                       quantile_fraction=0.5, resample_probability=0.0,
                                       seed=1, synch=True)
    grid = tune.Tuner(
        tune.with_resources(synced, QUARTER),
        param_space={"lr": tune.grid_search([0.1, 1.0]), "marks": str(marks),
                     "name": tune.sample_from(lambda spec: str(spec.config.lr))},
        tune_config=tune.TuneConfig(metric="score", mode="max", scheduler=pbt),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="synch", verbose=0,
                                  callbacks=[launches],
                                  stop={"training_iteration": 9})).fit()
    assert grid.num_errors == 0, grid.errors
    assert pbt.num_perturbations >= 1
    # No trial reported past a synchronisation point (3, 6) before every trial reached it.
    results = launches.by_id   # by trial id: an exploit changes a trial's config
    for point in (3, 6):
        reached = {trial_id: i for i, (trial_id, it) in enumerate(results) if it == point}
        assert len(reached) == 2, results
        assert all(i > max(reached.values()) for i, (_, it) in enumerate(results)
                   if it > point), results
    weak = [r for r in grid if r.path.endswith("00001")][0]   # lr 0.1, first in the grid
    scores = [json.loads(l)["score"] for l in open(os.path.join(weak.path, "result.json"))]
    assert max(b - a for a, b in zip(scores, scores[1:])) > 1.0   # took the strong checkpoint


def sequential(config):
    if config["x"] == 3 and not os.path.exists(config["marker"]):
        open(config["marker"], "w").close()
        raise RuntimeError("the sweep is interrupted here")
    for step in range(1, 9):
        tune.report({"loss": 1.0 + config["x"] * 10.0 if config["x"] == 3 else 1.0 / step})


def test_restore_continues_asha_with_the_rungs_of_the_interrupted_sweep(cluster, tmp_path):
    marker = str(tmp_path / "interrupted")
    space = {"x": tune.grid_search([0, 1, 2, 3]), "marker": marker}
    asha = tune.ASHAScheduler(max_t=8, grace_period=1, reduction_factor=2)
    tuner = tune.Tuner(
        tune.with_resources(sequential, QUARTER), param_space=space,
        tune_config=tune.TuneConfig(metric="loss", mode="min", scheduler=asha,
                                    max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="asha", verbose=0,
                                  failure_config=tune.FailureConfig(fail_fast="raise")))
    with pytest.raises(tune.TuneError, match="interrupted"):
        tuner.fit()
    path = str(tmp_path / "asha")
    assert os.path.exists(os.path.join(path, "scheduler-state.pkl"))
    grid = tune.Tuner.restore(path, tune.with_resources(sequential, QUARTER),
                              resume_errored=True).fit()
    assert grid.num_errors == 0, grid.errors
    by_x = {r.config["x"]: r for r in grid}
    assert [by_x[x].metrics["training_iteration"] for x in (0, 1, 2)] == [8, 8, 8]
    # Alone at the first rung, a fresh ASHA would let x=3 run to max_t; the restored one
    # compares it with the three trials before the interruption and stops it there.
    assert by_x[3].metrics["training_iteration"] == 1
