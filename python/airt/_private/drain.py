"""Draining nodes from Python (docs/cluster.md "Draining a node"): the head's drainNode, as
`airt drain` calls it, and each node's drain as the head's cluster view shows it.

    from airt._private import drain
    deadline = drain.drain_node(node_id, reason="maintenance", deadline_s=60)
    drain.drain_states()[node_id]   # {"alive", "draining", "reason", "deadline_s", "death_cause"}

Ray's equivalent is the GCS's DrainNode (private there too: `ray drain-node` on the command
line)."""

import math

# The start of a drained node's death cause in the head's view (head/internal/node_table.cc).
DRAINED_CAUSE = "it was drained ("


def drain_node(node_id, *, reason="", deadline_s=600):
    """Drains node `node_id` (hex, as airt.get_runtime_context().get_node_id() gives): it takes
    no new work, what runs there has `deadline_s` seconds to finish, then the rest is stopped and
    the node leaves the cluster. Returns the deadline (Unix time, seconds). Drained again, a
    node keeps the earlier deadline. ValueError for a bad id or deadline, KeyError for an
    unknown node, RuntimeError when the node is dead or cannot be reached."""
    from airt import _airt
    if not _airt.is_initialized():
        raise RuntimeError("drain_node needs airt.init() first")
    if not isinstance(node_id, str):
        raise TypeError(f"node_id must be a hex string, got {type(node_id).__name__}")
    if (isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float))
            or not math.isfinite(deadline_s) or deadline_s <= 0):
        raise ValueError(f"deadline_s must be a number of seconds above 0, got {deadline_s!r}")
    if not isinstance(reason, str):
        raise TypeError("reason must be a str")
    return _airt.drain_node(node_id, reason, int(math.ceil(deadline_s * 1000))) / 1000.0


def drain_states():
    """{node id hex: {"alive", "draining", "reason", "deadline_s", "death_cause"}} for every
    node the head knows (deadline_s: Unix time; 0 when not draining)."""
    from airt import _airt
    return {node: {"alive": alive, "draining": draining, "reason": reason,
                   "deadline_s": deadline_ms / 1000.0, "death_cause": cause}
            for node, alive, draining, reason, deadline_ms, cause in _airt.drain_states()}
