"""Search algorithms, as Ray Tune's: the `Searcher` base, the basic variant generator (grid ×
random samples, seeded) and `ConcurrencyLimiter`. `OptunaSearch` is in optuna_search.py."""

import copy
import itertools
import random

from airt.tune._objective import Objective
from airt.tune.sample import Domain


def _is_grid(value):
    return isinstance(value, dict) and set(value) == {"grid_search"}


def flatten_space(space, prefix=()):
    """[(path, leaf)] for every Domain or grid_search leaf of a nested dict."""
    out = []
    if isinstance(space, dict) and not _is_grid(space):
        for key, value in space.items():
            out.extend(flatten_space(value, prefix + (key,)))
    elif isinstance(space, Domain) or _is_grid(space):
        out.append((prefix, space))
    return out


def set_path(config, path, value):
    for key in path[:-1]:
        config = config[key]
    config[path[-1]] = value


class _Spec(dict):
    """What a sample_from function receives: `spec.config` (also `spec["config"]`)."""

    def __init__(self, config):
        super().__init__(config=config)
        self.config = _AttrDict(config)


class _AttrDict(dict):
    def __init__(self, d):
        super().__init__({k: _AttrDict(v) if isinstance(v, dict) else v for k, v in d.items()})

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def resolve(space, grid_values, rng):
    """One config: grid leaves take `grid_values` (path -> value), Domains are sampled, then
    sample_from functions are called with the config resolved so far."""
    config = copy.deepcopy({k: v for k, v in space.items()}) if isinstance(space, dict) else {}
    leaves = flatten_space(space)
    functions = []
    for path, leaf in leaves:
        if _is_grid(leaf):
            set_path(config, path, grid_values[path])
        elif leaf.is_function():
            functions.append((path, leaf))
        else:
            set_path(config, path, leaf.sample(random_state=rng))
    for path, leaf in functions:  # in order: a later function sees an earlier one's value
        set_path(config, path, leaf.sample(spec=_Spec(config), random_state=rng))
    return config


def _deep_update(config, point):
    for key, value in point.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            _deep_update(config[key], value)
        else:
            config[key] = value


class Searcher(Objective):
    """The base of search algorithms (Ray's ray.tune.search.Searcher): `suggest(trial_id)`
    returns a config, None (nothing now: ask again later) or Searcher.FINISHED."""

    FINISHED = "FINISHED"


    def set_search_properties(self, metric, mode, config, **spec):
        """Called by the tuner with TuneConfig's metric and mode and the param_space; False if
        the searcher already has a space of its own."""
        if metric and not self._metric:
            self._metric = metric
        if mode and not self._mode:
            self._mode = mode
        return True

    def suggest(self, trial_id):
        raise NotImplementedError

    def on_trial_result(self, trial_id, result):
        pass

    def on_trial_complete(self, trial_id, result=None, error=False):
        pass

    def add_evaluated_point(self, parameters, value, error=False, pruned=False,
                            intermediate_values=None):
        raise NotImplementedError(f"{type(self).__name__} takes no evaluated points")

    def is_finished(self):
        return False

    def save(self, checkpoint_path):
        import cloudpickle
        with open(checkpoint_path, "wb") as f:
            cloudpickle.dump(self.__dict__, f)

    def restore(self, checkpoint_path):
        import pickle
        with open(checkpoint_path, "rb") as f:
            self.__dict__.update(pickle.load(f))


class BasicVariantGenerator(Searcher):
    """Ray's default: every grid combination `num_samples` times, random leaves drawn afresh for
    each (seeded by `random_state`). points_to_evaluate come first."""

    def __init__(self, points_to_evaluate=None, max_concurrent=0, constant_grid_search=False,
                 random_state=None):
        super().__init__()
        self._points = list(points_to_evaluate or [])
        self._max_concurrent = max_concurrent
        self._constant_grid = constant_grid_search
        self._rng = random_state if isinstance(random_state, random.Random) else \
            random.Random(random_state)
        self._space = {}
        self._num_samples = 1
        self._variants = None
        self._live = set()
        self._finished = False

    def set_search_properties(self, metric, mode, config, num_samples=1, **spec):
        super().set_search_properties(metric, mode, config)
        self._space = config or {}
        self._num_samples = num_samples
        return True

    def total_variants(self):
        grids = [leaf["grid_search"] for _, leaf in flatten_space(self._space) if _is_grid(leaf)]
        n = 1
        for g in grids:
            n *= len(g)
        return len(self._points) + n * self._num_samples

    def _generate(self):
        firsts = {path: leaf["grid_search"][0] for path, leaf in flatten_space(self._space)
                  if _is_grid(leaf)}
        for point in self._points:  # a partial config: the space fills the keys it lacks
            config = resolve(self._space, firsts, self._rng)
            _deep_update(config, copy.deepcopy(point))
            yield config
        grids = [(path, leaf["grid_search"]) for path, leaf in flatten_space(self._space)
                 if _is_grid(leaf)]
        paths = [p for p, _ in grids]
        for _ in range(self._num_samples):
            # Ray's order: the first grid key varies fastest.
            combos = itertools.product(*[values for _, values in reversed(grids)])
            for combo in combos:
                yield resolve(self._space, dict(zip(reversed(paths), combo)), self._rng)

    def suggest(self, trial_id):
        if self._max_concurrent and len(self._live) >= self._max_concurrent:
            return None
        if self._variants is None:
            self._variants = list(self._generate())
            self._next = 0
        if self._next >= len(self._variants):
            self._finished = True
            return Searcher.FINISHED
        config = self._variants[self._next]
        self._next += 1
        self._live.add(trial_id)
        return config

    def on_trial_complete(self, trial_id, result=None, error=False):
        self._live.discard(trial_id)

    def is_finished(self):
        return self._finished


class ConcurrencyLimiter(Searcher):
    """At most `max_concurrent` trials of the wrapped searcher live at once (`batch`: a new
    batch of max_concurrent only when the whole last batch ended)."""

    def __init__(self, searcher, max_concurrent, batch=False):
        if not isinstance(max_concurrent, int) or max_concurrent < 1:
            raise ValueError("max_concurrent must be a positive int")
        super().__init__(searcher.metric, searcher.mode)
        self.searcher = searcher
        self.max_concurrent = max_concurrent
        self.batch = batch
        self._live = set()
        self._batch_open = True

    def set_search_properties(self, metric, mode, config, **spec):
        super().set_search_properties(metric, mode, config)
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id):
        if len(self._live) >= self.max_concurrent or (self.batch and not self._batch_open):
            return None
        config = self.searcher.suggest(trial_id)
        if isinstance(config, dict):
            self._live.add(trial_id)
            if self.batch and len(self._live) >= self.max_concurrent:
                self._batch_open = False
        return config

    def on_trial_result(self, trial_id, result):
        if trial_id in self._live:
            self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id, result=None, error=False):
        if trial_id not in self._live:
            return
        self._live.discard(trial_id)
        if not self._live:
            self._batch_open = True
        self.searcher.on_trial_complete(trial_id, result=result, error=error)

    def is_finished(self):
        return self.searcher.is_finished()
