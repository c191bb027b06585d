"""Scheduling strategies, as Ray's ray.util.scheduling_strategies.

    f.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
    f.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 0)).remote()

A hard affinity runs the work on that node only (an error naming the shape when the node is gone);
a soft one prefers it while it is alive and fits. "SPREAD" (a string, as in Ray) sends successive
calls to the fitting nodes in turn. A placement-group strategy runs the work on the resources of
bundle `placement_group_bundle_index` of the group (-1: any of its bundles), which its own
resource request is taken from, as in Ray.
"""

import re

_GROUP_NAME = re.compile(r"^.+_group_(?:\d+_)?([0-9a-f]{36})$")


class NodeAffinitySchedulingStrategy:
    def __init__(self, node_id, soft, _spill_on_unavailable=False, _fail_on_unavailable=False):
        if not isinstance(node_id, str):
            raise TypeError("node_id must be the node's hex id (str)")
        self.node_id = node_id
        self.soft = bool(soft)

    def __repr__(self):
        return f"NodeAffinitySchedulingStrategy(node_id={self.node_id!r}, soft={self.soft})"


class PlacementGroupSchedulingStrategy:
    """Run in a placement group's bundle (Ray's). Capturing child tasks
    (placement_group_capture_child_tasks=True) is not built: child tasks run outside the group
    unless given the strategy themselves."""

    def __init__(self, placement_group, placement_group_bundle_index=-1,
                 placement_group_capture_child_tasks=None):
        from airt.util.placement_group import PlacementGroup
        if not isinstance(placement_group, PlacementGroup):
            raise TypeError("placement_group must be a PlacementGroup, got "
                            f"{type(placement_group).__name__}")
        if not isinstance(placement_group_bundle_index, int) or placement_group_bundle_index < -1:
            raise ValueError("placement_group_bundle_index must be -1 or a bundle's index, got "
                             f"{placement_group_bundle_index!r}")
        self.placement_group = placement_group
        self.placement_group_bundle_index = placement_group_bundle_index
        self.placement_group_capture_child_tasks = placement_group_capture_child_tasks

    def __repr__(self):
        return (f"PlacementGroupSchedulingStrategy({self.placement_group!r}, "
                f"{self.placement_group_bundle_index})")


def _group_of_resources(resources):
    """The hex id of the placement group whose bundle resources `resources` names, or None."""
    for name in resources:
        m = _GROUP_NAME.match(name)
        if m:
            return m.group(1)
    return None
