"""What fit() returns and raises, as Ray Train 2.60's (V2): Result, TrainingFailedError and
WorkerGroupError."""

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

from airt.tune.trainable import Checkpoint


class TrainingFailedError(RuntimeError):
    """fit() failed: a rank's loop raised, or its process or node died, more often than
    FailureConfig.max_failures allows. The message names the rank, its node and the cause."""


class WorkerGroupError(TrainingFailedError):
    """The ranks' failures: worker_failures maps each failed rank to its error."""

    def __init__(self, error_message, worker_failures):
        super().__init__("Training failed due to worker errors:\n" + error_message)
        self._error_message = error_message
        self.worker_failures = worker_failures

    def __reduce__(self):
        return (self.__class__, (self._error_message, self.worker_failures))


@dataclasses.dataclass
class Result:
    """metrics: rank 0's last report; checkpoint: the latest complete checkpoint; path: the run's
    folder; error: the TrainingFailedError (fit() raises it too); metrics_dataframe: one row per
    kept checkpoint's metrics; best_checkpoints: (Checkpoint, metrics) of the kept checkpoints,
    oldest first; return_value: what rank 0's loop returned."""
    metrics: Optional[Dict[str, Any]]
    checkpoint: Optional[Checkpoint]
    error: Optional[TrainingFailedError]
    path: str
    metrics_dataframe: Any = None
    best_checkpoints: Optional[List[Tuple[Checkpoint, Dict[str, Any]]]] = None
    return_value: Any = None

    def get_best_checkpoint(self, metric, mode):
        """The kept checkpoint whose metrics are best by `metric` ('min' or 'max')."""
        if mode not in ("min", "max"):
            raise ValueError("mode must be 'min' or 'max'")
        scored = [(m[metric], c) for c, m in self.best_checkpoints or [] if metric in m]
        if not scored:
            return None
        pick = min if mode == "min" else max
        return pick(scored, key=lambda item: item[0])[1]
