"""PopulationBasedTraining, as Ray Tune's: every perturbation_interval of time_attr, a trial in
the bottom quantile_fraction clones the config and checkpoint of a trial in the top one (exploit)
and perturbs or resamples the hyperparameters of hyperparam_mutations (explore).

Asynchronous by default: a trial reaching its interval is compared with the others' latest
scores at once. synch=True: a trial reaching the next synchronisation point is paused until every
live trial has reached it; then all are ranked together, the bottom ones exploit the top ones,
and every paused trial resumes (from its latest checkpoint, or the donor's)."""

import copy
import math
import random

from airt.tune import sample
from airt.tune.schedulers import TrialScheduler


class PopulationBasedTraining(TrialScheduler):
    def __init__(self, time_attr="time_total_s", metric=None, mode=None,
                 perturbation_interval=60.0, burn_in_period=0.0, hyperparam_mutations=None,
                 quantile_fraction=0.25, resample_probability=0.25,
                 perturbation_factors=(1.2, 0.8), custom_explore_fn=None, log_config=True,
                 require_attrs=True, synch=False, seed=None):
        super().__init__(metric, mode)
        if not hyperparam_mutations and not custom_explore_fn:
            raise ValueError("PopulationBasedTraining needs hyperparam_mutations or "
                             "custom_explore_fn")
        if not 0 <= quantile_fraction <= 0.5:
            raise ValueError("quantile_fraction must be in [0, 0.5]")
        if perturbation_interval <= 0:
            raise ValueError("perturbation_interval must be positive")
        self._time_attr = time_attr
        self._interval = perturbation_interval
        self._burn_in = burn_in_period
        self._mutations = hyperparam_mutations or {}
        self._quantile = quantile_fraction
        self._resample = resample_probability
        self._factors = perturbation_factors
        self._explore_fn = custom_explore_fn
        self._rng = random.Random(seed)
        self._last_perturbation = {}
        self._last_score = {}
        self._trials = {}
        self._exploits = []
        self._synch = synch
        self._next_sync = perturbation_interval
        self._last_train_time = {}   # synch: each trial's time at its latest scored result
        self._paused = []            # synch: trials waiting for the others, in pause order
        self._actions = []
        self.num_perturbations = 0

    def __getstate__(self):
        state = dict(self.__dict__)  # trials by id: a restored sweep attaches its own objects
        state["_trials"] = {trial_id: None for trial_id in self._trials}
        return state

    def on_trial_add(self, trial):
        known = trial.trial_id in self._trials
        self._trials[trial.trial_id] = trial
        if not known:  # a restored sweep adds its trials again: their state is kept
            self._last_perturbation[trial.trial_id] = 0.0

    def on_trial_result(self, trial, result):
        if self._time_attr not in result or self._metric not in result:
            return self.CONTINUE
        time = result[self._time_attr]
        value = result[self._metric]
        self._last_score[trial.trial_id] = value if self._mode == "max" else -value
        if time < self._burn_in:
            return self.CONTINUE
        if time - self._last_perturbation.get(trial.trial_id, 0.0) < self._interval:
            return self.CONTINUE
        if self._synch:
            if time < self._next_sync:
                return self.CONTINUE  # not at the synchronisation point yet
            self._last_train_time[trial.trial_id] = time
            self._paused.append(trial.trial_id)
            if self._sync(current=trial.trial_id):
                return self.CONTINUE  # the last to arrive goes on (unless exploited)
            return self.PAUSE
        self._last_perturbation[trial.trial_id] = time
        lower, upper = self._quantiles()
        if trial.trial_id in lower:
            self._exploit(trial.trial_id, upper)
        return self.CONTINUE

    def _exploit(self, trial_id, upper):
        donors = [t for t in upper if self._trials[t].checkpoint is not None]
        if donors:
            donor = self._rng.choice(donors)
            config = self._explore(self._trials[donor].config)
            self._exploits.append((trial_id, config, donor))
            self.num_perturbations += 1

    def _sync(self, current=None):
        """synch: once every live trial reached the synchronisation point, ranks them, queues
        the exploits of the bottom ones and resumes the paused ones but `current` (which goes
        on by itself); whether it did."""
        if not self._paused:
            return False
        live = self._attached()
        if any(self._last_train_time.get(t, -math.inf) < self._next_sync for t in live):
            return False
        lower, upper = self._quantiles()
        for trial_id in live:
            self._last_perturbation[trial_id] = self._last_train_time[trial_id]
        for trial_id in lower:
            self._exploit(trial_id, upper)
        exploited = {e[0] for e in self._exploits}
        self._next_sync = max(self._next_sync + self._interval,
                              max((self._last_train_time[t] for t in live), default=0))
        waiting, self._paused = self._paused, []
        for trial_id in waiting:
            if trial_id != current and trial_id not in exploited:
                self._actions.append((trial_id, self.CONTINUE))
        return True

    def _attached(self):
        """The live trials (a restored scheduler's are those its sweep added again)."""
        return [t for t, trial in self._trials.items() if trial is not None]

    def _quantiles(self):
        live = set(self._attached())
        scored = [t for t in self._last_score if t in live]
        if len(scored) <= 1:
            return [], []
        scored.sort(key=lambda t: self._last_score[t])
        n = int(math.ceil(len(scored) * self._quantile))
        n = min(n, len(scored) // 2)
        if n == 0:
            return [], []
        return scored[:n], scored[-n:]

    def _explore(self, config):
        new = copy.deepcopy(config)
        _mutate(new, self._mutations, self._rng, self._resample, self._factors)
        if self._explore_fn:
            new = self._explore_fn(new)
        return new

    def on_trial_complete(self, trial, result):
        self._trials.pop(trial.trial_id, None)
        self._last_score.pop(trial.trial_id, None)
        self._last_train_time.pop(trial.trial_id, None)
        if trial.trial_id in self._paused:
            self._paused.remove(trial.trial_id)
        if self._synch:
            self._sync()  # the trials waiting for this one go on

    def take_actions(self):
        out, self._actions = self._actions, []
        return out

    def on_trial_remove(self, trial):
        self.on_trial_complete(trial, None)

    def take_exploits(self):
        out, self._exploits = self._exploits, []
        return out


def _mutate(config, mutations, rng, resample_probability, factors):
    for key, spec in mutations.items():
        if isinstance(spec, dict) and not isinstance(spec, sample.Domain):
            _mutate(config.setdefault(key, {}), spec, rng, resample_probability, factors)
            continue
        value = config.get(key)
        if isinstance(spec, (list, tuple)):
            if value not in spec or rng.random() < resample_probability:
                config[key] = rng.choice(list(spec))
            else:
                i = list(spec).index(value) + rng.choice([-1, 1])
                config[key] = spec[min(max(i, 0), len(spec) - 1)]
        elif rng.random() < resample_probability or value is None:
            config[key] = spec.sample(random_state=rng) if isinstance(spec, sample.Domain) \
                else spec()
        else:
            new = value * rng.choice(list(factors))
            config[key] = int(new) if isinstance(value, int) else new
