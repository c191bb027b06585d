"""@airt.distributed: run one function on N ranks at once, the serverless-GPU way.

    @airt.distributed(gpus=16, gpu_type="H100")      # or num_workers=4 on CPUs
    def train(lr):
        import torch.distributed as dist
        dist.init_process_group("nccl")             # the torchrun environment is set
        ...
        return airt.runtime.get_global_rank()
    ranks = train.distributed(lr=0.1)                # [0, 1, ..., 15], in rank order

Each rank is an actor of a gang reserved as one placement group (PACK: as few nodes as
possible, so gpus= above one node's count spans nodes), started with MASTER_ADDR, MASTER_PORT,
RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, NODE_RANK and CUDA_VISIBLE_DEVICES (the node's
GPUs of the gang, in local-rank order). The first rank that raises fails the call: the others
are stopped and the caller gets the error with the rank, its node and the remote traceback."""

import functools

from airt import exceptions

__all__ = ["DistributedFunction", "distributed"]


class DistributedFunction:
    """A function made distributed: fn(...) runs it here, fn.distributed(...) on every rank."""

    def __init__(self, function, num_workers, bundle, placement_strategy, runtime_env):
        self._function = function
        self._num_workers, self._bundle = num_workers, bundle
        self._strategy, self._runtime_env = placement_strategy, runtime_env
        functools.update_wrapper(self, function)

    def __call__(self, *args, **kwargs):
        return self._function(*args, **kwargs)

    def distributed(self, *args, **kwargs):
        """Runs the function on every rank with these arguments; the ranks' return values in
        rank order. Raises the first failed rank's error (a RayTaskError that is also of the
        raised type, with .rank and .node_id), or ActorDiedError when a rank's process died."""
        from airt.train import _gang
        gang = _gang.Gang(self._num_workers, self._bundle, self._strategy, self._runtime_env)
        try:
            gang.start()
            gang.setup()
            return gang.run(self._function, [args] * self._num_workers, kwargs)
        except _gang.GangFailure as failure:
            raise _rank_error(failure, self._num_workers) from None
        finally:
            gang.shutdown()

    def options(self, **changes):
        """A copy with other decorator arguments (num_workers, gpus, gpu_type, ...)."""
        settings = dict(self._settings, **changes)
        return distributed(**settings)(self._function)


def _rank_error(failure, world_size):
    where = f"rank {failure.rank} of {world_size} (node {failure.node_id}, pid {failure.pid})"
    cause = failure.cause
    if failure.died:
        error = type(cause)(f"{where} died: {cause}") if isinstance(
            cause, exceptions.RayError) else exceptions.ActorDiedError(f"{where} died: {cause}")
    else:
        inner = getattr(cause, "cause", None)
        error = exceptions.RayTaskError(f"{where} {failure.what}", inner).as_instanceof_cause()
    error.rank, error.node_id = failure.rank, failure.node_id
    return error


def distributed(function=None, *, gpus=None, gpu_type=None, num_workers=None,
                cpus_per_worker=None, resources_per_worker=None, placement_strategy="PACK",
                runtime_env=None):
    """@airt.distributed(gpus=N, gpu_type="H100"): N ranks of one GPU each (on nodes of that
    accelerator type); @airt.distributed(num_workers=N): N CPU ranks. cpus_per_worker (default
    1), resources_per_worker (more resources per rank), placement_strategy (PACK, SPREAD,
    STRICT_PACK, STRICT_SPREAD) and runtime_env complete the request."""
    if gpus is not None and num_workers is not None and gpus != num_workers:
        raise ValueError("@airt.distributed: give gpus= (one rank per GPU) or num_workers=, "
                         "not both")
    count = gpus if gpus is not None else num_workers
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"@airt.distributed needs gpus= or num_workers= as a positive int, "
                         f"got {count!r}")
    if gpu_type is not None and gpus is None:
        raise ValueError("@airt.distributed(gpu_type=) needs gpus=")
    from airt.train.config import ScalingConfig
    resources = {"CPU": 1.0 if cpus_per_worker is None else float(cpus_per_worker)}
    if gpus is not None:
        resources["GPU"] = 1.0
    resources.update(resources_per_worker or {})
    bundle = ScalingConfig(num_workers=count, use_gpu=gpus is not None,
                           resources_per_worker=resources, placement_strategy=placement_strategy,
                           accelerator_type=gpu_type).bundle()
    settings = dict(gpus=gpus, gpu_type=gpu_type, num_workers=num_workers,
                    cpus_per_worker=cpus_per_worker, resources_per_worker=resources_per_worker,
                    placement_strategy=placement_strategy, runtime_env=runtime_env)

    def make(fn):
        if not callable(fn):
            raise TypeError("@airt.distributed decorates a function")
        made = DistributedFunction(fn, count, bundle, placement_strategy, runtime_env)
        made._settings = settings
        return made
    return make(function) if function is not None else make
