"""Inside the training loop: report, get_checkpoint, get_context, get_dataset_shard and
get_preemption_info, as Ray Train 2.60's (ray.train.report, ...). One session per rank process,
set while its loop runs."""

import os
import shutil

from airt.train._preemption import PreemptionError, info_of
from airt.train._storage import Uploader, copy_durably, snapshot
from airt.train.config import CheckpointUploadMode
from airt.tune.trainable import Checkpoint

_session = None


class TrainContext:
    """get_context(): the rank's place in the gang and the run's name (Ray's TrainContext)."""

    def __init__(self, session):
        self._s = session

    def get_world_rank(self):
        return self._s.info["world_rank"]

    def get_world_size(self):
        return self._s.info["world_size"]

    def get_local_rank(self):
        return self._s.info["local_rank"]

    def get_local_world_size(self):
        return self._s.info["local_world_size"]

    def get_node_rank(self):
        return self._s.info["node_rank"]

    def get_experiment_name(self):
        return self._s.info["experiment_name"]

    def get_trial_dir(self):
        return self._s.info["run_dir"]

    def get_metadata(self):
        return dict(self._s.info.get("metadata") or {})


class Session:
    """One rank's run of the loop: its report count, checkpoint and uploads."""

    def __init__(self, info, coordinator, checkpoint, shards):
        self.info = info
        self.coordinator = coordinator
        self.checkpoint = checkpoint
        self.shards = shards
        self.reports = 0
        self.uploader = Uploader()
        self.preemption = None  # a gang node's drain (PreemptionInfo fields), once told

    def report(self, metrics, checkpoint, checkpoint_dir_name, mode, delete_local):
        """_report, then, when a node of the gang is draining and this report made a
        checkpoint: waits until that checkpoint is complete and raises PreemptionError."""
        import airt
        name = self._report(metrics, checkpoint, checkpoint_dir_name, mode, delete_local)
        if self.preemption is None or name is None:
            return
        self.uploader.wait()
        airt.get(self.coordinator.committed.remote(self.info["attempt"], name))
        info = info_of(self.preemption)
        raise PreemptionError(
            f"node {info.node_id} holding ranks {info.world_ranks} is draining ({info.reason}); "
            f"checkpoint {name} is complete: the gang restarts from it on other nodes", info)

    def preemption_info(self):
        import airt
        if self.preemption is None:
            self.preemption = airt.get(self.coordinator.preemption_info.remote(
                self.info["attempt"]))
        return info_of(self.preemption)

    def _report(self, metrics, checkpoint, checkpoint_dir_name, mode, delete_local):
        """The report's barrier and this rank's checkpoint part; the checkpoint's folder name
        (None without one)."""
        import airt
        mode = CheckpointUploadMode(mode) if not isinstance(mode, CheckpointUploadMode) else mode
        if delete_local is None:
            delete_local = mode.default_delete_local_checkpoint_after_upload()
        run_dir = self.info["run_dir"]
        part = None
        if checkpoint is not None:
            if not os.path.isdir(checkpoint.path):
                raise ValueError(f"report(checkpoint=): {checkpoint.path} is not a folder")
            if mode == CheckpointUploadMode.NO_UPLOAD:
                inside = os.path.commonpath([os.path.abspath(checkpoint.path), run_dir])
                if inside != run_dir:
                    raise ValueError(
                        f"report(checkpoint_upload_mode=NO_UPLOAD): the checkpoint "
                        f"{checkpoint.path} is outside the run's folder {run_dir}; write it "
                        f"there (get_context().get_trial_dir()) or let report upload it")
                part = ("path", os.path.abspath(checkpoint.path))
            else:
                part = ("upload",)
        # Snapshot before the barrier, so the loop may change the folder once report returns.
        local = None
        if part == ("upload",) and mode == CheckpointUploadMode.ASYNC:
            local = snapshot(checkpoint.path, move=bool(delete_local))
        self.uploader.wait()  # the previous copy is done (or its error raised) before the next
        self.reports += 1
        attempt = self.info["attempt"]
        name, preemption = airt.get(self.coordinator.arrive.remote(
            attempt, self.info["world_rank"], self.reports,
            dict(metrics) if self.info["world_rank"] == 0 else None, part))
        if preemption is not None:
            self.preemption = preemption
        if part is None or name is None:
            return name
        destination = os.path.join(run_dir, name)
        if part[0] == "path":
            self.checkpoint = Checkpoint(part[1])
            return name
        coordinator, rank = self.coordinator, self.info["world_rank"]

        def upload(source, remove_source):
            copy_durably(source, destination)
            if remove_source:
                shutil.rmtree(source, ignore_errors=True)
            airt.get(coordinator.part_done.remote(attempt, name, rank))
            self.checkpoint = Checkpoint(destination)
        if mode == CheckpointUploadMode.ASYNC:
            self.uploader.start(lambda: upload(local, True))
        else:
            upload(checkpoint.path, bool(delete_local))
        return name

    def finish(self):
        """The loop returned: the last upload completes, then the coordinator hears of it."""
        import airt
        self.uploader.wait()
        airt.get(self.coordinator.finished.remote(self.info["attempt"], self.info["world_rank"],
                                                  self.reports))


def _current(name):
    if _session is None:
        raise RuntimeError(f"airt.train.{name}() is called outside a training loop "
                           f"(DataParallelTrainer / TorchTrainer ranks)")
    return _session


def report(metrics, checkpoint=None, checkpoint_dir_name=None,
           checkpoint_upload_mode=CheckpointUploadMode.SYNC,
           delete_local_checkpoint_after_upload=None, **unsupported):
    """Reports this rank's metrics and its part of a checkpoint (a folder) for this step. A
    barrier: every rank calls it equally often, and it returns once every rank reached it (and
    this rank's part is copied, with SYNC). Only rank 0's metrics are kept. The checkpoint
    becomes the latest once every rank's part is in storage. checkpoint_dir_name is accepted;
    folders are named checkpoint_<n>, the same on every rank. Called by a Tune function
    trainable itself (not a rank), it is tune.report."""
    if unsupported:
        from airt import exceptions
        raise exceptions.UnimplementedError(
            f"airt.train.report({', '.join(sorted(unsupported))}=...) is not built")
    if not isinstance(metrics, dict):
        raise TypeError(f"report() takes a dict of metrics, not {type(metrics).__name__}")
    import sys
    if "torch" in sys.modules:
        import torch
        if any(isinstance(v, torch.Tensor) for v in metrics.values()):
            raise ValueError("report(metrics) holds a torch.Tensor: pass numbers (.item()) and "
                             "put tensors into the checkpoint's files")
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        raise TypeError("report(checkpoint=) takes an airt.train.Checkpoint")
    if _session is None:
        from airt.tune import _train_bridge
        trial = _train_bridge.current_trial()
        if trial is not None:  # a Tune function trainable's own report (Ray 2.x: one report)
            trial.report(metrics, checkpoint)
            return
    _current("report").report(metrics, checkpoint, checkpoint_dir_name, checkpoint_upload_mode,
                              delete_local_checkpoint_after_upload)


def get_preemption_info():
    """A PreemptionInfo when a node holding ranks of this gang is draining (`airt drain`, a
    provider's preemption notice), else None. Checkpoint then: the next report(...,
    checkpoint=...) returns once that checkpoint is complete and raises PreemptionError, and the
    gang restarts from it on other nodes (docs/train.md "Preemption")."""
    return _current("get_preemption_info").preemption_info()


def get_checkpoint():
    """The checkpoint this rank resumes from (the latest complete one when the gang restarted
    or the run resumed), or the latest it reported since; None at a fresh start. In a Tune
    function trainable: tune.get_checkpoint()."""
    if _session is None:
        from airt.tune import _train_bridge
        trial = _train_bridge.current_trial()
        if trial is not None:
            return trial.checkpoint
    return _current("get_checkpoint").checkpoint


def get_context():
    return TrainContext(_current("get_context"))


def get_dataset_shard(dataset_name=None):
    """This rank's shard of the trainer's dataset `dataset_name` (one of streaming_split's
    iterators); the only one when None. None when the trainer has no such dataset."""
    shards = _current("get_dataset_shard").shards
    if dataset_name is None:
        if len(shards) > 1:
            raise ValueError(f"get_dataset_shard(): the trainer has several datasets "
                             f"({sorted(shards)}); name one")
        return next(iter(shards.values()), None)
    return shards.get(dataset_name)
