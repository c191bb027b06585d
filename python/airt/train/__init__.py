"""airt.train: data-parallel training with Ray Train 2.60's names (`from airt import train`).

    from airt import train
    from airt.train.torch import TorchTrainer, prepare_model, prepare_data_loader
    def loop(config):
        model = prepare_model(make_model())              # DDP over gloo (CPU) or nccl (GPU)
        for epoch in range(config["epochs"]):
            ...
            with tempfile.TemporaryDirectory() as d:
                torch.save(model.state_dict(), os.path.join(d, "model.pt"))
                train.report({"loss": loss}, checkpoint=train.Checkpoint.from_directory(d),
                             checkpoint_upload_mode=train.CheckpointUploadMode.ASYNC)
    result = TorchTrainer(loop, train_loop_config={"epochs": 3},
                          scaling_config=train.ScalingConfig(num_workers=2),
                          run_config=train.RunConfig(storage_path="/shared/runs")).fit()

The ranks are a gang of actors reserved as one placement group, each with the torchrun
environment; checkpoints go to storage_path; a failed rank restarts the gang from the latest
complete checkpoint; a draining node's ranks are told (get_preemption_info), checkpoint and
restart elsewhere (PreemptionError, FailureConfig.max_preemption_failures). docs/train.md has
the rest.
"""

from airt.train._preemption import PreemptionError, PreemptionInfo
from airt.train.config import (CheckpointConfig, CheckpointUploadMode, FailureConfig, RunConfig,
                               ScalingConfig)
from airt.train.result import Result, TrainingFailedError, WorkerGroupError
from airt.train.session import (TrainContext, get_checkpoint, get_context, get_dataset_shard,
                                get_preemption_info, report)
from airt.train.trainer import DataParallelTrainer
from airt.tune.trainable import Checkpoint

__all__ = [
    "Checkpoint", "CheckpointConfig", "CheckpointUploadMode", "DataParallelTrainer",
    "FailureConfig", "PreemptionError", "PreemptionInfo", "Result", "RunConfig",
    "ScalingConfig", "TrainContext", "TrainingFailedError", "WorkerGroupError", "get_checkpoint",
    "get_context", "get_dataset_shard", "get_preemption_info", "report",
]
