"""Scheduling strategies, as Ray's ray.util.scheduling_strategies.

    f.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()

A hard affinity runs the work on that node only (an error naming the shape when the node is gone);
a soft one prefers it while it is alive and fits. "SPREAD" (a string, as in Ray) sends successive
calls to the fitting nodes in turn.
"""


class NodeAffinitySchedulingStrategy:
    def __init__(self, node_id, soft, _spill_on_unavailable=False, _fail_on_unavailable=False):
        if not isinstance(node_id, str):
            raise TypeError("node_id must be the node's hex id (str)")
        self.node_id = node_id
        self.soft = bool(soft)

    def __repr__(self):
        return f"NodeAffinitySchedulingStrategy(node_id={self.node_id!r}, soft={self.soft})"


class PlacementGroupSchedulingStrategy:
    """Accepted as a type; scheduling with it raises UnimplementedError until placement groups."""

    def __init__(self, placement_group, placement_group_bundle_index=-1,
                 placement_group_capture_child_tasks=None):
        self.placement_group = placement_group
        self.placement_group_bundle_index = placement_group_bundle_index
        self.placement_group_capture_child_tasks = placement_group_capture_child_tasks
