"""OptunaSearch: Optuna's samplers (TPE by default) as a Searcher, coded against the optuna 3.1
API (study.ask with fixed distributions, study.tell), as Ray's ray.tune.search.optuna."""

from airt.tune import sample
from airt.tune.search import Searcher, flatten_space, set_path, _is_grid


def _distribution(path, leaf):
    import optuna.distributions as d
    name = "/".join(map(str, path))
    if isinstance(leaf, sample.Float):
        if leaf.kind == "normal":
            raise ValueError(f"OptunaSearch: {name}: randn has no Optuna distribution")
        return d.FloatDistribution(leaf.lower, leaf.upper, log=leaf.kind == "loguniform",
                                   step=leaf.q if leaf.kind == "uniform" else None)
    if isinstance(leaf, sample.Integer):
        step = leaf.q or 1
        upper = leaf.upper if leaf.q else leaf.upper - 1  # randint's upper is exclusive
        return d.IntDistribution(leaf.lower, upper, log=leaf.kind == "loguniform" and step == 1,
                                 step=step)
    if isinstance(leaf, sample.Categorical):
        return d.CategoricalDistribution(leaf.categories)
    if _is_grid(leaf):
        raise ValueError(f"OptunaSearch: {name}: grid_search is not supported by OptunaSearch")
    raise ValueError(f"OptunaSearch: {name}: {leaf!r} has no Optuna distribution")


class OptunaSearch(Searcher):
    """space: a Tune search space (dict of Domains) or None to take the Tuner's param_space.
    sampler: an optuna sampler (default TPESampler(seed=seed)). points_to_evaluate: configs tried
    first (enqueued); evaluated_rewards: their known results (then they are not run)."""

    def __init__(self, space=None, metric=None, mode=None, points_to_evaluate=None,
                 sampler=None, seed=None, evaluated_rewards=None):
        import optuna  # noqa: F401  (fails early, with optuna's own message, when it is missing)
        super().__init__(metric, mode)
        self._space = space
        self._points = list(points_to_evaluate or [])
        self._rewards = evaluated_rewards
        self._sampler = sampler
        self._seed = seed
        self._study = None
        self._trials = {}

    def set_search_properties(self, metric, mode, config, **spec):
        if self._study is not None:
            return False
        super().set_search_properties(metric, mode, config)
        if self._space is None:
            self._space = config
        self._setup()
        return True

    def _setup(self):
        import optuna
        if not self._metric or not self._mode:
            raise ValueError("OptunaSearch needs metric and mode (here or in TuneConfig)")
        self._leaves = []
        self._constants = {}
        for path, leaf in flatten_space(self._space or {}):
            if isinstance(leaf, sample.Function):
                raise ValueError("OptunaSearch: sample_from is not supported")
            self._leaves.append((path, leaf, _distribution(path, leaf)))
        self._constants = _constants(self._space or {})
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = self._sampler or optuna.samplers.TPESampler(seed=self._seed)
        self._study = optuna.create_study(
            sampler=sampler, direction="minimize" if self._mode == "min" else "maximize")
        for i, point in enumerate(self._points):
            flat = {"/".join(map(str, p)): v for p, v in _flat_values(point)}
            if self._rewards is not None:
                dists = {"/".join(map(str, p)): dist for p, _, dist in self._leaves}
                self._study.add_trial(optuna.trial.create_trial(
                    params=flat, distributions=dists, value=self._rewards[i]))
            else:
                self._study.enqueue_trial(flat)

    def suggest(self, trial_id):
        if self._study is None:
            self._setup()
        dists = {"/".join(map(str, p)): dist for p, _, dist in self._leaves}
        trial = self._study.ask(fixed_distributions=dists)
        self._trials[trial_id] = trial
        config = _copy_nested(self._constants)
        for path, _, _ in self._leaves:
            set_path(config, path, trial.params["/".join(map(str, path))])
        return config

    def on_trial_result(self, trial_id, result):
        trial = self._trials.get(trial_id)
        if trial is not None and self._metric in result:
            step = result.get("training_iteration", 0)
            trial.report(result[self._metric], step)

    def on_trial_complete(self, trial_id, result=None, error=False):
        import optuna
        trial = self._trials.pop(trial_id, None)
        if trial is None:
            return
        if error or not result or self._metric not in result:
            self._study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self._study.tell(trial, result[self._metric])

    def add_evaluated_point(self, parameters, value, error=False, pruned=False,
                            intermediate_values=None):
        import optuna
        dists = {"/".join(map(str, p)): dist for p, _, dist in self._leaves}
        flat = {"/".join(map(str, p)): v for p, v in _flat_values(parameters)}
        state = (optuna.trial.TrialState.FAIL if error else
                 optuna.trial.TrialState.PRUNED if pruned else optuna.trial.TrialState.COMPLETE)
        self._study.add_trial(optuna.trial.create_trial(
            params=flat, distributions=dists, value=None if error else value, state=state,
            intermediate_values=dict(enumerate(intermediate_values or []))))


def _flat_values(config, prefix=()):
    for key, value in config.items():
        if isinstance(value, dict):
            yield from _flat_values(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def _constants(space):
    out = {}
    for key, value in space.items():
        if isinstance(value, dict) and not _is_grid(value):
            out[key] = _constants(value)
        elif not isinstance(value, sample.Domain) and not _is_grid(value):
            out[key] = value
        else:
            out[key] = None
    return out


def _copy_nested(d):
    return {k: _copy_nested(v) if isinstance(v, dict) else v for k, v in d.items()}
