"""Trial schedulers with Ray Tune's names. FIFO, ASHA, HyperBand and the median stopping rule
decide in C++ (tune/, through airt._tune_core: the same code the C++ tuner runs); PBT is in
pbt.py. A scheduler answers each result with CONTINUE, PAUSE or STOP."""

from airt import _tune_core
from airt.tune._objective import Objective


class TrialScheduler(Objective):
    """The base (Ray's ray.tune.schedulers.TrialScheduler)."""

    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"
    NOOP = "NOOP"


    def set_search_properties(self, metric, mode, **spec):
        if metric and self._metric and metric != self._metric:
            return False
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        return True

    def on_trial_add(self, trial):
        pass

    def on_trial_result(self, trial, result):
        return self.CONTINUE

    def on_trial_complete(self, trial, result):
        pass

    def on_trial_error(self, trial):
        self.on_trial_remove(trial)

    def on_trial_remove(self, trial):
        pass

    def on_search_finished(self):
        pass

    def set_waiting(self, count):
        """How many trials wait to run (PENDING); the tuner tells before each result and each
        take_actions. MedianStoppingRule's time-slicing yields only while some wait."""

    def take_actions(self):
        """[(trial_id, CONTINUE or STOP)]: decisions about paused trials."""
        return []

    def take_exploits(self):
        """[(trial_id, new_config, donor_trial_id)]: PBT's exploit steps."""
        return []


class _CoreScheduler(TrialScheduler):
    """A scheduler whose decisions are the C++ core's; made on first use, once metric and
    mode are known. It pickles (for Tuner.restore) as the calls it got: a restored one replays
    them into a new core, which decides the same (the core is deterministic, its bracket draws
    seeded), so its rungs and brackets are those of the interrupted sweep."""

    def __init__(self, time_attr, metric, mode):
        super().__init__(metric, mode)
        self._time_attr = time_attr
        self._core = None
        self._calls = []      # [(method, args)] made on the core, in order
        self._added = set()   # trials added and not yet complete or removed

    def _make(self):
        raise NotImplementedError

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_core"] = None  # the C++ state does not pickle: _calls rebuild it
        return state

    def _ensure(self):
        if self._core is None:
            if self._metric is None or self._mode is None:
                raise ValueError(f"{type(self).__name__} needs metric and mode (here or in "
                                 "TuneConfig)")
            self._core = self._replayed(self._make())
        return self._core

    def _replayed(self, core):
        for method, args in self._calls:
            getattr(core, method)(*args)
        core.take_actions()  # the interrupted sweep applied them already
        return core

    def _call(self, method, *args):
        core = self._ensure()
        self._calls.append((method, args))
        return getattr(core, method)(*args)

    def set_search_properties(self, metric, mode, **spec):
        ok = super().set_search_properties(metric, mode, **spec)
        if ok and self._metric and self._mode:
            self._ensure()
        return ok

    def on_trial_add(self, trial):
        if trial.trial_id in self._added:
            return  # a restored sweep adds its unfinished trials again
        self._added.add(trial.trial_id)
        self._call("on_trial_add", trial.trial_id)

    def _metric_of(self, result):
        value = result.get(self._metric)
        return None if value is None else float(value)

    def on_trial_result(self, trial, result):
        if self._time_attr not in result:
            return self.CONTINUE
        return self._call("on_trial_result", trial.trial_id, float(result[self._time_attr]),
                          self._metric_of(result))

    def on_trial_complete(self, trial, result):
        result = result or {}
        time = result.get(self._time_attr)
        self._added.discard(trial.trial_id)
        self._call("on_trial_complete", trial.trial_id, None if time is None else float(time),
                   self._metric_of(result))

    def on_trial_remove(self, trial):
        self._added.discard(trial.trial_id)
        self._call("on_trial_remove", trial.trial_id)

    def on_search_finished(self):
        self._call("on_search_finished")

    def set_waiting(self, count):
        if count != getattr(self, "_waiting", 0):  # recorded (for a restore) when it changes
            self._waiting = count
            self._call("set_waiting", int(count))

    def take_actions(self):
        return self._ensure().take_actions()


class FIFOScheduler(_CoreScheduler):
    """Runs every trial to its end."""

    def __init__(self):
        super().__init__("training_iteration", None, None)

    def _ensure(self):
        if self._core is None:
            self._core = self._replayed(_tune_core.fifo())
        return self._core

    def set_search_properties(self, metric, mode, **spec):
        return True

    def _call(self, method, *args):
        return getattr(self._ensure(), method)(*args)  # no state to restore: nothing kept


class AsyncHyperBandScheduler(_CoreScheduler):
    """ASHA (Li et al. 2020), asynchronous: a trial reaching a rung (grace_period ·
    reduction_factor^k) is stopped when its metric is below the rung's 1 - 1/reduction_factor
    quantile so far; a trial reaching max_t is stopped as done."""

    def __init__(self, time_attr="training_iteration", metric=None, mode=None, max_t=100,
                 grace_period=1, reduction_factor=4, brackets=1, stop_last_trials=True,
                 seed=0):
        super().__init__(time_attr, metric, mode)
        self._options = dict(max_t=max_t, grace_period=grace_period,
                             reduction_factor=reduction_factor, brackets=brackets,
                             stop_last_trials=stop_last_trials, seed=seed)
        if metric and mode:
            self._ensure()
        else:  # check the options now, as Ray's constructor does
            _tune_core.asha(mode="min", **self._options)

    def _make(self):
        return _tune_core.asha(mode=self._mode, **self._options)


ASHAScheduler = AsyncHyperBandScheduler


class HyperBandScheduler(_CoreScheduler):
    """Synchronous HyperBand (Li et al. 2017): brackets of trials paused at each milestone until
    the bracket completes it, then the best 1/reduction_factor go on. Paused trials free their
    actors while they wait and resume from their latest checkpoints."""

    def __init__(self, time_attr="training_iteration", metric=None, mode=None, max_t=81,
                 reduction_factor=3, stop_last_trials=True):
        super().__init__(time_attr, metric, mode)
        self._options = dict(max_t=max_t, reduction_factor=reduction_factor,
                             stop_last_trials=stop_last_trials)
        _tune_core.hyperband(mode="min", **self._options)

    def _make(self):
        return _tune_core.hyperband(mode=self._mode, **self._options)


class MedianStoppingRule(_CoreScheduler):
    """Stops a trial past grace_period whose best result is worse than the median of the other
    trials' running means at the same time. hard_stop=False pauses it instead (Ray's): it goes
    on first-in-first-out, never judged again, once no other trial is running or waiting.
    min_time_slice (Ray's): a trial that cannot be judged yet (too few samples at its time)
    while other trials wait yields to them (PAUSE) when it ran more than min_time_slice since it
    last yielded; it goes on (from its latest checkpoint) once none waits."""

    def __init__(self, time_attr="time_total_s", metric=None, mode=None, grace_period=60.0,
                 min_samples_required=3, min_time_slice=0, hard_stop=True):
        super().__init__(time_attr, metric, mode)
        self._options = dict(grace_period=grace_period,
                             min_samples_required=min_samples_required,
                             min_time_slice=min_time_slice)
        self._hard_stop = hard_stop
        self._live = set()       # added, not yet complete
        self._set_aside = []     # hard_stop=False: paused by the rule, in pause order
        self._judged = set()     # hard_stop=False: trials the rule paused once (FIFO after)
        _tune_core.median_stopping(mode="min", **self._options)

    def _make(self):
        return _tune_core.median_stopping(mode=self._mode, **self._options)

    def on_trial_add(self, trial):
        self._live.add(trial.trial_id)
        super().on_trial_add(trial)

    def on_trial_result(self, trial, result):
        if trial.trial_id in self._judged:
            return self.CONTINUE
        decision = super().on_trial_result(trial, result)
        if decision == self.STOP and not self._hard_stop:
            self._judged.add(trial.trial_id)
            self._set_aside.append(trial.trial_id)
            return self.PAUSE
        return decision

    def on_trial_complete(self, trial, result):
        self._forget(trial.trial_id)
        super().on_trial_complete(trial, result)

    def on_trial_remove(self, trial):
        self._forget(trial.trial_id)
        super().on_trial_remove(trial)

    def _forget(self, trial_id):
        self._live.discard(trial_id)
        if trial_id in self._set_aside:
            self._set_aside.remove(trial_id)

    def take_actions(self):
        actions = super().take_actions()
        if self._set_aside and self._live <= set(self._set_aside):
            actions += [(t, self.CONTINUE) for t in self._set_aside]
            self._set_aside = []
        return actions
