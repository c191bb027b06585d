"""Where input blocks lie, so that map tasks and actor-pool calls run near them (Ray's core
places a task by its arguments' locations, and Ray Data's actor pools prefer an actor on the
block's node).

The executor's process owns the blocks it makes, so the owner's table (the core's object
locations, _airt.object_node_addresses) says which node's store holds each; the head's node
list maps that node's address to its id. A task is then given a soft node affinity to that node
that spills when the node has no room now (NodeAffinitySchedulingStrategy(node, soft=True,
_spill_on_unavailable=True)): it runs there when the node can take it, elsewhere otherwise,
never waiting for it. On a one-node cluster nothing is placed.
"""

import time

import airt
from airt import _airt

_REFRESH_S = 2.0  # the node list is read again at most this often (a node that joined)


class Locality:
    def __init__(self):
        self._by_address = {}
        self._read_at = None
        self._multi_node = False
        self._refresh()

    def _refresh(self):
        now = time.monotonic()
        if self._read_at is not None and now - self._read_at < _REFRESH_S:
            return
        self._read_at = now
        try:
            nodes = [n for n in airt.nodes() if n.get("Alive")]
        except Exception:  # local mode: one process, nowhere to place anything
            nodes = []
        self._by_address = {n["NodeManagerAddress"]: n["NodeID"] for n in nodes}
        self._multi_node = len(nodes) > 1

    def node_of(self, ref):
        """The id (hex) of the node whose store holds `ref`'s block, or None (held inline, not
        known to this process, or a one-node cluster)."""
        if not self._multi_node:
            self._refresh()
            if not self._multi_node:
                return None
        try:
            address = _airt.object_node_addresses([ref.binary()])[0]
        except Exception:
            return None
        if not address:
            return None
        if address not in self._by_address:
            self._refresh()
        return self._by_address.get(address)

    def strategy(self, ref):
        """The scheduling strategy that runs a call on `ref`'s node while it has room, or None."""
        node = self.node_of(ref)
        if node is None:
            return None
        from airt.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        return NodeAffinitySchedulingStrategy(node, soft=True, _spill_on_unavailable=True)
