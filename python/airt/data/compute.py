"""Compute strategies of map_batches, as Ray's: ActorPoolStrategy and TaskPoolStrategy."""

import logging
import warnings

logger = logging.getLogger(__name__)

DEFAULT_MAX_TASKS_IN_FLIGHT_PER_ACTOR = 2


class TaskPoolStrategy:
    """Tasks; `size`: at most that many at once (None: as the cluster's CPUs allow)."""

    def __init__(self, size=None):
        if size is not None and (not isinstance(size, int) or size < 1):
            raise ValueError(f"size must be >= 1, got {size!r}")
        self.size = size

    def __repr__(self):
        return f"TaskPoolStrategy(size={self.size})"


class ActorPoolStrategy:
    """A pool of actors: `size` fixed, or between min_size and max_size, starting at
    initial_size (default min_size), each given at most max_tasks_in_flight_per_actor calls."""

    def __init__(self, *, size=None, min_size=None, max_size=None, initial_size=None,
                 max_tasks_in_flight_per_actor=None):
        if size is not None:
            if min_size is not None or max_size is not None or initial_size is not None:
                raise ValueError("min_size, max_size and initial_size cannot be set with size")
            if not isinstance(size, int) or size < 1:
                raise ValueError(f"size must be >= 1, got {size!r}")
            min_size = max_size = initial_size = size
        min_size = 1 if min_size is None else min_size
        if min_size < 1:
            raise ValueError(f"min_size must be >= 1, got {min_size}")
        if max_size is not None and max_size < min_size:
            raise ValueError(f"min_size ({min_size}) must be <= max_size ({max_size})")
        initial_size = min_size if initial_size is None else initial_size
        if initial_size < min_size or (max_size is not None and initial_size > max_size):
            raise ValueError(f"initial_size {initial_size} must be between min_size "
                             f"{min_size} and max_size {max_size}")
        if max_tasks_in_flight_per_actor is not None and max_tasks_in_flight_per_actor < 1:
            raise ValueError("max_tasks_in_flight_per_actor must be >= 1, got: "
                             f"{max_tasks_in_flight_per_actor}")
        self.size = size
        self.min_size = min_size
        self.max_size = max_size
        self.initial_size = initial_size
        self.max_tasks_in_flight_per_actor = (max_tasks_in_flight_per_actor or
                                              DEFAULT_MAX_TASKS_IN_FLIGHT_PER_ACTOR)

    def __repr__(self):
        return (f"ActorPoolStrategy(min_size={self.min_size}, max_size={self.max_size}, "
                f"initial_size={self.initial_size}, "
                f"max_tasks_in_flight_per_actor={self.max_tasks_in_flight_per_actor})")


def strategy_for(fn, compute, concurrency, fn_constructor_args):
    """The strategy map_batches uses (Ray's rules, the deprecated `concurrency` included)."""
    is_class = isinstance(fn, type)
    if not is_class and fn_constructor_args is not None:
        raise ValueError("``fn_constructor_args`` can only be specified if providing a "
                         f"callable class instance for ``fn``, but got: {fn}.")
    if compute is not None:
        if compute == "tasks":
            compute = TaskPoolStrategy()
        elif compute == "actors":
            compute = ActorPoolStrategy()
        if is_class and isinstance(compute, TaskPoolStrategy):
            raise ValueError(f"You specified the callable class {fn} as your UDF with the "
                             f"compute {compute}, but callable classes cannot run on the task "
                             "pool strategy: pass an ActorPoolStrategy or None")
        if not is_class and isinstance(compute, ActorPoolStrategy):
            raise ValueError(f"You specified the function {fn} as your UDF with the compute "
                             f"{compute}, but regular functions cannot run on the actor pool "
                             "strategy: pass a TaskPoolStrategy or None")
        return compute
    if concurrency is not None:
        message = ("The argument ``concurrency`` is deprecated in Ray 2.51. Please specify "
                   "argument ``compute`` instead.")
        logger.warning(message)
        warnings.warn(message, DeprecationWarning, stacklevel=3)
        if isinstance(concurrency, tuple):
            if len(concurrency) not in (2, 3) or not all(isinstance(c, int)
                                                         for c in concurrency):
                raise ValueError("``concurrency`` is expected to be set as a tuple of "
                                 f"integers, but got: {concurrency}.")
            if not is_class:
                raise ValueError("``concurrency`` is set as a tuple of integers, but ``fn`` "
                                 f"is not a callable class: {fn}.")
            return ActorPoolStrategy(min_size=concurrency[0], max_size=concurrency[1],
                                     initial_size=(concurrency[2] if len(concurrency) == 3
                                                   else None))
        if isinstance(concurrency, int):
            return ActorPoolStrategy(size=concurrency) if is_class else \
                TaskPoolStrategy(size=concurrency)
        raise ValueError("``concurrency`` is expected to be set as an integer or a tuple of "
                         f"integers, but got: {concurrency}.")
    return ActorPoolStrategy(min_size=1, max_size=None) if is_class else TaskPoolStrategy()
