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
        fusable = (cur is not None and _resources(cur.options) == _resources(options) and
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
