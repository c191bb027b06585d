"""Schedulers driven by scripted results, without a cluster: MedianStoppingRule(hard_stop=False)
pausing, synchronous PBT, and schedulers pickled and restored as Tuner.restore does."""

import pickle
import types

import pytest

from airt import tune


def _trial(trial_id, config=None, checkpoint=None):
    return types.SimpleNamespace(trial_id=trial_id, config=config or {}, checkpoint=checkpoint)


def _median_rule(hard_stop):
    return tune.MedianStoppingRule(time_attr="training_iteration", metric="loss", mode="min",
                                   grace_period=0, min_samples_required=1, hard_stop=hard_stop)


def test_median_stopping_without_hard_stop_pauses_then_runs_the_trial_fifo():
    hard, soft = _median_rule(True), _median_rule(False)
    good, bad, other = _trial("good"), _trial("bad"), _trial("other")
    for rule in (hard, soft):
        for t in (good, bad, other):
            rule.on_trial_add(t)
        assert rule.on_trial_result(good, {"training_iteration": 1, "loss": 1.0}) == "CONTINUE"
    assert hard.on_trial_result(bad, {"training_iteration": 1, "loss": 5.0}) == "STOP"
    assert soft.on_trial_result(bad, {"training_iteration": 1, "loss": 5.0}) == "PAUSE"
    assert soft.take_actions() == []            # others still run or wait
    soft.on_trial_complete(good, {"training_iteration": 3, "loss": 1.0})
    assert soft.take_actions() == []            # "other" has not run yet
    soft.on_trial_complete(other, {"training_iteration": 3, "loss": 1.0})
    assert soft.take_actions() == [("bad", "CONTINUE")]
    # Resumed, it is never judged again: it runs to its end however poor its results.
    assert soft.on_trial_result(bad, {"training_iteration": 2, "loss": 50.0}) == "CONTINUE"
    assert soft.take_actions() == []


def _population(n, synch):
    pbt = tune.PopulationBasedTraining(
        time_attr="training_iteration", metric="score", mode="max", perturbation_interval=2,
        hyperparam_mutations={"lr": [0.1, 0.5, 1.0]}, quantile_fraction=0.25,
        resample_probability=0.0, seed=3, synch=synch)
    trials = [_trial(f"t{i}", {"lr": 0.5}, tune.Checkpoint(f"/ckpt/t{i}")) for i in range(n)]
    for t in trials:
        pbt.on_trial_add(t)
    return pbt, trials


def test_synchronous_pbt_waits_for_every_trial_before_exploiting():
    pbt, trials = _population(4, synch=True)
    for t in trials:
        assert pbt.on_trial_result(t, {"training_iteration": 1, "score": 0.0}) == "CONTINUE"
    # The first three reach the interval: paused, nothing exploited yet (asynchronous PBT
    # would rank t0 against the others' step-1 scores at once).
    for i, t in enumerate(trials[:3]):
        assert pbt.on_trial_result(t, {"training_iteration": 2, "score": float(i)}) == "PAUSE"
        assert pbt.take_exploits() == [] and pbt.take_actions() == []
    # The last one arrives: all are ranked together; t0 (the worst) takes t3's checkpoint and
    # the paused ones but t0 (relaunched by its exploit) go on.
    assert pbt.on_trial_result(trials[3], {"training_iteration": 2, "score": 3.0}) == "CONTINUE"
    assert [(e[0], e[2]) for e in pbt.take_exploits()] == [("t0", "t3")]
    assert sorted(pbt.take_actions()) == [("t1", "CONTINUE"), ("t2", "CONTINUE")]
    # The next synchronisation point is 2 intervals on: step 3 goes on, step 4 waits.
    assert pbt.on_trial_result(trials[1], {"training_iteration": 3, "score": 1.0}) == "CONTINUE"
    assert pbt.on_trial_result(trials[1], {"training_iteration": 4, "score": 1.0}) == "PAUSE"
    for t in (trials[0], trials[2]):
        assert pbt.on_trial_result(t, {"training_iteration": 4, "score": 9.0}) == "PAUSE"
    assert pbt.take_exploits() == [] and pbt.take_actions() == []   # t3 is behind
    # A trial that ends releases the ones waiting for it: t1 (now the worst) takes t2's
    # checkpoint, t0 and t2 go on.
    pbt.on_trial_complete(trials[3], {"training_iteration": 3, "score": 3.0})
    assert [(e[0], e[2]) for e in pbt.take_exploits()] == [("t1", "t2")]
    assert sorted(pbt.take_actions()) == [("t0", "CONTINUE"), ("t2", "CONTINUE")]


def test_a_restored_asha_keeps_its_rungs():
    asha = tune.ASHAScheduler(metric="loss", mode="min", max_t=9, grace_period=1,
                              reduction_factor=3)
    fresh = pickle.loads(pickle.dumps(asha))
    for name, loss in (("a", 1.0), ("b", 0.5)):
        asha.on_trial_add(_trial(name))
        asha.on_trial_result(_trial(name), {"training_iteration": 1, "loss": loss})
        asha.on_trial_complete(_trial(name), {"training_iteration": 1, "loss": loss})
    restored = pickle.loads(pickle.dumps(asha))
    for scheduler in (restored, fresh):
        scheduler.on_trial_add(_trial("c"))
        scheduler.on_trial_add(_trial("c"))   # added again by a restored sweep: no new trial
    # The restored rung holds a's and b's losses: c is below its quantile and stops; the
    # fresh scheduler has nothing to compare c with.
    assert restored.on_trial_result(_trial("c"), {"training_iteration": 1, "loss": 3.0}) == \
        "STOP"
    assert fresh.on_trial_result(_trial("c"), {"training_iteration": 1, "loss": 3.0}) == \
        "CONTINUE"


def test_a_restored_pbt_keeps_its_population():
    pbt, trials = _population(4, synch=False)
    for i, t in enumerate(trials[1:], start=1):
        pbt.on_trial_result(t, {"training_iteration": 2, "score": float(i)})
    pbt.take_exploits()
    restored = pickle.loads(pickle.dumps(pbt))
    again = [_trial(t.trial_id, t.config, t.checkpoint) for t in trials]
    for t in again:          # the restored sweep attaches its own trial objects
        restored.on_trial_add(t)
    # t0 reaches its interval last: ranked against the scores before the restore, it exploits.
    restored.on_trial_result(again[0], {"training_iteration": 2, "score": -1.0})
    assert [(e[0], e[2]) for e in restored.take_exploits()] == [("t0", "t3")]
    # Trials the restored sweep does not add again (ended meanwhile) are not ranked.
    restored = pickle.loads(pickle.dumps(pbt))
    restored.on_trial_add(again[0])
    restored.on_trial_result(again[0], {"training_iteration": 2, "score": -1.0})
    assert restored.take_exploits() == []


def test_median_stopping_min_time_slice_yields_an_unjudged_trial_to_waiting_ones():
    rule = tune.MedianStoppingRule(time_attr="training_iteration", metric="loss", mode="min",
                                   grace_period=0, min_samples_required=2, min_time_slice=2)
    a, b = _trial("a"), _trial("b")
    for t in (a, b):
        rule.on_trial_add(t)
    result = lambda it: {"training_iteration": it, "loss": 1.0}
    assert rule.on_trial_result(a, result(1)) == "CONTINUE"   # nobody waits: runs on
    rule.set_waiting(1)
    assert rule.on_trial_result(a, result(2)) == "PAUSE"      # too few samples, b waits
    assert rule.take_actions() == []                          # b still waits
    rule.set_waiting(0)
    assert rule.take_actions() == [("a", "CONTINUE")]         # b started: a goes on
    rule.set_waiting(1)
    assert rule.on_trial_result(a, result(3)) == "CONTINUE"   # within the slice (2 since 2)
    assert rule.on_trial_result(a, result(4)) == "CONTINUE"
    assert rule.on_trial_result(a, result(5)) == "PAUSE"
    # Pickled as Tuner.restore saves it: the restored rule replays the calls, set_waiting too.
    restored = pickle.loads(pickle.dumps(rule))
    restored.set_waiting(0)
    assert restored.take_actions() == [("a", "CONTINUE")]
    with pytest.raises(ValueError):
        tune.MedianStoppingRule(min_time_slice=-1)
