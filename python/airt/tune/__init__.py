"""airt.tune: hyperparameter sweeps with Ray Tune 2.60's names (`from airt import tune`).

    from airt import tune
    def train(config):
        for step in range(10):
            tune.report({"loss": (config["lr"] - 0.1) ** 2 / (step + 1)})
    tuner = tune.Tuner(tune.with_resources(train, {"CPU": 0.25, "GPU": 0.5}),
                       param_space={"lr": tune.loguniform(1e-3, 1)},
                       tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=16,
                                                   scheduler=tune.schedulers.ASHAScheduler()))
    best = tuner.fit().get_best_result()

Trials run as airt actors with their own resources; the decisions of FIFO, ASHA, HyperBand and
the median stopping rule are airt's C++ (shared with the C++ tuner). docs/tune.md has the rest.
"""

from airt.tune import schedulers, search
from airt.tune.config import (CheckpointConfig, Callback, FailureConfig, RunConfig, Stopper,
                              TuneConfig)
from airt.tune.optuna_search import OptunaSearch
from airt.tune.pbt import PopulationBasedTraining
from airt.tune.result import Result, ResultGrid, TuneError
from airt.tune.sample import (choice, grid_search, loguniform, lograndint, qloguniform, qrandint,
                              qrandn, quniform, randint, randn, sample_from, uniform)
from airt.tune.schedulers import (ASHAScheduler, AsyncHyperBandScheduler, FIFOScheduler,
                                  HyperBandScheduler, MedianStoppingRule, TrialScheduler)
from airt.tune.search import BasicVariantGenerator, ConcurrencyLimiter, Searcher
from airt.tune.session import get_checkpoint, get_context, report
from airt.tune.trainable import (Checkpoint, PlacementGroupFactory, Trainable, with_parameters,
                                 with_resources)
from airt.tune.tuner import Tuner

schedulers.PopulationBasedTraining = PopulationBasedTraining
search.OptunaSearch = OptunaSearch

__all__ = [
    "Tuner", "TuneConfig", "RunConfig", "FailureConfig", "CheckpointConfig", "Callback",
    "Stopper", "Result", "ResultGrid", "TuneError", "report", "get_checkpoint", "get_context",
    "Checkpoint", "Trainable", "with_resources", "with_parameters", "PlacementGroupFactory",
    "grid_search", "choice", "uniform", "quniform", "loguniform", "qloguniform", "randint",
    "qrandint", "lograndint", "randn", "qrandn", "sample_from", "BasicVariantGenerator",
    "OptunaSearch", "ConcurrencyLimiter", "Searcher", "schedulers", "search", "FIFOScheduler",
    "ASHAScheduler", "AsyncHyperBandScheduler", "HyperBandScheduler", "MedianStoppingRule",
    "PopulationBasedTraining", "TrialScheduler",
]
