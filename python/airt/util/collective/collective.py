"""airt.util.collective's functions (Ray's ray.util.collective.collective shapes).

A process keeps its groups by name here (Ray's GroupManager); the bytes move in airt's C++
communicator (_airt.CollectiveGroup), which keeps each rank's progress for the hung-rank error.
"""

import enum
import json
import threading

import numpy as np

from airt import _airt
from airt.exceptions import GetTimeoutError, InvalidArgumentError

_KV_NAMESPACE = "airt_collective"
_DEFAULT_TIMEOUT_MS = 30000  # Ray's gloo_timeout


class ReduceOp(enum.IntEnum):
    """Ray's ReduceOp, plus AVERAGE (airt's own: SUM divided by the world size)."""

    SUM = 0
    PRODUCT = 1
    MIN = 2
    MAX = 3
    AVERAGE = 4


class CollectiveTimeoutError(GetTimeoutError):
    """A collective passed its group's deadline on this rank (airt's own; the message is the
    hung-rank error of docs/collective.md). group_name; rank: this rank; operation: "allreduce",
    "send", ...; sequence: the collective's number in the group (0 for send/recv);
    never_reached: [{"rank", "node", "pid"}] of the ranks that had not reached it when asked (a
    send/recv's peer). The group has failed: destroy it and create it again."""

    def __init__(self, message, group_name, rank, operation, sequence, never_reached):
        super().__init__(message)
        self.group_name, self.rank = group_name, rank
        self.operation, self.sequence = operation, sequence
        self.never_reached = [dict(r) for r in never_reached]

    def __reduce__(self):
        return (type(self), (str(self), self.group_name, self.rank, self.operation,
                             self.sequence, self.never_reached))


class _Member:
    """This process's membership of one group: the communicator's group, whose timeouts are
    raised as CollectiveTimeoutError."""

    def __init__(self, group, name):
        self._group, self.name = group, name
        self.rank, self.world_size, self.backend = group.rank, group.world_size, group.backend

    def run(self, operation, *args):
        try:
            getattr(self._group, operation)(*args)
        except GetTimeoutError as error:
            stall = self._group.stall()
            if stall is None:
                raise
            raise CollectiveTimeoutError(str(error), self.name, self.rank, stall["operation"],
                                         stall["sequence"], stall["never_reached"]) from None


class _Groups:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_name = {}


_groups = _Groups()


def _declaration_key(group_name):
    return f"{_airt.job_id()}/declared/{group_name}"


def _check_backend(backend):
    backend = str(getattr(backend, "value", backend)).lower()
    if backend not in ("gloo", "nccl"):
        raise InvalidArgumentError(f"unknown collective backend {backend!r} (gloo or nccl)")
    return backend


def init_collective_group(world_size, rank, backend="gloo", group_name="default",
                          gloo_timeout=_DEFAULT_TIMEOUT_MS):
    """Joins group `group_name` as `rank` of `world_size`; returns when every rank has joined.

    gloo_timeout: milliseconds, the deadline of joining and of every operation (Ray's default).
    """
    backend = _check_backend(backend)
    if not isinstance(group_name, str) or not group_name:
        raise InvalidArgumentError("group_name must be a non-empty string")
    with _groups.lock:
        if group_name in _groups.by_name:
            raise RuntimeError(f"Trying to initialize a group twice: '{group_name}'")
    if not 0 <= int(rank) < int(world_size):
        raise ValueError(f"rank {rank} is outside [0, {world_size})")
    group = _Member(_airt.CollectiveGroup(int(world_size), int(rank), backend, group_name,
                                          int(gloo_timeout)), group_name)
    with _groups.lock:
        _groups.by_name[group_name] = group


def create_collective_group(actors, world_size, ranks, backend="gloo", group_name="default",
                            gloo_timeout=_DEFAULT_TIMEOUT_MS):
    """Declares a group of `actors` (actor i is rank ranks[i]) from the driver; each actor joins
    on its first collective call in the group, as in Ray."""
    backend = _check_backend(backend)
    actors = list(actors)
    ranks = [int(r) for r in ranks]
    if len(actors) != len(ranks):
        raise ValueError(f"{len(actors)} actors but {len(ranks)} ranks")
    if len(actors) != world_size:
        raise ValueError(f"{len(actors)} actors for a world of {world_size}")
    if sorted(ranks) != list(range(world_size)):
        raise ValueError(f"ranks {ranks} are not 0..{world_size - 1}")
    ids = [a._actor_id.hex() for a in actors]
    declaration = {"world_size": world_size, "backend": backend, "timeout_ms": int(gloo_timeout),
                   "ranks": dict(zip(ids, ranks))}
    if not _airt.kv_put(_KV_NAMESPACE, _declaration_key(group_name),
                        json.dumps(declaration).encode(), False):
        raise RuntimeError(f"Trying to initialize a group twice: '{group_name}'")


def is_group_initialized(group_name="default"):
    with _groups.lock:
        return group_name in _groups.by_name


def destroy_collective_group(group_name="default"):
    """Leaves the group in this process; from the declaring driver, drops its declaration."""
    with _groups.lock:
        group = _groups.by_name.pop(group_name, None)
    if group is None:
        _airt.kv_delete(_KV_NAMESPACE, _declaration_key(group_name))
    del group


def get_rank(group_name="default"):
    """This process's rank in the group; -1 when it has not joined it."""
    with _groups.lock:
        group = _groups.by_name.get(group_name)
    return -1 if group is None else group.rank


def get_collective_group_size(group_name="default"):
    """The group's world size; -1 when this process has not joined it."""
    with _groups.lock:
        group = _groups.by_name.get(group_name)
    return -1 if group is None else group.world_size


def _group(group_name):
    with _groups.lock:
        group = _groups.by_name.get(group_name)
    if group is not None:
        return group
    raw = _airt.kv_get(_KV_NAMESPACE, _declaration_key(group_name))
    actor = None
    try:
        import airt
        actor = airt.get_runtime_context().get_actor_id()
    except Exception:  # noqa: BLE001 - not in an actor
        actor = None
    if raw is None or actor is None:
        raise RuntimeError(f"The collective group '{group_name}' is not initialized in the process.")
    declaration = json.loads(bytes(raw).decode())
    if actor not in declaration["ranks"]:
        raise RuntimeError(f"This actor is not a member of the collective group '{group_name}'.")
    init_collective_group(declaration["world_size"], declaration["ranks"][actor],
                          declaration["backend"], group_name, declaration["timeout_ms"])
    with _groups.lock:
        return _groups.by_name[group_name]


_TORCH_TYPES = {"int8": 0, "uint8": 1, "int32": 2, "int64": 3, "float16": 4, "float32": 5,
                "float64": 6}


def _array(tensor, group=None):
    """What the communicator takes for `tensor`: a numpy view of a numpy array or a CPU torch
    tensor (sharing its memory) for gloo; a (device address, count, type) tuple of a contiguous
    CUDA torch tensor for nccl."""
    nccl = group is not None and group.backend == "nccl"
    if type(tensor).__module__.startswith("torch"):
        if tensor.device.type == "cuda":
            if not nccl:
                raise InvalidArgumentError("a CUDA tensor needs the nccl backend; this group "
                                           "uses gloo")
            name = str(tensor.dtype).replace("torch.", "")
            if name not in _TORCH_TYPES or not tensor.is_contiguous():
                raise InvalidArgumentError(f"nccl takes contiguous tensors of {sorted(_TORCH_TYPES)}")
            return (tensor.data_ptr(), tensor.numel(), _TORCH_TYPES[name])
        if nccl:
            raise InvalidArgumentError("the nccl backend takes CUDA tensors; this one is on "
                                       + str(tensor.device))
        return tensor.detach().numpy()
    if isinstance(tensor, np.ndarray):
        if nccl:
            raise InvalidArgumentError("the nccl backend takes CUDA tensors, not numpy arrays")
        return tensor
    raise InvalidArgumentError(
        f"collectives take numpy arrays or torch tensors, not {type(tensor).__name__}")


def _op(op):
    return int(ReduceOp(op))


def allreduce(tensor, group_name="default", op=ReduceOp.SUM):
    """Reduces `tensor` over the group, in place on every rank."""
    group = _group(group_name)
    group.run("allreduce", _array(tensor, group), _op(op))


def allreduce_multigpu(*args, **kwargs):
    raise NotImplementedError("allreduce_multigpu needs the NCCL backend, which airt lacks")


def barrier(group_name="default"):
    _group(group_name).run("barrier")


def reduce(tensor, dst_rank=0, group_name="default", op=ReduceOp.SUM):
    """Reduces `tensor` over the group into dst_rank's (in place there; the others' stay)."""
    group = _group(group_name)
    group.run("reduce", _array(tensor, group), int(dst_rank), _op(op))


def broadcast(tensor, src_rank=0, group_name="default"):
    """src_rank's `tensor` into every rank's, in place."""
    group = _group(group_name)
    group.run("broadcast", _array(tensor, group), int(src_rank))


def allgather(tensor_list, tensor, group_name="default"):
    """Every rank's `tensor` into `tensor_list` (one tensor per rank, in rank order)."""
    group = _group(group_name)
    if len(tensor_list) != group.world_size:
        raise ValueError(f"tensor_list has {len(tensor_list)} tensors for a world of "
                         f"{group.world_size}")
    if group.backend == "nccl":
        import torch
        gathered = torch.empty((group.world_size,) + tuple(tensor.shape), dtype=tensor.dtype,
                               device=tensor.device)
        group.run("allgather", _array(tensor.contiguous(), group), _array(gathered, group))
        for i, out in enumerate(tensor_list):
            out.copy_(gathered[i].reshape(out.shape))
        return
    source = np.ascontiguousarray(_array(tensor))
    gathered = np.empty((group.world_size,) + source.shape, dtype=source.dtype)
    group.run("allgather", source, gathered)
    for i, out in enumerate(tensor_list):
        _array(out)[...] = gathered[i].reshape(_array(out).shape)


def reducescatter(tensor, tensor_list, group_name="default", op=ReduceOp.SUM):
    """Reduces `tensor_list` (one tensor per rank) over the group; rank r gets block r in
    `tensor`."""
    group = _group(group_name)
    if len(tensor_list) != group.world_size:
        raise ValueError(f"tensor_list has {len(tensor_list)} tensors for a world of "
                         f"{group.world_size}")
    if group.backend == "nccl":
        import torch
        stacked = torch.stack([t.reshape(tensor.shape) for t in tensor_list]).contiguous()
        group.run("reducescatter", _array(stacked, group), _array(tensor, group), _op(op))
        return
    out = _array(tensor)
    stacked = np.ascontiguousarray(np.stack([_array(t) for t in tensor_list]))
    if stacked.dtype != out.dtype or stacked[0].size != out.size:
        raise ValueError("tensor_list's tensors must match `tensor` in dtype and size")
    group.run("reducescatter", stacked, out, _op(op))


def send(tensor, dst_rank, group_name="default"):
    group = _group(group_name)
    group.run("send", _array(tensor, group), int(dst_rank))


def recv(tensor, src_rank, group_name="default"):
    group = _group(group_name)
    group.run("recv", _array(tensor, group), int(src_rank))
