"""All-to-all operations: repartition, random_shuffle, sort, groupby, zip, and the tasks of
aggregates. Each takes the input's blocks [(ref, meta)] and runs tasks over them; every block
goes to a task as a top-level argument (airt.data._tasks.blocks_task), never inside a value."""

import cloudpickle
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import airt
from airt.data import _tasks
from airt.data import block as B


def _task_cpus(ctx):
    """The CPUs of an all-to-all op's tasks and how many run at once (None: all): 1 each, or,
    in a streaming_split epoch whose consumers hold the CPUs (DataContext._spare_cpus below 1),
    none, at most one per consumer at once (as the executor's task operators then)."""
    spare = getattr(ctx, "_spare_cpus", None)
    if spare is not None and spare < 1:
        return 0, max(1, ctx._borrow_slots)
    return 1, None


def run(calls, ctx=None):
    """Runs each (fn, [block refs]) as a blocks_task; for each, the blocks it made. `ctx`: the
    execution's DataContext (its CPU sharing, _task_cpus)."""
    num_cpus, at_once = _task_cpus(ctx)
    task = _tasks.remote(_tasks.blocks_task).options(num_cpus=num_cpus, max_retries=3)
    step = at_once or max(1, len(calls))
    out = []
    for start in range(0, len(calls), step):
        gens = [task.remote(cloudpickle.dumps(fn), *refs) for fn, refs in calls[start:start + step]]
        for gen in gens:
            blocks = []
            for ref in gen:
                meta = airt.get(next(gen))
                blocks.append((ref, meta))
            out.append(blocks)
    return out


def run_values(fn, blocks):
    """fn(list of one table) for each block, as a small value per block (aggregates)."""
    task = _tasks.remote(_tasks.one_result).options(num_cpus=1)
    blob = cloudpickle.dumps(fn)
    return airt.get([task.remote(blob, ref) for ref, _ in blocks])


def _rows_plan(blocks, counts):
    """Which slices of `blocks` make outputs of the given row counts: per output
    [(block index, start, length)]."""
    plan, bi, at = [], 0, 0
    for want in counts:
        pieces = []
        while want > 0:
            n = blocks[bi][1]["num_rows"]
            take = min(want, n - at)
            if take > 0:
                pieces.append((bi, at, take))
            want -= take
            at += take
            if at >= n:
                bi, at = bi + 1, 0
        plan.append(pieces)
    return plan


def _slice_concat(pieces):
    def fn(tables):
        parts = [t.slice(start, length) for t, (_, start, length) in zip(tables, pieces)]
        yield B.concat(parts) if parts else B.empty()
    return fn


def reshape(blocks, counts, ctx=None):
    """Blocks of exactly the given row counts, cut from `blocks` in order."""
    blocks = [b for b in blocks if b[1]["num_rows"] > 0] or blocks[:1]
    plans = _rows_plan(blocks, counts)
    calls = [(_slice_concat(p), [blocks[bi][0] for bi, _, _ in p]) for p in plans]
    return [bs[0] for bs in run(calls, ctx)]


def repartition(blocks, n, ctx=None):
    total = sum(m["num_rows"] for _, m in blocks)
    counts = [total // n + (1 if i < total % n else 0) for i in range(n)]
    return reshape(blocks, counts, ctx)


def random_shuffle(blocks, seed, num_blocks=None, ctx=None):
    n = num_blocks or max(1, len(blocks))

    def mapper(index):
        def fn(tables):
            table = tables[0]
            rng = np.random.default_rng(None if seed is None else [seed, index])
            parts = rng.integers(0, n, size=table.num_rows)
            for j in range(n):
                yield table.take(pa.array(np.nonzero(parts == j)[0]))
        return fn

    def reducer(index):
        def fn(tables):
            table = B.concat(tables)
            rng = np.random.default_rng(None if seed is None else [seed, n + index])
            yield table.take(pa.array(rng.permutation(table.num_rows)))
        return fn

    mapped = run([(mapper(i), [ref]) for i, (ref, _) in enumerate(blocks)], ctx)
    reduced = run([(reducer(j), [m[j][0] for m in mapped]) for j in range(n)], ctx)
    return [bs[0] for bs in reduced]


def _keys(key):
    return [key] if isinstance(key, str) else list(key)


def _boundaries(blocks, key, n):
    """n-1 values of the first key splitting the rows into n ranges of about equal size."""
    samples = []
    for ref, meta in blocks:
        if meta["num_rows"] == 0:
            continue
        column = airt.get(ref).column(key)
        step = max(1, meta["num_rows"] // 64)
        samples.extend(column.to_pylist()[::step])
    samples = sorted(s for s in samples if s is not None)
    if not samples or n <= 1:
        return []
    return [samples[min(len(samples) - 1, (i * len(samples)) // n)] for i in range(1, n)]


def _range_partition(blocks, key, descending, reduce_fn, ctx=None):
    """Blocks partitioned by ranges of `key` (ascending or not), each range reduced."""
    blocks = [b for b in blocks if b[1]["num_rows"] > 0]
    if not blocks:
        return []
    keys = _keys(key)
    n = len(blocks)
    bounds = _boundaries(blocks, keys[0], n)

    def mapper(tables):
        table = tables[0]
        values = table.column(keys[0]).to_numpy(zero_copy_only=False)
        where = np.searchsorted(np.array(bounds, dtype=values.dtype), values, side="left") \
            if bounds else np.zeros(len(values), dtype=np.int64)
        for j in range(len(bounds) + 1):
            yield table.take(pa.array(np.nonzero(where == j)[0]))

    mapped = run([(mapper, [ref]) for ref, _ in blocks], ctx)
    order = range(len(bounds) + 1)
    if descending:
        order = reversed(order)
    reduced = run([(reduce_fn, [m[j][0] for m in mapped]) for j in order], ctx)
    return [b for bs in reduced for b in bs if b[1]["num_rows"] > 0]


def sort(blocks, key, descending=False, ctx=None):
    keys = _keys(key)
    direction = "descending" if descending else "ascending"

    def reducer(tables):
        table = B.concat(tables)
        yield table.sort_by([(k, direction) for k in keys]) if table.num_rows else table
    return _range_partition(blocks, key, descending, reducer, ctx)


_PA_AGG = {"sum": "sum", "min": "min", "max": "max", "mean": "mean", "std": "stddev",
           "count": "count_all"}


def groupby_aggregate(blocks, key, aggs, ctx=None):
    """aggs: [(name, column or None)]; columns named as Ray's: "count()", "sum(x)", ..."""
    keys = _keys(key)

    def reducer(tables):
        table = B.concat(tables)
        if table.num_rows == 0:
            return
        spec, names = [], []
        for name, column in aggs:
            if name == "count":
                spec.append(([], "count_all"))
                names.append("count()")
            elif name == "std":
                spec.append((column, "stddev", pc.VarianceOptions(ddof=1)))
                names.append(f"std({column})")
            else:
                spec.append((column, _PA_AGG[name]))
                names.append(f"{name}({column})")
        out = table.group_by(keys, use_threads=False).aggregate(spec)
        out = out.select(keys + [c for c in out.column_names if c not in keys])
        out = out.rename_columns(keys + names).sort_by([(k, "ascending") for k in keys])
        yield out
    return _range_partition(blocks, keys[0], False, reducer, ctx)


def map_groups(blocks, key, fn, batch_format, fn_args, fn_kwargs, ctx=None):
    keys = _keys(key)

    def reducer(tables):
        table = B.concat(tables)
        if table.num_rows == 0:
            return
        table = table.sort_by([(k, "ascending") for k in keys])
        columns = [table.column(k).to_pylist() for k in keys]
        start = 0
        for i in range(1, table.num_rows + 1):
            if i == table.num_rows or any(c[i] != c[start] for c in columns):
                group = table.slice(start, i - start)
                yield B.from_batch(fn(B.to_batch(group, batch_format), *fn_args, **fn_kwargs))
                start = i
    return _range_partition(blocks, keys[0], False, reducer, ctx)


def zip_blocks(left, right, ctx=None):
    """Left's blocks with right's columns beside them (right cut to left's row counts)."""
    counts = [m["num_rows"] for _, m in left]
    if sum(counts) != sum(m["num_rows"] for _, m in right):
        raise ValueError("zip: the datasets have different numbers of rows "
                         f"({sum(counts)} and {sum(m['num_rows'] for _, m in right)})")
    right = reshape(right, counts, ctx)

    def zipper(tables):
        a, b = tables
        for name in b.column_names:
            column, out = b.column(name), name
            while out in a.column_names:
                out += "_1"
            a = a.append_column(out, column)
        yield a
    return [bs[0] for bs in run([(zipper, [l[0], r[0]]) for l, r in zip(left, right)], ctx)]
