"""The options of @remote and .options(), checked as Ray checks them, and what they become: the
resource shape, the node constraint a scheduling strategy adds, and the per-call settings a
Python worker reads (num_returns, retry_exceptions, runtime_env)."""

import time

import cloudpickle

from airt import _airt
from airt import exceptions

TASK_OPTIONS = {
    "num_cpus", "num_gpus", "memory", "resources", "accelerator_type", "num_returns",
    "max_retries", "retry_exceptions", "scheduling_strategy", "name", "runtime_env",
    "_generator_backpressure_num_objects",
}
ACTOR_OPTIONS = {
    "num_cpus", "num_gpus", "memory", "resources", "accelerator_type", "max_restarts",
    "max_task_retries", "max_concurrency", "name", "namespace", "lifetime",
    "scheduling_strategy", "runtime_env", "get_if_exists",
}
TASK_DEFAULTS = dict(num_cpus=1, num_gpus=0, memory=None, resources=None, accelerator_type=None,
                     num_returns=1, max_retries=3, retry_exceptions=False,
                     scheduling_strategy=None, name=None, runtime_env=None,
                     _generator_backpressure_num_objects=None)
ACTOR_DEFAULTS = dict(num_cpus=None, num_gpus=0, memory=None, resources=None,
                      accelerator_type=None, max_restarts=0, max_task_retries=0,
                      max_concurrency=None, name=None, namespace=None, lifetime=None,
                      scheduling_strategy=None, runtime_env=None, get_if_exists=False)

# A node-affinity request asks for this much of the node's own "node:<id>" resource.
_NODE_SLIVER = 0.001


def check(options, allowed, what):
    """Ray's ValueError for an option `what` ("remote functions", "actors") does not take."""
    for key in options:
        if key not in allowed:
            raise ValueError(f"Invalid option keyword {key} for {what}. "
                             f"Valid ones are {sorted(allowed)}.")
    resources = options.get("resources") or {}
    for reserved, option in (("CPU", "num_cpus"), ("GPU", "num_gpus"), ("memory", "memory")):
        if reserved in resources:
            raise ValueError(f"Use the '{option}' option instead of "
                             f"resources={{'{reserved}': ...}}")
    num_gpus = options.get("num_gpus") or 0
    if num_gpus > 1 and num_gpus != int(num_gpus):
        raise ValueError(f"num_gpus={num_gpus}: a request above 1 GPU must be whole")
    for counting in ("max_retries", "max_restarts", "max_task_retries"):
        count = options.get(counting)
        if count is not None and (not isinstance(count, int) or isinstance(count, bool)
                                  or count < -1):
            raise ValueError(f"The keyword '{counting}' only accepts None, 0, -1 or a positive "
                             f"integer, where -1 represents infinity, got {count!r}.")
    num_returns = options.get("num_returns", 1)
    if num_returns in ("dynamic", "streaming"):  # a generator's stream (airt.generator)
        return
    if not isinstance(num_returns, int) or num_returns < 0:
        raise ValueError(f"num_returns must be a whole number >= 0, got {num_returns!r}")


def resource_shape(options, default_cpus):
    """{"CPU": .., "GPU": .., "memory": .., custom..., node constraint}: what the task holds."""
    shape = {}
    cpus = options.get("num_cpus")
    cpus = default_cpus if cpus is None else cpus
    if cpus:
        shape["CPU"] = float(cpus)
    if options.get("num_gpus"):
        shape["GPU"] = float(options["num_gpus"])
    if options.get("memory"):
        shape["memory"] = float(options["memory"])
    shape.update({k: float(v) for k, v in (options.get("resources") or {}).items()})
    strategy = options.get("scheduling_strategy")
    from airt.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    if isinstance(strategy, PlacementGroupSchedulingStrategy):
        bundles = strategy.placement_group.bundle_specs
        index = strategy.placement_group_bundle_index
        if index >= len(bundles):
            raise ValueError(f"placement_group_bundle_index {index} is out of range: the group "
                             f"has {len(bundles)} bundles")
        return _airt.in_placement_group(shape, strategy.placement_group.id.hex(), index)
    node = _strategy_node(strategy, shape)
    if node:
        shape["node:" + node] = _NODE_SLIVER
    return shape


_spread_next = [0]


def _strategy_node(strategy, shape):
    """The node (hex id) a scheduling strategy pins the work to, or None for the default."""
    from airt.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    if strategy is None or strategy == "DEFAULT":
        return None
    if isinstance(strategy, NodeAffinitySchedulingStrategy):
        if not strategy.soft:
            return strategy.node_id
        fits = [n["NodeID"] for n in _fitting_nodes(shape)]
        return strategy.node_id if strategy.node_id in fits else None
    if strategy == "SPREAD":
        # Round-robin over the alive nodes whose totals fit, each call pinned to its node.
        fits = sorted(n["NodeID"] for n in _fitting_nodes(shape))
        if not fits:
            return None  # the default path reports the infeasible shape
        _spread_next[0] += 1
        return fits[_spread_next[0] % len(fits)]
    raise ValueError(f"scheduling_strategy={strategy!r}: expected 'DEFAULT', 'SPREAD' or a "
                     f"NodeAffinitySchedulingStrategy")


_NODES_TTL_S = 1.0  # SPREAD and soft affinity read the node list at most once a second
_nodes_cache = {"at": float("-inf"), "nodes": []}


def forget_nodes():
    """At shutdown: the next cluster's nodes are other ones."""
    _nodes_cache["at"] = float("-inf")


def _fitting_nodes(shape):
    now = time.monotonic()
    if now - _nodes_cache["at"] > _NODES_TTL_S:
        _nodes_cache.update(at=now, nodes=_airt.nodes())
    return [n for n in _nodes_cache["nodes"]
            if n["Alive"] and all(n["Resources"].get(k, 0.0) >= v for k, v in shape.items())]


def call_settings(options, runtime_env_key):
    """What the worker needs besides the arguments, or None when all are defaults."""
    settings = {}
    if options.get("num_returns", 1) != 1:
        settings["num_returns"] = options["num_returns"]
    retry = options.get("retry_exceptions")
    if retry:
        settings["max_retries"] = options.get("max_retries", 3)
        settings["retry_exceptions"] = (True if retry is True
                                        else cloudpickle.dumps(tuple(retry)))
    if runtime_env_key:
        settings["env"] = runtime_env_key
    return settings or None
