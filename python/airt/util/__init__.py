"""airt.util: Ray's ray.util names that airt provides (docs/python.md lists the rest)."""

import socket

from airt.util import queue
from airt.util import scheduling_strategies
from airt.util.placement_group import (get_current_placement_group, get_placement_group,
                                       placement_group, placement_group_table,
                                       remove_placement_group)
from airt.util.actor_pool import ActorPool
from airt.util.helpers import as_completed, map_unordered

__all__ = ["ActorPool", "as_completed", "get_current_placement_group", "get_node_ip_address",
           "get_placement_group", "map_unordered", "placement_group", "placement_group_table",
           "queue", "remove_placement_group", "scheduling_strategies"]


def get_node_ip_address(address="8.8.8.8:53"):
    """The IP address of the node this process runs on: its node's address once airt is
    initialized (127.0.0.1 for a local cluster, which listens on loopback), else the address
    this machine would reach `address` from (nothing is sent)."""
    from airt import _airt
    if _airt.is_initialized():
        local = [n for n in _airt.nodes() if n["Local"]]
        if local:
            return local[0]["NodeManagerAddress"].rsplit(":", 1)[0]
    host, _, port = address.rpartition(":")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, int(port)))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"
