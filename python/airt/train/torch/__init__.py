"""airt.train.torch: TorchTrainer and the loop's helpers, as Ray Train 2.60's ray.train.torch.
TorchTrainer initialises torch.distributed on every rank before the loop runs (nccl where the
rank sees a CUDA device, gloo otherwise, or TorchConfig(backend=))."""

import dataclasses
import os
from typing import Optional

from airt.train.trainer import DataParallelTrainer


@dataclasses.dataclass
class TorchConfig:
    """backend: "nccl", "gloo", or None (nccl with a CUDA device, else gloo); timeout_s: the
    process group's timeout."""
    backend: Optional[str] = None
    init_method: str = "env"
    timeout_s: int = 1800

    def __post_init__(self):
        if self.backend not in (None, "nccl", "gloo"):
            raise ValueError(f"TorchConfig(backend=) must be 'nccl', 'gloo' or None, got "
                             f"{self.backend!r}")
        if self.init_method != "env":
            from airt import exceptions
            raise exceptions.UnimplementedError("TorchConfig(init_method=) other than 'env'")


class TorchTrainer(DataParallelTrainer):
    """DataParallelTrainer with torch.distributed initialised on each rank."""

    def __init__(self, train_loop_per_worker, *, train_loop_config=None, torch_config=None,
                 scaling_config=None, run_config=None, datasets=None, dataset_config=None,
                 resume_from_checkpoint=None, metadata=None):
        super().__init__(train_loop_per_worker, train_loop_config=train_loop_config,
                         scaling_config=scaling_config, run_config=run_config,
                         datasets=datasets, dataset_config=dataset_config,
                         resume_from_checkpoint=resume_from_checkpoint, metadata=metadata)
        config = torch_config or TorchConfig()
        self._torch_backend = config.backend or "auto"
        self._timeout_s = config.timeout_s


def get_device():
    """This rank's device: cuda:<LOCAL_RANK> among its visible GPUs, else cpu."""
    import torch
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % max(1, count))
    return torch.device("cpu")


def get_devices():
    return [get_device()]


def prepare_model(model, move_to_device=True, parallel_strategy="ddp",
                  parallel_strategy_kwargs=None):
    """Moves the model to this rank's device and wraps it in DistributedDataParallel when the
    world is larger than one rank (parallel_strategy "ddp", or None for no wrap)."""
    import torch
    import torch.distributed as dist
    if parallel_strategy not in ("ddp", None):
        from airt import exceptions
        raise exceptions.UnimplementedError(f"prepare_model(parallel_strategy="
                                            f"{parallel_strategy!r}): only 'ddp' is built")
    device = get_device()
    if move_to_device:
        model = model.to(device if move_to_device is True else move_to_device)
    if parallel_strategy == "ddp" and dist.is_initialized() and dist.get_world_size() > 1:
        kwargs = dict(parallel_strategy_kwargs or {})
        if device.type == "cuda":
            kwargs.setdefault("device_ids", [device.index])
            kwargs.setdefault("output_device", device.index)
        model = torch.nn.parallel.DistributedDataParallel(model, **kwargs)
    return model


class _DeviceLoader:
    """A DataLoader whose batches are moved to the rank's device; set_epoch reaches the
    sampler."""

    def __init__(self, loader, device):
        self._loader, self._device = loader, device

    def __len__(self):
        return len(self._loader)

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def __iter__(self):
        for batch in self._loader:
            yield _move(batch, self._device)


def _move(batch, device):
    import torch
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_move(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _move(v, device) for k, v in batch.items()}
    return batch


def prepare_data_loader(data_loader, add_dist_sampler=True, move_to_device=True,
                        auto_transfer=True):
    """The loader again with a DistributedSampler (each rank its share; shuffled when the
    loader shuffled), and its batches moved to the rank's device. Call
    loader.sampler.set_epoch(epoch) each epoch, as with torch."""
    import torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler, RandomSampler
    if add_dist_sampler and dist.is_initialized() and dist.get_world_size() > 1 \
            and not isinstance(data_loader.sampler, DistributedSampler):
        shuffle = isinstance(data_loader.sampler, RandomSampler)
        sampler = DistributedSampler(data_loader.dataset, shuffle=shuffle)
        data_loader = DataLoader(
            data_loader.dataset, batch_size=data_loader.batch_size, sampler=sampler,
            num_workers=data_loader.num_workers, collate_fn=data_loader.collate_fn,
            pin_memory=data_loader.pin_memory, drop_last=data_loader.drop_last,
            timeout=data_loader.timeout, worker_init_fn=data_loader.worker_init_fn,
            generator=data_loader.generator)
    if move_to_device:
        device = get_device()
        if device.type != "cpu":
            return _DeviceLoader(data_loader, device)
    return data_loader


def enable_reproducibility(seed=0):
    """Fixed seeds and torch's deterministic algorithms on this rank."""
    import random
    import numpy
    import torch
    torch.manual_seed(seed)
    random.seed(seed)
    numpy.random.seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


__all__ = ["TorchConfig", "TorchTrainer", "enable_reproducibility", "get_device", "get_devices",
           "prepare_data_loader", "prepare_model"]
