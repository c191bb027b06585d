"""Placement groups, as Ray's ray.util.placement_group (docs/cluster.md "Placement groups").

    pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD")
    airt.get(pg.ready())          # or pg.wait(timeout_seconds=10)
    f.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 0)).remote()
    remove_placement_group(pg)

The head reserves every bundle or none, two-phase over the nodes; a group that fits no set of
alive nodes now waits and is reserved once nodes join or resources free up. One bigger than every
alive node stays pending as in Ray, with a warning on the driver (pg.wait) and its reason in
placement_group_table().
"""

import time
import warnings

from airt import _airt

_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
_STATES = ("PENDING", "CREATED", "REMOVED", "RESCHEDULING")

__all__ = ["PlacementGroup", "get_current_placement_group", "get_placement_group",
           "placement_group", "placement_group_table", "remove_placement_group"]


class PlacementGroupID:
    """The group's id (Ray's PlacementGroupID): hex() and binary()."""

    def __init__(self, hex_id):
        self._hex = hex_id

    def hex(self):
        return self._hex

    def binary(self):
        return bytes.fromhex(self._hex)

    def __eq__(self, other):
        return isinstance(other, PlacementGroupID) and other._hex == self._hex

    def __hash__(self):
        return hash(self._hex)

    def __repr__(self):
        return f"PlacementGroupID({self._hex})"


class PlacementGroup:
    """A handle to a placement group (Ray's ray.util.placement_group.PlacementGroup)."""

    def __init__(self, id, bundle_cache=None):
        self.id = id if isinstance(id, PlacementGroupID) else PlacementGroupID(id)
        self._bundle_cache = bundle_cache

    @property
    def bundle_specs(self):
        if self._bundle_cache is None:
            entry = _entry(self.id.hex())
            self._bundle_cache = [dict(b) for b in entry["bundles"]] if entry else []
        return self._bundle_cache

    @property
    def bundle_count(self):
        return len(self.bundle_specs)

    def ready(self):
        """An ObjectRef that is ready once every bundle is reserved (Ray's pg.ready())."""
        return _ready_task.remote(self.id.hex())

    def wait(self, timeout_seconds=30):
        """True once every bundle is reserved; False when `timeout_seconds` passed first."""
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        # Short slices, so that a group no node can ever hold is reported while waiting.
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = 1.0 if left is None else min(1.0, left)
            if _airt.wait_placement_group(self.id.hex(), step):
                return True
            _warn_if_infeasible(self.id.hex())
            if deadline is not None and time.monotonic() >= deadline:
                return False

    def __eq__(self, other):
        return isinstance(other, PlacementGroup) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return f"PlacementGroup(id={self.id.hex()})"

    def __reduce__(self):
        return PlacementGroup, (self.id.hex(), self._bundle_cache)


_warned = set()


def _warn_if_infeasible(hex_id):
    entry = _entry(hex_id)
    if entry and entry["infeasible"] and hex_id not in _warned:
        _warned.add(hex_id)
        warnings.warn(f"placement group {hex_id} cannot be placed on any alive node: "
                      f"{entry['pending_reason']}; it stays pending until such a node joins",
                      stacklevel=3)


def _entry(hex_id):
    for g in _airt.placement_groups():
        if g["id"] == hex_id:
            return g
    return None


def _make_ready_task():
    import airt

    @airt.remote(num_cpus=0, max_retries=0)
    def _placement_group_ready(hex_id):
        if not _airt.wait_placement_group(hex_id, -1):
            raise RuntimeError(f"placement group {hex_id} never became ready")
        return True
    return _placement_group_ready


class _LazyTask:
    def __init__(self):
        self._task = None

    def remote(self, *args):
        if self._task is None:
            self._task = _make_ready_task()
        return self._task.remote(*args)


_ready_task = _LazyTask()


def placement_group(bundles, strategy="PACK", name="", lifetime=None, _soft_target_node_id=None,
                    bundle_label_selector=None):
    """Asks the head to reserve `bundles` ({resource: amount} dicts) with `strategy`; returns at
    once (Ray's ray.util.placement_group)."""
    if not isinstance(bundles, (list, tuple)) or not bundles:
        raise ValueError("The placement group `bundles` argument must be a list of at least one "
                         f"dictionary, got {bundles!r}")
    for bundle in bundles:
        if not isinstance(bundle, dict) or not bundle:
            raise ValueError(f"Bundles must be non-empty dictionaries, got {bundle!r}")
        if all(v == 0 for v in bundle.values()):
            raise ValueError(f"Bundles cannot be an empty dictionary or resources with only 0 "
                             f"values. Bundles: {bundles}")
        for k, v in bundle.items():
            if not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"bundle resource {k!r}: amount {v!r} must be a number >= 0")
    if strategy not in _STRATEGIES:
        raise ValueError(f"Invalid placement group strategy {strategy}. Supported strategies "
                         f"are: {list(_STRATEGIES)}.")
    if lifetime not in (None, "detached"):
        raise ValueError("Placement group `lifetime` argument must be either `None` or "
                         f"'detached'. Got {lifetime}.")
    selectors = []
    if bundle_label_selector is not None:
        if (not isinstance(bundle_label_selector, (list, tuple))
                or len(bundle_label_selector) != len(bundles)):
            raise ValueError("bundle_label_selector must be a list with one dict per bundle, "
                             f"got {bundle_label_selector!r} for {len(bundles)} bundles")
        for selector in bundle_label_selector:
            if not isinstance(selector, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
                raise ValueError("each bundle_label_selector entry must be a dict of str to "
                                 f"str, got {selector!r}")
        selectors = [dict(s) for s in bundle_label_selector]
    clean = [{k: float(v) for k, v in b.items() if v} for b in bundles]
    try:
        hex_id = _airt.create_placement_group(name or "", clean, _STRATEGIES.index(strategy),
                                              lifetime == "detached", selectors)
    except _airt.Error as error:
        from airt import exceptions
        raise exceptions.translate(error) from None
    return PlacementGroup(hex_id, clean)


def remove_placement_group(placement_group):
    """Gives every bundle back and stops the group's tasks and actors."""
    if not isinstance(placement_group, PlacementGroup):
        raise TypeError("remove_placement_group takes a PlacementGroup")
    _airt.remove_placement_group(placement_group.id.hex())


def get_placement_group(placement_group_name):
    """The group named so in this job's namespace (not removed); ValueError when none."""
    if not placement_group_name:
        raise ValueError("Please supply a non-empty value to get_placement_group")
    ns = _airt.namespace()
    for g in _airt.placement_groups():
        if g["name"] == placement_group_name and g["namespace"] == ns and g["state"] != 2:
            return PlacementGroup(g["id"], [dict(b) for b in g["bundles"]])
    raise ValueError(f"Failed to look up placement group with name: {placement_group_name}")


def _table_entry(g):
    return {
        "placement_group_id": g["id"],
        "name": g["name"],
        "bundles": {i: dict(b) for i, b in enumerate(g["bundles"])},
        "bundles_to_node_id": {i: n for i, n in enumerate(g["bundle_nodes"])},
        "strategy": _STRATEGIES[g["strategy"]],
        "state": _STATES[g["state"]],
        "stats": {"scheduling_state": "INFEASIBLE" if g["infeasible"] else
                  ("FINISHED" if g["state"] == 1 else g["pending_reason"])},
        "is_detached": g["detached"],
    }


def placement_group_table(placement_group=None):
    """Ray's placement_group_table: one group's entry, or {hex id: entry} for all."""
    groups = _airt.placement_groups()
    if placement_group is not None:
        for g in groups:
            if g["id"] == placement_group.id.hex():
                return _table_entry(g)
        return {}
    return {g["id"]: _table_entry(g) for g in groups}


def get_current_placement_group():
    """The group the running task or actor was scheduled into, else None (in a driver too)."""
    import airt
    hex_id = airt.get_runtime_context().get_placement_group_id()
    return PlacementGroup(hex_id) if hex_id else None
