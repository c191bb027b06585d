"""The train layer's preemption hook (docs/train.md "Preemption"): when a node holding ranks of
the gang starts draining (`airt drain`, a provider's preemption notice), the ranks are told, the
gang checkpoints, and it restarts on other nodes from that checkpoint once the node has left,
counted against FailureConfig.max_preemption_failures instead of max_failures.

The coordinator watches the gang's nodes (watch_nodes): at each report() barrier, and when a rank
polls get_preemption_info(), it reads the head's view of those nodes (at most every
_CHECK_INTERVAL_S). The barrier's answer carries the drain to every rank at once, so the ranks
agree: a report() with a checkpoint during a drain returns only once that checkpoint is
committed, then raises PreemptionError on every rank, which ends the attempt."""

import dataclasses
import time
from typing import List, Optional

from airt._private import drain

_CHECK_INTERVAL_S = 0.25
# After a preemption, how long fit() waits beyond the drain's deadline for the node to leave
# before it starts the next gang anyway (the head places nothing on a draining node).
_LEAVE_GRACE_S = 60.0


@dataclasses.dataclass(frozen=True)
class PreemptionInfo:
    """A node of the gang is draining: its id (hex), why, when it stops what still runs there
    (Unix time, seconds), and the world ranks it holds."""
    node_id: str
    reason: str
    deadline_s: float
    world_ranks: List[int]

    def remaining_s(self):
        """Seconds left before the deadline (0 once it passed)."""
        return max(0.0, self.deadline_s - time.time())


class PreemptionError(RuntimeError):
    """Raised by report() on every rank once the checkpoint it made during a drain is complete:
    the attempt ends there, and fit() restarts the gang from that checkpoint on other nodes.
    A loop may raise it too (after its own checkpoint) to stop at once."""

    def __init__(self, message, info=None):
        super().__init__(message)
        self.info = info

    def __reduce__(self):
        return (self.__class__, (self.args[0] if self.args else "", self.info))


class NodeWatch:
    """The coordinator's side: the drains of the gang's nodes, read from the head at most every
    _CHECK_INTERVAL_S; the first one found stays for the attempt."""

    def __init__(self):
        self.ranks_of = {}   # node id -> world ranks
        self.found = None    # a PreemptionInfo's fields, as a dict
        self._checked = 0.0

    def watch(self, ranks_of):
        self.ranks_of, self.found, self._checked = dict(ranks_of), None, 0.0

    def check(self):
        if self.found is not None or not self.ranks_of:
            return self.found
        now = time.monotonic()
        if now - self._checked < _CHECK_INTERVAL_S:
            return None
        self._checked = now
        try:
            states = drain.drain_states()
        except Exception:  # noqa: BLE001 (the head is away: no news, asked again later)
            return None
        for node, ranks in self.ranks_of.items():
            state = states.get(node)
            if state is None:
                continue
            drained = state["death_cause"].startswith(drain.DRAINED_CAUSE)
            if state["draining"] or drained:
                self.found = {"node_id": node,
                              "reason": state["reason"] or state["death_cause"],
                              "deadline_s": state["deadline_s"], "world_ranks": list(ranks)}
                break
        return self.found


def gang_nodes(ranks):
    """{node id: world ranks} of a started gang's ranks."""
    out = {}
    for r in ranks:
        out.setdefault(r["node_id"], []).append(r["world_rank"])
    return out


def is_preemption(failure, seen, ranks_of):
    """Whether a GangFailure came from a drain: a rank raised PreemptionError, the coordinator
    saw one of the gang's nodes draining in the attempt (`seen`: its info, or None), or the
    failed rank's node left drained."""
    if isinstance(failure.cause, PreemptionError) or seen is not None:
        return True
    try:
        state = drain.drain_states().get(failure.node_id)
    except Exception:  # noqa: BLE001 (the head is away: count it as an ordinary failure)
        return False
    return state is not None and (state["draining"] or
                                  state["death_cause"].startswith(drain.DRAINED_CAUSE))


def classify(failure, coordinator, attempt, ranks_of):
    """Marks a GangFailure of attempt `attempt` (whose gang ran on `ranks_of`) with whether a
    drain caused it (`preempted`), the drain seen (`preemption`) and the gang's nodes; returns
    it."""
    import airt
    try:
        seen = airt.get(coordinator.preemption_info.remote(attempt))
    except Exception:  # noqa: BLE001 (the attempt is over: nothing seen)
        seen = None
    failure.preemption, failure.gang_nodes = seen, ranks_of
    failure.preempted = is_preemption(failure, seen, ranks_of)
    return failure


def wait_for_drained_nodes(ranks_of, seen):
    """Waits until no node of the finished gang is alive and draining any more (they left),
    at most until _LEAVE_GRACE_S past the latest deadline; the nodes still there then."""
    deadline = time.time() + _LEAVE_GRACE_S
    if seen is not None:
        deadline = max(deadline, seen["deadline_s"] + _LEAVE_GRACE_S)
    while True:
        try:
            states = drain.drain_states()
        except Exception:  # noqa: BLE001
            return []
        staying = [n for n in ranks_of if states.get(n, {}).get("alive") and
                   states[n]["draining"]]
        if not staying or time.time() > deadline:
            return staying
        time.sleep(0.2)


def info_of(found) -> Optional[PreemptionInfo]:
    return PreemptionInfo(**found) if found is not None else None
