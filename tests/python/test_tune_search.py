"""airt.tune without a cluster: search spaces, search algorithms, the schedulers' decisions on
scripted results, the progress table's plain mode, the plot, and the result grid."""

import io
import json
import os
import random
import types

import pytest

from airt import tune
from airt.tune import experiment as ex
from airt.tune import progress


def _draw(space, n=1, seed=0):
    g = tune.BasicVariantGenerator(random_state=seed)
    g.set_search_properties("m", "min", space, num_samples=n)
    out = []
    while True:
        c = g.suggest(f"t{len(out)}")
        if c == tune.Searcher.FINISHED:
            return out
        out.append(c)


def test_every_search_space_samples_within_its_bounds():
    space = {
        "u": tune.uniform(-1, 1), "qu": tune.quniform(0, 1, 0.25),
        "lu": tune.loguniform(1e-4, 1e-1), "qlu": tune.qloguniform(1e-3, 1, 1e-3),
        "ri": tune.randint(0, 5), "qri": tune.qrandint(0, 20, 5), "rn": tune.randn(10, 0.1),
        "ch": tune.choice(["a", "b"]), "nested": {"deep": {"x": tune.uniform(2, 3)}},
        "fn": tune.sample_from(lambda spec: spec.config.ri * 2), "const": 7,
    }
    configs = _draw(space, n=200)
    assert len(configs) == 200
    for c in configs:
        assert -1 <= c["u"] <= 1
        assert c["qu"] in (0, 0.25, 0.5, 0.75, 1.0)
        assert 1e-4 <= c["lu"] <= 1e-1
        assert 1e-3 <= c["qlu"] <= 1 and abs(round(c["qlu"] / 1e-3) * 1e-3 - c["qlu"]) < 1e-9
        assert c["ri"] in range(0, 5)          # randint: upper exclusive
        assert c["qri"] in (0, 5, 10, 15, 20)  # qrandint: upper inclusive
        assert 9 < c["rn"] < 11
        assert c["ch"] in ("a", "b")
        assert 2 <= c["nested"]["deep"]["x"] <= 3
        assert c["fn"] == c["ri"] * 2 and c["const"] == 7
    assert {c["ri"] for c in configs} == set(range(5))
    assert {c["qri"] for c in configs} == {0, 5, 10, 15, 20}


def test_bad_search_spaces_are_rejected():
    with pytest.raises(ValueError):
        tune.uniform(1, 0)
    with pytest.raises(ValueError):
        tune.loguniform(0, 1)
    with pytest.raises(ValueError):
        tune.choice([])
    with pytest.raises(TypeError):
        tune.sample_from(3)


def test_grid_search_crosses_grids_num_samples_times_and_seeds_repeat():
    space = {"a": tune.grid_search([1, 2, 3]), "b": {"c": tune.grid_search(["x", "y"])},
             "r": tune.uniform(0, 1)}
    configs = _draw(space, n=2, seed=5)
    assert len(configs) == 12
    pairs = [(c["a"], c["b"]["c"]) for c in configs]
    assert sorted(set(pairs)) == [(a, b) for a in (1, 2, 3) for b in ("x", "y")]
    assert pairs[:6] == pairs[6:]
    assert [c["r"] for c in configs] == [c["r"] for c in _draw(space, n=2, seed=5)]
    assert [c["r"] for c in configs] != [c["r"] for c in _draw(space, n=2, seed=6)]


def test_points_to_evaluate_come_first_and_are_completed_from_the_space():
    g = tune.BasicVariantGenerator(points_to_evaluate=[{"a": 0.5}], random_state=1)
    g.set_search_properties("m", "min", {"a": tune.uniform(0, 0.1), "b": tune.choice([1])},
                            num_samples=2)
    first = g.suggest("t0")
    assert first == {"a": 0.5, "b": 1}
    assert g.suggest("t1")["a"] <= 0.1


def test_concurrency_limiter_holds_back_until_a_trial_completes():
    g = tune.BasicVariantGenerator(random_state=0)
    limited = tune.ConcurrencyLimiter(g, max_concurrent=2)
    limited.set_search_properties("m", "min", {"x": tune.uniform(0, 1)}, num_samples=5)
    assert isinstance(limited.suggest("a"), dict)
    assert isinstance(limited.suggest("b"), dict)
    assert limited.suggest("c") is None
    limited.on_trial_complete("a", {"m": 1})
    assert isinstance(limited.suggest("c"), dict)
    with pytest.raises(ValueError):
        tune.ConcurrencyLimiter(g, max_concurrent=0)


def test_optuna_search_samples_the_space_and_learns_from_results():
    space = {"x": tune.uniform(-10, 10), "n": tune.randint(1, 4), "opt": tune.choice(["a", "b"]),
             "lr": tune.loguniform(1e-4, 1e-1), "fixed": 3}
    search = tune.OptunaSearch(metric="loss", mode="min", seed=0)
    search.set_search_properties(None, None, space)
    seen = []
    for i in range(30):
        config = search.suggest(f"t{i}")
        assert -10 <= config["x"] <= 10 and config["n"] in (1, 2, 3)
        assert config["opt"] in ("a", "b") and config["fixed"] == 3
        search.on_trial_result(f"t{i}", {"loss": (config["x"] - 3) ** 2,
                                         "training_iteration": 1})
        search.on_trial_complete(f"t{i}", {"loss": (config["x"] - 3) ** 2})
        seen.append(config["x"])
    # TPE after its 10 random start-up trials goes near the optimum at 3.
    assert min(abs(x - 3) for x in seen[10:]) < min(abs(x - 3) for x in seen[:10]) + 0.5
    assert min(abs(x - 3) for x in seen) < 1.0
    with pytest.raises(ValueError):
        tune.OptunaSearch(metric="l", mode="min").set_search_properties(
            None, None, {"g": tune.grid_search([1, 2])})


def test_optuna_search_takes_an_optuna_sampler_and_failed_trials():
    import optuna
    search = tune.OptunaSearch(space={"x": tune.quniform(0, 1, 0.5)}, metric="m", mode="max",
                               sampler=optuna.samplers.RandomSampler(seed=1))
    search.set_search_properties(None, None, {})
    config = search.suggest("a")
    assert config["x"] in (0.0, 0.5, 1.0)
    search.on_trial_complete("a", error=True)
    assert search._study.trials[0].state == optuna.trial.TrialState.FAIL


def _trial(trial_id, config=None):
    return types.SimpleNamespace(trial_id=trial_id, config=config or {}, checkpoint=None)


def test_asha_from_python_stops_below_the_rung_quantile():
    asha = tune.ASHAScheduler(metric="loss", mode="min", max_t=9, grace_period=1,
                              reduction_factor=3)
    a, b, c = _trial("a"), _trial("b"), _trial("c")
    for t in (a, b, c):
        asha.on_trial_add(t)
    assert asha.on_trial_result(a, {"training_iteration": 1, "loss": 1.0}) == "CONTINUE"
    assert asha.on_trial_result(b, {"training_iteration": 1, "loss": 2.0}) == "STOP"
    assert asha.on_trial_result(c, {"training_iteration": 1, "loss": 0.5}) == "CONTINUE"
    assert asha.on_trial_result(c, {"training_iteration": 9, "loss": 0.5}) == "STOP"
    with pytest.raises(ValueError):
        tune.ASHAScheduler(reduction_factor=1)


def test_hyperband_from_python_pauses_and_resumes_through_actions():
    hb = tune.HyperBandScheduler(metric="m", mode="max", max_t=9, reduction_factor=3)
    trials = [_trial(f"t{i}") for i in range(8)]
    for t in trials:
        hb.on_trial_add(t)
    second = trials[3:]  # the bracket of 5 trials running 3 iterations first
    decisions = [hb.on_trial_result(t, {"training_iteration": 3, "m": float(i)})
                 for i, t in enumerate(second)]
    assert decisions[:4] == ["PAUSE"] * 4 and decisions[4] == "CONTINUE"  # the best goes on
    actions = dict(hb.take_actions())
    assert actions == {"t3": "STOP", "t4": "STOP", "t5": "STOP", "t6": "CONTINUE"}


def test_median_stopping_from_python():
    rule = tune.MedianStoppingRule(metric="loss", mode="min", grace_period=0,
                                   min_samples_required=2)
    for name, loss in (("a", 1.0), ("b", 2.0)):
        rule.on_trial_add(_trial(name))
        assert rule.on_trial_result(_trial(name), {"time_total_s": 1, "loss": loss}) == \
            "CONTINUE"
    assert rule.on_trial_result(_trial("c"), {"time_total_s": 1, "loss": 9.0}) == "STOP"


def test_fifo_continues_and_schedulers_need_metric_and_mode():
    fifo = tune.FIFOScheduler()
    assert fifo.on_trial_result(_trial("a"), {"training_iteration": 1}) == "CONTINUE"
    with pytest.raises(ValueError):
        tune.ASHAScheduler().on_trial_add(_trial("a"))


def test_pbt_exploits_a_top_trial_and_explores_its_config():
    pbt = tune.PopulationBasedTraining(
        time_attr="training_iteration", metric="score", mode="max", perturbation_interval=2,
        hyperparam_mutations={"lr": tune.uniform(0.1, 1.0), "bs": [16, 32, 64]},
        quantile_fraction=0.25, resample_probability=0.0, seed=3)
    trials = [_trial(f"t{i}", {"lr": 0.5, "bs": 32}) for i in range(4)]
    for t in trials:
        pbt.on_trial_add(t)
        t.checkpoint = tune.Checkpoint(f"/ckpt/{t.trial_id}")
    for step in (1, 2):
        for i, t in enumerate(trials):
            pbt.on_trial_result(t, {"training_iteration": step, "score": float(i)})
    exploits = pbt.take_exploits()
    assert [(e[0], e[2]) for e in exploits] == [("t0", "t3")]
    new = exploits[0][1]
    assert new["lr"] in (0.5 * 1.2, 0.5 * 0.8) and new["bs"] in (16, 64)
    assert pbt.take_exploits() == []
    with pytest.raises(ValueError):
        tune.PopulationBasedTraining(metric="s", mode="max")


def _finished_trials(root, n=3, iters=(5, 2, 5)):
    trials = []
    for i in range(n):
        t = ex.Trial(f"id{i}", "train", {"lr": 0.1 * (i + 1)}, str(root), i + 1)
        t.status = ex.TERMINATED
        t.stopped_early = iters[i] < 5
        for step in range(1, iters[i] + 1):
            r = {"loss": (i + 1) / step, "training_iteration": step, "time_total_s": step}
            t.write_result(r)
            t.results.append(r)
            t.last_result = r
        t.close()
        trials.append(t)
    return trials


def test_progress_table_plain_mode_prints_periodic_blocks(tmp_path):
    out = io.StringIO()
    table = progress.ProgressTable("loss", "min", out=out, tty=False, interval_s=3600)
    trials = _finished_trials(tmp_path)
    assert table.maybe_print(trials)              # the first block
    assert not table.maybe_print(trials)          # not before the interval
    assert table.maybe_print(trials, force=True)
    text = out.getvalue()
    assert "\x1b[" not in text                    # no cursor movement off a terminal
    assert text.count("== Tune status: 3 trials, 3 TERMINATED") == 2
    assert "train_id1" in text and "TERMINATED (stopped early)" in text and "lr" in text
    tty = io.StringIO()
    live = progress.ProgressTable("loss", "min", out=tty, tty=True, interval_s=0)
    live.maybe_print(trials)
    live.maybe_print(trials)
    assert "\x1b[" in tty.getvalue()              # redrawn in place on a terminal


def test_plot_is_written_and_folders_hold_results(tmp_path):
    trials = _finished_trials(tmp_path)
    path = progress.plot(trials, "loss", str(tmp_path / "loss.png"))
    assert path and os.path.getsize(path) > 1000
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    lines = open(os.path.join(trials[0].local_path, "result.json")).read().splitlines()
    assert [json.loads(l)["training_iteration"] for l in lines] == [1, 2, 3, 4, 5]
    csv_lines = open(os.path.join(trials[0].local_path, "progress.csv")).read().splitlines()
    assert csv_lines[0].split(",")[:2] == ["loss", "training_iteration"] and len(csv_lines) == 6
    assert json.load(open(os.path.join(trials[0].local_path, "params.json"))) == {"lr": 0.1}


def test_result_grid_best_result_scopes_and_dataframe(tmp_path):
    trials = _finished_trials(tmp_path)
    grid = tune.ResultGrid(trials, str(tmp_path), "loss", "min")
    assert len(grid) == 3 and grid.num_terminated == 3 and grid.num_errors == 0
    assert grid.get_best_result().config == {"lr": 0.1}                      # last: 0.2
    assert grid.get_best_result(scope="all").config == {"lr": 0.1}
    assert grid.get_best_result("loss", "max", scope="avg").config == {"lr": 0.2}  # 1.5
    df = grid.get_dataframe()
    assert list(df["config/lr"]) == [0.1, 0.2, 0.30000000000000004]
    assert grid[1].metrics_dataframe["training_iteration"].tolist() == [1, 2]
    with pytest.raises(ValueError):
        grid.get_best_result(scope="median")
