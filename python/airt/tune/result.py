"""What fit() returns: a ResultGrid of Results, as Ray Tune's."""

import math
import os

from airt.tune.experiment import ERROR, TERMINATED
from airt.tune.trainable import Checkpoint


class TuneError(Exception):
    """A trial's failure: str() is the trial's traceback (Ray's ray.tune.error.TuneError
    family; Ray raises the trial's RayTaskError)."""


class Result:
    """One trial's outcome: config, metrics (its last result), checkpoint (the latest), path
    (its folder), error (None, or a TuneError carrying the traceback), metrics_dataframe."""

    def __init__(self, trial):
        self._trial = trial
        self.config = trial.config
        self.metrics = dict(trial.last_result or {})
        if self.metrics:
            self.metrics.setdefault("config", trial.config)
        self.checkpoint = trial.checkpoint
        self.best_checkpoints = [(Checkpoint(p), r) for p, r in trial.checkpoints]
        self.path = trial.local_path
        self.error = TuneError(trial.error_msg) if trial.status == ERROR else None

    @property
    def metrics_dataframe(self):
        import pandas as pd
        rows = [{k: v for k, v in r.items() if k != "config"} for r in self._trial.results]
        return pd.DataFrame(rows)

    @property
    def trial_id(self):
        return self._trial.trial_id

    def __repr__(self):
        shown = {k: v for k, v in self.metrics.items() if k != "config"}
        return (f"Result(metrics={shown}, path={self.path!r}, "
                f"checkpoint={self.checkpoint}{', error' if self.error else ''})")


def _score(trial, metric, scope):
    values = [r[metric] for r in trial.results if isinstance(r.get(metric), (int, float))]
    if not values and isinstance(trial.last_result.get(metric), (int, float)):
        values = [trial.last_result[metric]]
    if not values:
        return None
    if scope == "last":
        return values[-1]
    if scope == "avg":
        return sum(values) / len(values)
    if scope.startswith("last-") and scope.endswith("-avg"):
        n = int(scope[5:-4])
        tail = values[-n:]
        return sum(tail) / len(tail)
    return values  # "all": decided by the caller over every value


class ResultGrid:
    def __init__(self, trials, experiment_path, metric=None, mode=None):
        self._trials = list(trials)
        self._results = [Result(t) for t in self._trials]
        self.experiment_path = experiment_path
        self._metric, self._mode = metric, mode

    def __len__(self):
        return len(self._results)

    def __getitem__(self, i):
        return self._results[i]

    def __iter__(self):
        return iter(self._results)

    @property
    def errors(self):
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self):
        return sum(1 for t in self._trials if t.status == ERROR)

    @property
    def num_terminated(self):
        return sum(1 for t in self._trials if t.status == TERMINATED)

    @property
    def filesystem(self):
        return None

    def get_best_result(self, metric=None, mode=None, scope="last", filter_nan_and_inf=True):
        """The trial best at `metric` by `scope` ("last", "avg", "last-N-avg", "all")."""
        metric = metric or self._metric
        mode = mode or self._mode
        if not metric or not mode:
            raise ValueError("get_best_result needs metric and mode (here or in TuneConfig)")
        if mode not in ("min", "max"):
            raise ValueError("mode must be 'min' or 'max'")
        if scope not in ("last", "avg", "all") and not (
                scope.startswith("last-") and scope.endswith("-avg")):
            raise ValueError(f"scope must be last, avg, last-N-avg or all, not {scope!r}")
        best, best_value = None, None
        for trial, result in zip(self._trials, self._results):
            value = _score(trial, metric, scope)
            if value is None:
                continue
            if isinstance(value, list):
                value = max(value) if mode == "max" else min(value)
            if filter_nan_and_inf and not math.isfinite(value):
                continue
            if best is None or (value > best_value if mode == "max" else value < best_value):
                best, best_value = result, value
        if best is None:
            raise RuntimeError(f"no trial reported {metric!r}: no best result "
                               f"(experiment {self.experiment_path})")
        return best

    def get_dataframe(self, filter_metric=None, filter_mode=None):
        """One row per trial: its last result (or its best by filter_metric), config columns
        as config/<key>, and its folder as logdir."""
        import pandas as pd
        from airt.tune.experiment import flatten
        rows = []
        for trial in self._trials:
            chosen = trial.last_result or {}
            if filter_metric and trial.results:
                scored = [r for r in trial.results if isinstance(r.get(filter_metric),
                                                                  (int, float))]
                if scored:
                    pick = max if filter_mode == "max" else min
                    chosen = pick(scored, key=lambda r: r[filter_metric])
            row = {k: v for k, v in flatten({k: v for k, v in chosen.items()
                                             if k != "config"}).items()}
            row.update({f"config/{k}": v for k, v in flatten(trial.config).items()})
            row["logdir"] = os.path.basename(trial.local_path)
            row["trial_id"] = trial.trial_id
            rows.append(row)
        return pd.DataFrame(rows)

    def __repr__(self):
        return f"ResultGrid<{len(self)} results, {self.num_errors} errors>"
