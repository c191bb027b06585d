"""The run's configuration, as Ray Train 2.60's (V2): ScalingConfig, RunConfig, FailureConfig,
CheckpointConfig and CheckpointUploadMode."""

import dataclasses
import enum
import os
from typing import Any, Dict, List, Optional, Union

_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


class CheckpointUploadMode(enum.Enum):
    """How report() moves a checkpoint to storage_path. SYNC: report returns once this rank's
    files are there. ASYNC: report returns once they are snapshotted beside the reported folder
    on the rank's node; the copy goes on in the background (one in flight per rank: the next
    report waits for it). NO_UPLOAD: the folder is already under the run's folder and is
    recorded where it is."""
    ASYNC = "ASYNC"
    SYNC = "SYNC"
    NO_UPLOAD = "NO_UPLOAD"

    def default_delete_local_checkpoint_after_upload(self):
        return self == CheckpointUploadMode.ASYNC


@dataclasses.dataclass
class ScalingConfig:
    """num_workers ranks, each reserving resources_per_worker (default {"CPU": 1}, plus
    {"GPU": 1} with use_gpu) as one bundle of a placement group with placement_strategy.
    accelerator_type: each rank's bundle asks for a node of that GPU type. label_selector: the
    node labels every rank's bundle must match (a dict), or one dict per rank's bundle (a list of
    num_workers); values take Ray's forms ("a", "!a", "in(a,b)", "!in(a,b)")."""
    trainer_resources: Optional[dict] = None
    num_workers: int = 1
    use_gpu: bool = False
    resources_per_worker: Optional[Dict[str, float]] = None
    placement_strategy: str = "PACK"
    accelerator_type: Optional[str] = None
    label_selector: Optional[Union[Dict[str, str], List[Dict[str, str]]]] = None

    def __post_init__(self):
        if not isinstance(self.num_workers, int) or isinstance(self.num_workers, bool) \
                or self.num_workers < 1:
            raise ValueError(f"ScalingConfig(num_workers=) must be a positive int, got "
                             f"{self.num_workers!r} (elastic ranges are not built)")
        if self.placement_strategy not in _STRATEGIES:
            raise ValueError(f"ScalingConfig(placement_strategy=) must be one of "
                             f"{list(_STRATEGIES)}, got {self.placement_strategy!r}")
        for key, value in (self.resources_per_worker or {}).items():
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"ScalingConfig(resources_per_worker=): {key!r} must be a "
                                 f"number >= 0, got {value!r}")
        if self.accelerator_type is not None and not isinstance(self.accelerator_type, str):
            raise ValueError("ScalingConfig(accelerator_type=) must be a str")
        self.label_selectors()  # checks it now

    def label_selectors(self):
        """label_selector as one dict per rank's bundle; None without one."""
        selector = self.label_selector
        if selector is None:
            return None
        selectors = [selector] * self.num_workers if isinstance(selector, dict) else selector
        if not isinstance(selectors, list) or len(selectors) != self.num_workers:
            raise ValueError(f"ScalingConfig(label_selector=) must be a dict or a list of "
                             f"num_workers={self.num_workers} dicts, got {selector!r}")
        for entry in selectors:
            if not isinstance(entry, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in entry.items()):
                raise ValueError(f"ScalingConfig(label_selector=): each selector must be a dict "
                                 f"of str to str, got {entry!r}")
        return [dict(entry) for entry in selectors]

    @property
    def _resources_per_worker_not_none(self):
        resources = dict(self.resources_per_worker or {})
        if self.resources_per_worker is None:
            resources["CPU"] = 1.0
        if self.use_gpu and "GPU" not in resources:
            resources["GPU"] = 1.0
        if not self.use_gpu and resources.get("GPU", 0) > 0:
            raise ValueError("ScalingConfig: resources_per_worker asks for GPUs while "
                             "use_gpu=False; set use_gpu=True")
        return {k: float(v) for k, v in resources.items() if v}

    def bundle(self):
        """One rank's placement-group bundle."""
        bundle = self._resources_per_worker_not_none
        if self.accelerator_type:
            bundle[f"accelerator_type:{self.accelerator_type}"] = 0.001
        if not bundle:
            bundle["CPU"] = 0.001  # a bundle must ask for something
        return bundle


@dataclasses.dataclass
class FailureConfig:
    """max_failures: how often the gang is restarted from the latest checkpoint after a rank's
    process or node died or its loop raised (-1: without limit). max_preemption_failures: how
    often after a failure a node's drain caused (`airt drain`, a preemption notice: the ranks
    raised PreemptionError after checkpointing, or their drained node left); those do not count
    against max_failures (-1: without limit)."""
    max_failures: int = 0
    max_preemption_failures: int = -1

    def __post_init__(self):
        for name in ("max_failures", "max_preemption_failures"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < -1:
                raise ValueError(f"FailureConfig({name}=) must be an int >= -1, got {value!r}")


@dataclasses.dataclass
class CheckpointConfig:
    """num_to_keep: how many checkpoints stay in storage (None: all), the best by
    checkpoint_score_attribute (one of rank 0's metrics; None: the most recent) in
    checkpoint_score_order; the latest one is always kept, for restarts."""
    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: str = "max"

    def __post_init__(self):
        if self.num_to_keep is not None and (not isinstance(self.num_to_keep, int)
                                             or self.num_to_keep < 1):
            raise ValueError(f"CheckpointConfig(num_to_keep=) must be None or a positive int, "
                             f"got {self.num_to_keep!r}")
        if self.checkpoint_score_order not in ("min", "max"):
            raise ValueError("CheckpointConfig(checkpoint_score_order=) must be 'min' or 'max'")


@dataclasses.dataclass
class RunConfig:
    """name: the run's folder under storage_path (default: airt_train_<date>); storage_path: a
    folder every rank's node reaches (default ~/airt_results). worker_runtime_env: the ranks'
    runtime_env (env_vars, working_dir)."""
    name: Optional[str] = None
    storage_path: Optional[str] = None
    failure_config: Optional[FailureConfig] = None
    checkpoint_config: Optional[CheckpointConfig] = None
    worker_runtime_env: Optional[dict] = None
    callbacks: Optional[List[Any]] = None

    def __post_init__(self):
        if self.name is not None and (not isinstance(self.name, str) or not self.name
                                      or os.sep in self.name):
            raise ValueError(f"RunConfig(name=) must be a folder name, got {self.name!r}")
        if self.storage_path is not None:
            if not isinstance(self.storage_path, (str, os.PathLike)):
                raise ValueError("RunConfig(storage_path=) must be a path")
            if "://" in os.fspath(self.storage_path):
                from airt import exceptions
                raise exceptions.UnimplementedError(
                    f"RunConfig(storage_path={self.storage_path!r}): URIs (cloud storage) are "
                    f"not built; use a folder every node reaches (a shared mount)")
        if self.callbacks:
            from airt import exceptions
            raise exceptions.UnimplementedError("RunConfig(callbacks=) is not built in airt.train")
        self.failure_config = self.failure_config or FailureConfig()
        self.checkpoint_config = self.checkpoint_config or CheckpointConfig()
