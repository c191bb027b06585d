"""Where this process stands in a gang of ranks (@airt.distributed, airt.train): read from the
torchrun environment its launcher set (RANK, LOCAL_RANK, WORLD_SIZE, ...). Outside a gang, a
process is rank 0 of a world of one."""

import os

__all__ = ["get_global_rank", "get_local_rank", "get_local_world_size", "get_node_rank",
           "get_world_size"]


def _int(name, default):
    value = os.environ.get(name, "")
    return int(value) if value.strip().lstrip("-").isdigit() else default


def get_global_rank():
    """This rank's number among all ranks (RANK)."""
    return _int("RANK", 0)


def get_local_rank():
    """This rank's number among its node's ranks (LOCAL_RANK): its index into
    CUDA_VISIBLE_DEVICES."""
    return _int("LOCAL_RANK", 0)


def get_world_size():
    """How many ranks there are (WORLD_SIZE)."""
    return _int("WORLD_SIZE", 1)


def get_local_world_size():
    """How many ranks share this node (LOCAL_WORLD_SIZE)."""
    return _int("LOCAL_WORLD_SIZE", 1)


def get_node_rank():
    """This node's number among the gang's nodes (NODE_RANK)."""
    return _int("NODE_RANK", 0)
