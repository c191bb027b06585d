"""The options of @remote and .options(), checked as Ray checks them, and what they become: the
resource shape (a placement group's bundle names), the scheduling strategy the schedulers decide
(airt.util.scheduling_strategies), and the per-call settings a Python worker reads (num_returns,
retry_exceptions, runtime_env, whether child tasks stay in the placement group)."""

import cloudpickle

from airt import _airt
from airt import exceptions

TASK_OPTIONS = {
    "num_cpus", "num_gpus", "memory", "resources", "accelerator_type", "num_returns",
    "max_retries", "retry_exceptions", "scheduling_strategy", "name", "runtime_env",
    "_generator_backpressure_num_objects", "label_selector",
}
ACTOR_OPTIONS = {
    "num_cpus", "num_gpus", "memory", "resources", "accelerator_type", "max_restarts",
    "max_task_retries", "max_concurrency", "name", "namespace", "lifetime",
    "scheduling_strategy", "runtime_env", "get_if_exists", "label_selector",
}
TASK_DEFAULTS = dict(num_cpus=1, num_gpus=0, memory=None, resources=None, accelerator_type=None,
                     num_returns=1, max_retries=3, retry_exceptions=False,
                     scheduling_strategy=None, name=None, runtime_env=None,
                     _generator_backpressure_num_objects=None, label_selector=None)
ACTOR_DEFAULTS = dict(num_cpus=None, num_gpus=0, memory=None, resources=None,
                      accelerator_type=None, max_restarts=0, max_task_retries=0,
                      max_concurrency=None, name=None, namespace=None, lifetime=None,
                      scheduling_strategy=None, runtime_env=None, get_if_exists=False,
                      label_selector=None)


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
    """{"CPU": .., "GPU": .., "memory": .., custom...}: what the task holds; in a placement group
    (its strategy's, or the running task's when that captures its children), the bundle's names."""
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
    captured = _captured_group(strategy)
    if captured:
        return _airt.in_placement_group(shape, captured, -1)
    return shape


def _captured_group(strategy):
    """The hex id of the running task's placement group when the work (with no strategy of its
    own) is captured into it, as Ray's placement_group_capture_child_tasks; else None."""
    if strategy is not None:
        return None
    from airt import runtime_context
    if not runtime_context.captures_child_tasks():
        return None
    return runtime_context.get_runtime_context().get_placement_group_id()


def strategy_args(options):
    """(strategy, label_selector) as airt._airt takes them; ValueError for a bad one."""
    from airt.util.scheduling_strategies import _wire
    selector = options.get("label_selector")
    if selector is None:
        selector = {}
    if not isinstance(selector, dict):
        raise ValueError(f"label_selector must be a dict of str to str, got {selector!r}")
    for key, value in selector.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError(f"label_selector must be a dict of str to str, got {key!r}: "
                             f"{value!r}")
    return _wire(options.get("scheduling_strategy")), dict(selector)


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
    if _captures(options):
        settings["capture_pg"] = True
    return settings or None


def _captures(options):
    """Whether the work's own tasks and actors are to run in its placement group."""
    from airt.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    strategy = options.get("scheduling_strategy")
    if isinstance(strategy, PlacementGroupSchedulingStrategy):
        return bool(strategy.placement_group_capture_child_tasks)
    return _captured_group(strategy) is not None
