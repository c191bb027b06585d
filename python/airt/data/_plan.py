"""A dataset's logical plan and how it becomes the executor's operators.

Logical operators (tuples kept by Dataset, never run until consumed):
  ("read", [read task], name)          a source of read tasks (airt.data.datasource)
  ("blocks", [(ref, meta)], name)      blocks already in the object store
  ("map", transform, compute, options, ctor_args, ctor_kwargs)
  ("limit", n)
  ("all", name, fn)                    an all-to-all op: fn(blocks, ctx) -> blocks

Planning fuses a read with the task-pool maps after it (and consecutive task-pool maps of the
same resources) into one operator, as Ray's operator fusion does; an actor-pool map is an
operator of its own. An all-to-all op is a barrier: what comes before it executes to the end
first (its blocks stay in the store), then it runs, then the rest streams from its output.
"""

import cloudpickle

from airt.data import _executor
from airt.data.compute import ActorPoolStrategy, TaskPoolStrategy
from airt.data.context import DataContext
from airt.data._stats import DatasetStats


def _resources(options):
    return (options.get("num_cpus", 1), options.get("num_gpus", 0),
            tuple(sorted((options.get("resources") or {}).items())))


def _fusable_options(a, b):
    """Whether maps of options `a` and `b` may run in one task: the same resources and the same
    other remote options (a scheduling strategy, memory, ...)."""
    def rest(options):
        return {k: v for k, v in options.items() if k not in ("num_cpus", "num_gpus",
                                                              "resources")}
    return _resources(a) == _resources(b) and rest(a) == rest(b)


def physical(source, rest):
    """The executor's operators for a source tuple and the maps/limits after it."""
    ops, cur = [], None
    if source[0] == "read":
        cur = _executor.Operator("task", f"Read{source[2]}", options={"num_cpus": 1})
        cur.inputs.extend(("read", cloudpickle.dumps(r)) for r in source[1])
    else:
        op = _executor.Operator("input", f"Input{source[2]}")
        op.inputs.extend(("block", ref, meta) for ref, meta in source[1])
        ops.append(op)
    for logical in rest:
        if logical[0] == "limit":
            if cur is not None:
                ops.append(cur)
                cur = None
            ops.append(_executor.Operator("limit", f"Limit[{logical[1]}]", limit=logical[1]))
            continue
        _, transform, compute, options, ctor_args, ctor_kwargs = logical
        if isinstance(compute, ActorPoolStrategy):
            if cur is not None:
                ops.append(cur)
                cur = None
            op = _executor.Operator("actor", transform.name, transform=transform,
                                    compute=compute, options=options)
            op.ctor_args, op.ctor_kwargs = ctor_args, ctor_kwargs
            ops.append(op)
            continue
        fusable = (cur is not None and _fusable_options(cur.options, options) and
                   (compute is None or compute.size is None) and cur.compute is None)
        if fusable:
            cur.chain.append(transform)
            cur.name += "->" + transform.name
            continue
        if cur is not None:
            ops.append(cur)
        cur = _executor.Operator("task", transform.name, chain=[transform], options=options,
                                 compute=compute if isinstance(compute, TaskPoolStrategy) and
                                 compute.size else None)
    if cur is not None:
        ops.append(cur)
    for op in ops:
        op.stats.name = op.name
    return ops


# All-to-all ops whose output has their input's columns.
_SAME_COLUMNS = ("Repartition", "RandomShuffle", "RandomizeBlockOrder", "Sort", "Union")


def known_columns(plan):
    """The columns `plan`'s output has, when they are known without running it (a source that
    knows its schema, then transforms whose columns follow from it), else None."""
    from airt.data import _transforms as T
    source = plan[0]
    if source[0] == "read":
        names = [getattr(r, "columns", lambda: None)() for r in source[1][:1]]
        names = names[0] if names else None
    else:
        names = next((m["columns"] for _, m in source[1] if m.get("columns")), None)
    for op in plan[1:]:
        if names is None:
            return None
        if op[0] == "all":
            names = names if op[1] in _SAME_COLUMNS else None
        elif op[0] == "map":
            transform = op[1]
            if isinstance(transform, T.ExpressionFilter) or (
                    isinstance(transform, T.RowTransform) and transform.kind == "filter"):
                continue
            names = transform.columns_after(names) if isinstance(transform, T.Columns) else None
    return None if names is None else list(names)


def execute(plan, stats=None, context=None):
    """Runs `plan` (a list of logical ops); the Executor streaming its output blocks."""
    ctx = (context or DataContext.get_current()).copy()
    stats = stats if stats is not None else DatasetStats()
    last = max((i for i, op in enumerate(plan) if op[0] == "all"), default=None)
    if last is None:
        source, rest = plan[0], plan[1:]
    else:
        before = materialize(plan[:last], stats, ctx)
        name, fn = plan[last][1], plan[last][2]
        source, rest = ("blocks", fn(before, ctx), f"[{name}]"), plan[last + 1:]
    executor = _executor.Executor(physical(source, rest), ctx)
    executor.stats_sink = stats
    return executor


def materialize(plan, stats=None, context=None):
    """The output blocks of `plan`, all of them, as [(ref, meta)]."""
    if len(plan) == 1 and plan[0][0] == "blocks":
        return list(plan[0][1])
    executor = execute(plan, stats, context)
    blocks = list(executor.blocks())
    if stats is not None:
        stats.add(executor)
    return blocks


def stream(plan, stats=None, context=None):
    """The output blocks of `plan` as they come; stats recorded when the stream ends."""
    executor = execute(plan, stats, context)
    try:
        yield from executor.blocks()
    finally:
        executor.close()
        if stats is not None:
            stats.add(executor)
