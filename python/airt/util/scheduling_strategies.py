"""Scheduling strategies, as Ray's ray.util.scheduling_strategies.

    f.options(scheduling_strategy="SPREAD").remote()
    f.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
    f.options(scheduling_strategy=NodeLabelSchedulingStrategy({"zone": In("a", "b")})).remote()
    f.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 0)).remote()
    f.options(label_selector={"accelerator_type": "H100", "zone": "in(a,b)"}).remote()

The strategy travels with the lease request (tasks) or the actor's entry (actors) and the
schedulers decide it (docs/cluster.md "Scheduling strategies"): "DEFAULT" packs onto the
submitter's node until half of it is used, then the least used node with room; "SPREAD" goes
round robin over the nodes with room; a hard node affinity runs the work on that node only (a dead
or unknown node fails it, naming the node), a soft one there while the node is alive and can hold
it. A placement-group strategy runs the work on the resources of bundle
`placement_group_bundle_index` of the group (-1: any of its bundles), which its own resource
request is taken from, as in Ray; with placement_group_capture_child_tasks=True the tasks and
actors it starts run in the group too unless they name a strategy of their own.
"""

import re

_GROUP_NAME = re.compile(r"^.+_group_(?:\d+_)?([0-9a-f]{36})$")


class NodeAffinitySchedulingStrategy:
    def __init__(self, node_id, soft, _spill_on_unavailable=False, _fail_on_unavailable=False):
        if not isinstance(node_id, str):
            raise TypeError("node_id must be the node's hex id (str)")
        if _spill_on_unavailable and not soft:
            raise ValueError("_spill_on_unavailable cannot be set when soft is False. "
                             "Please set soft to True to use _spill_on_unavailable.")
        if _fail_on_unavailable and soft:
            raise ValueError("_fail_on_unavailable cannot be set when soft is True. "
                             "Please set soft to False to use _fail_on_unavailable.")
        self.node_id = node_id
        self.soft = bool(soft)
        self._spill_on_unavailable = bool(_spill_on_unavailable)
        self._fail_on_unavailable = bool(_fail_on_unavailable)

    def __repr__(self):
        return f"NodeAffinitySchedulingStrategy(node_id={self.node_id!r}, soft={self.soft})"


class PlacementGroupSchedulingStrategy:
    """Run in a placement group's bundle (Ray's)."""

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


# The wire's LabelOperator values (common/proto/cluster.capnp).
_IN, _NOT_IN, _EXISTS, _DOES_NOT_EXIST = range(4)


class _LabelOperator:
    _op = None

    def __init__(self, *values):
        for v in values:
            if not isinstance(v, str):
                raise ValueError(f"label values must be strings, got {v!r}")
        self.values = list(values)

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(map(repr, self.values))})"


class In(_LabelOperator):
    _op = _IN

    def __init__(self, *values):
        if not values:
            raise ValueError("In takes at least one value")
        super().__init__(*values)


class NotIn(_LabelOperator):
    _op = _NOT_IN

    def __init__(self, *values):
        if not values:
            raise ValueError("NotIn takes at least one value")
        super().__init__(*values)


class Exists(_LabelOperator):
    _op = _EXISTS

    def __init__(self):
        super().__init__()


class DoesNotExist(_LabelOperator):
    _op = _DOES_NOT_EXIST

    def __init__(self):
        super().__init__()


def _expressions(what, expressions):
    if expressions is None:
        return {}
    if not isinstance(expressions, dict):
        raise ValueError(f"The {what} of NodeLabelSchedulingStrategy must be a dict of label "
                         f"key to In/NotIn/Exists/DoesNotExist, got {expressions!r}")
    for key, operator in expressions.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"NodeLabelSchedulingStrategy {what}: label keys must be non-empty "
                             f"strings, got {key!r}")
        if not isinstance(operator, _LabelOperator):
            raise ValueError(f"NodeLabelSchedulingStrategy {what}[{key!r}]: expected In, NotIn, "
                             f"Exists or DoesNotExist, got {operator!r}")
    return dict(expressions)


class NodeLabelSchedulingStrategy:
    """Ray's: nodes whose labels satisfy every `hard` expression; among them those that satisfy
    every `soft` one are preferred."""

    def __init__(self, hard, *, soft=None):
        self.hard = _expressions("hard", hard)
        self.soft = _expressions("soft", soft)
        if not self.hard and not self.soft:
            raise ValueError("The `hard` and `soft` parameter of NodeLabelSchedulingStrategy "
                             "cannot both be empty.")

    def __repr__(self):
        return f"NodeLabelSchedulingStrategy(hard={self.hard!r}, soft={self.soft!r})"


def _wire_expressions(expressions):
    return [(key, op._op, list(op.values)) for key, op in expressions.items()]


def _wire(strategy):
    """The tuple airt._airt takes for `strategy` (None for DEFAULT and placement groups, whose
    bundle travels as resource names). ValueError for anything else."""
    if strategy is None or strategy == "DEFAULT":
        return None
    if strategy == "SPREAD":
        return ("SPREAD",)
    if isinstance(strategy, NodeAffinitySchedulingStrategy):
        return ("NODE_AFFINITY", strategy.node_id, strategy.soft,
                strategy._spill_on_unavailable, strategy._fail_on_unavailable)
    if isinstance(strategy, NodeLabelSchedulingStrategy):
        return ("NODE_LABEL", _wire_expressions(strategy.hard), _wire_expressions(strategy.soft))
    if isinstance(strategy, PlacementGroupSchedulingStrategy):
        return None
    raise ValueError(f"scheduling_strategy={strategy!r}: expected 'DEFAULT', 'SPREAD', a "
                     "NodeAffinitySchedulingStrategy, NodeLabelSchedulingStrategy or "
                     "PlacementGroupSchedulingStrategy")


def _group_of_resources(resources):
    """The hex id of the placement group whose bundle resources `resources` names, or None."""
    for name in resources:
        m = _GROUP_NAME.match(name)
        if m:
            return m.group(1)
    return None
