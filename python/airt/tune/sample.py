"""Search space primitives, as Ray Tune's (`ray.tune.search.sample`): each is a Domain whose
`sample(spec, random_state)` draws a value; `grid_search(values)` marks a key to be crossed."""

import math
import random as _random

import numpy as np


class Domain:
    """A distribution of values for one key of the config."""

    def sample(self, spec=None, size=None, random_state=None):
        rng = random_state if random_state is not None else _random.Random()
        if size is None:
            return self._sample(rng, spec)
        return [self._sample(rng, spec) for _ in range(size)]

    def _sample(self, rng, spec):
        raise NotImplementedError

    def is_grid(self):
        return False

    def is_function(self):
        return False


class Float(Domain):
    def __init__(self, lower, upper):
        if lower is not None and upper is not None and not lower < upper:
            raise ValueError(f"lower ({lower}) must be below upper ({upper})")
        self.lower, self.upper = lower, upper
        self.kind = "uniform"
        self.base = 10
        self.q = None
        self.mean = self.sd = None

    def uniform(self):
        self.kind = "uniform"
        return self

    def loguniform(self, base=10):
        if not self.lower > 0:
            raise ValueError("loguniform needs a positive lower bound")
        self.kind, self.base = "loguniform", base
        return self

    def normal(self, mean=0.0, sd=1.0):
        self.kind, self.mean, self.sd = "normal", mean, sd
        return self

    def quantized(self, q):
        self.q = q
        return self

    def _sample(self, rng, spec):
        if self.kind == "uniform":
            value = rng.uniform(self.lower, self.upper)
        elif self.kind == "loguniform":
            lo, hi = math.log(self.lower, self.base), math.log(self.upper, self.base)
            value = self.base ** rng.uniform(lo, hi)
        else:
            value = rng.gauss(self.mean, self.sd)
        if self.q is not None:
            value = float(np.round(value / self.q) * self.q)
            if self.lower is not None:
                value = min(max(value, self.lower), self.upper)
        return value

    def __repr__(self):
        return f"{self.kind}({self.lower}, {self.upper}{', q=%s' % self.q if self.q else ''})"


class Integer(Domain):
    """randint: upper exclusive; qrandint: upper inclusive (as Ray's)."""

    def __init__(self, lower, upper):
        if not lower < upper:
            raise ValueError(f"lower ({lower}) must be below upper ({upper})")
        self.lower, self.upper = lower, upper
        self.kind = "uniform"
        self.q = None
        self.base = 10

    def uniform(self):
        return self

    def loguniform(self, base=10):
        self.kind, self.base = "loguniform", base
        return self

    def quantized(self, q):
        self.q = q
        return self

    def _sample(self, rng, spec):
        if self.q is not None:
            steps = (self.upper - self.lower) // self.q
            return int(self.lower + self.q * rng.randint(0, steps))
        if self.kind == "loguniform":
            lo, hi = math.log(self.lower, self.base), math.log(self.upper, self.base)
            return min(int(self.base ** rng.uniform(lo, hi)), self.upper - 1)
        return rng.randrange(self.lower, self.upper)

    def __repr__(self):
        return f"randint({self.lower}, {self.upper})"


class Categorical(Domain):
    def __init__(self, categories):
        self.categories = list(categories)
        if not self.categories:
            raise ValueError("choice needs at least one category")

    def uniform(self):
        return self

    def grid(self):
        return self

    def _sample(self, rng, spec):
        return self.categories[rng.randrange(len(self.categories))]

    def __repr__(self):
        return f"choice({self.categories})"


class Function(Domain):
    """sample_from: `func(spec)` where `spec.config` is the config resolved so far."""

    def __init__(self, func):
        if not callable(func):
            raise TypeError("sample_from needs a callable")
        self.func = func

    def is_function(self):
        return True

    def _sample(self, rng, spec):
        try:
            return self.func(spec)
        except TypeError:
            return self.func()

    def __repr__(self):
        return f"sample_from({getattr(self.func, '__name__', self.func)})"


def uniform(lower, upper):
    return Float(lower, upper).uniform()


def quniform(lower, upper, q):
    return Float(lower, upper).uniform().quantized(q)


def loguniform(lower, upper, base=10):
    return Float(lower, upper).loguniform(base)


def qloguniform(lower, upper, q, base=10):
    return Float(lower, upper).loguniform(base).quantized(q)


def randn(mean=0.0, sd=1.0):
    return Float(None, None).normal(mean, sd)


def qrandn(mean, sd, q):
    return Float(None, None).normal(mean, sd).quantized(q)


def randint(lower, upper):
    return Integer(lower, upper)


def qrandint(lower, upper, q=1):
    return Integer(lower, upper).quantized(q)


def lograndint(lower, upper, base=10):
    return Integer(lower, upper).loguniform(base)


def choice(categories):
    return Categorical(categories)


def sample_from(func):
    return Function(func)


def grid_search(values):
    """Marks a key whose every value is tried (crossed with the other grid keys)."""
    return {"grid_search": list(values)}
