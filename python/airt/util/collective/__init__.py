"""Collective communication among tasks and actors, shaped like Ray's ray.util.collective.

Groups run over airt's communicator (the Gloo backend on CPUs: numpy arrays and CPU torch
tensors); see docs/collective.md.
"""

from airt.util.collective.collective import (
    CollectiveTimeoutError,
    ReduceOp,
    allgather,
    allreduce,
    barrier,
    broadcast,
    create_collective_group,
    destroy_collective_group,
    get_collective_group_size,
    get_rank,
    init_collective_group,
    is_group_initialized,
    recv,
    reduce,
    reducescatter,
    send,
)

__all__ = [
    "CollectiveTimeoutError",
    "ReduceOp",
    "allgather",
    "allreduce",
    "barrier",
    "broadcast",
    "create_collective_group",
    "destroy_collective_group",
    "get_collective_group_size",
    "get_rank",
    "init_collective_group",
    "is_group_initialized",
    "recv",
    "reduce",
    "reducescatter",
    "send",
]
