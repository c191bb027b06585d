"""The sweep's configuration, as Ray Tune 2.60's: TuneConfig, tune.RunConfig, FailureConfig,
CheckpointConfig; Callback and Stopper."""

import dataclasses
from typing import Any, Callable, List, Optional, Union


@dataclasses.dataclass
class TuneConfig:
    metric: Optional[str] = None
    mode: Optional[str] = None
    search_alg: Any = None
    scheduler: Any = None
    num_samples: int = 1
    max_concurrent_trials: Optional[int] = None
    time_budget_s: Optional[float] = None
    reuse_actors: Optional[bool] = None   # None: True for function trainables, as Ray's
    trial_name_creator: Optional[Callable] = None
    trial_dirname_creator: Optional[Callable] = None

    def __post_init__(self):
        if self.mode not in (None, "min", "max"):
            raise ValueError(f"TuneConfig(mode=) must be 'min' or 'max', not {self.mode!r}")
        if not isinstance(self.num_samples, int) or (self.num_samples < 1
                                                       and self.num_samples != -1):
            raise ValueError("TuneConfig(num_samples=) must be a positive int (or -1)")
        if self.max_concurrent_trials is not None and self.max_concurrent_trials < 1:
            raise ValueError("TuneConfig(max_concurrent_trials=) must be positive")


@dataclasses.dataclass
class FailureConfig:
    """max_failures: retries of a trial that raised or whose worker died (-1: without limit),
    each from its last checkpoint. fail_fast: the first error ends the sweep."""
    max_failures: int = 0
    fail_fast: Union[bool, str] = False


@dataclasses.dataclass
class CheckpointConfig:
    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: str = "max"
    checkpoint_frequency: int = 0   # class trainables: save every N steps
    checkpoint_at_end: Optional[bool] = None

    def __post_init__(self):
        if self.num_to_keep is not None and self.num_to_keep < 1:
            raise ValueError("CheckpointConfig(num_to_keep=) must be None or positive")
        if self.checkpoint_score_order not in ("min", "max"):
            raise ValueError("checkpoint_score_order must be 'min' or 'max'")


@dataclasses.dataclass
class RunConfig:
    """name: the experiment's folder under storage_path (default ~/airt_results).
    stop: a dict (a trial stops once result[key] >= value), a function (trial_id, result) ->
    bool, or a Stopper. verbose: 0 silent, 1 the progress table, 2 also a line per result.
    progress_interval_s: how often the table is printed when stdout is not a terminal."""
    name: Optional[str] = None
    storage_path: Optional[str] = None
    stop: Any = None
    failure_config: Optional[FailureConfig] = None
    checkpoint_config: Optional[CheckpointConfig] = None
    callbacks: Optional[List[Any]] = None
    verbose: int = 1
    progress_interval_s: Optional[float] = None
    log_to_file: bool = False


class Callback:
    """Hooks the tuner calls on its loop (Ray's tune.Callback); every argument is a keyword:
    iteration (the loop's step), trials (all trials), trial, result."""

    def setup(self, **info):
        pass

    def on_trial_start(self, iteration, trials, trial, **info):
        pass

    def on_trial_result(self, iteration, trials, trial, result, **info):
        pass

    def on_trial_complete(self, iteration, trials, trial, **info):
        pass

    def on_trial_error(self, iteration, trials, trial, **info):
        pass

    def on_trial_restore(self, iteration, trials, trial, **info):
        pass

    def on_experiment_end(self, trials, **info):
        pass


class Stopper:
    """RunConfig(stop=Stopper()): __call__(trial_id, result) -> stop that trial; stop_all()
    -> end the sweep."""

    def __call__(self, trial_id, result):
        return False

    def stop_all(self):
        return False
