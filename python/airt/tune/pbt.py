"""PopulationBasedTraining, as Ray Tune's (asynchronous): every perturbation_interval of
time_attr, a trial in the bottom quantile_fraction clones the config and checkpoint of a trial in
the top one (exploit) and perturbs or resamples the hyperparameters of hyperparam_mutations
(explore)."""

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
        if synch:
            from airt.exceptions import UnimplementedError
            raise UnimplementedError("PopulationBasedTraining(synch=True) is not built: airt's "
                                     "PBT is the asynchronous one")
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
        self.num_perturbations = 0

    def on_trial_add(self, trial):
        self._trials[trial.trial_id] = trial
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
        self._last_perturbation[trial.trial_id] = time
        lower, upper = self._quantiles()
        if trial.trial_id in lower:
            donors = [t for t in upper if self._trials[t].checkpoint is not None]
            if donors:
                donor = self._rng.choice(donors)
                config = self._explore(self._trials[donor].config)
                self._exploits.append((trial.trial_id, config, donor))
                self.num_perturbations += 1
        return self.CONTINUE

    def _quantiles(self):
        scored = [t for t in self._last_score if t in self._trials]
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
