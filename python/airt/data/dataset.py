"""Dataset, MaterializedDataset and GroupedData, as Ray Data's (2.60).

A Dataset is a lazy plan (airt.data._plan); transforms return new Datasets, and consuming one
(iter_batches, take, write_*, materialize, ...) runs the streaming executor.
"""

import itertools

import numpy as np
import pyarrow as pa

import airt
from airt.data import _all_to_all as A
from airt.data import _plan
from airt.data import _transforms as T
from airt.data import block as B
from airt.data._stats import DatasetStats
from airt.data.compute import strategy_for
from airt.data.iterator import DataIterator


def _map_options(num_cpus, num_gpus, memory, resources, ray_remote_args):
    options = dict(ray_remote_args or {})
    if num_cpus is not None:
        options["num_cpus"] = num_cpus
    if num_gpus is not None:
        options["num_gpus"] = num_gpus
    if memory is not None:
        options["memory"] = memory
    if resources is not None:
        options["resources"] = resources
    return options


class Dataset:
    def __init__(self, plan):
        self._plan = list(plan)
        self._stats = DatasetStats()

    def _with(self, op):
        return Dataset(self._plan + [op])

    def __repr__(self):
        return f"{type(self).__name__}(plan={[op[0] for op in self._plan]})"

    # ---- one-to-one transforms
    def map_batches(self, fn, *, batch_size=None, compute=None, batch_format="default",
                    zero_copy_batch=True, fn_args=None, fn_kwargs=None,
                    fn_constructor_args=None, fn_constructor_kwargs=None, num_cpus=None,
                    num_gpus=None, memory=None, concurrency=None, resources=None,
                    **ray_remote_args):
        if batch_size == "auto":
            batch_size = None
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}")
        compute = strategy_for(fn, compute, concurrency, fn_constructor_args)
        if isinstance(fn, type) and num_cpus is None and num_gpus:
            num_cpus = 0  # a GPU actor needs no CPU of its own, as Ray's default
        transform = T.MapBatches(fn, batch_size, batch_format, fn_args, fn_kwargs)
        options = _map_options(num_cpus, num_gpus, memory, resources, ray_remote_args)
        return self._with(("map", transform, compute, options,
                           tuple(fn_constructor_args or ()), dict(fn_constructor_kwargs or {})))

    def _row_op(self, kind, fn, compute, concurrency, fn_args, fn_kwargs, fn_constructor_args,
                num_cpus, num_gpus, memory, resources, ray_remote_args,
                fn_constructor_kwargs=None):
        compute = strategy_for(fn, compute, concurrency, fn_constructor_args)
        options = _map_options(num_cpus, num_gpus, memory, resources, ray_remote_args)
        return self._with(("map", T.RowTransform(kind, fn, fn_args, fn_kwargs), compute,
                           options, tuple(fn_constructor_args or ()),
                           dict(fn_constructor_kwargs or {})))

    def map(self, fn, *, compute=None, fn_args=None, fn_kwargs=None, fn_constructor_args=None,
            num_cpus=None, num_gpus=None, memory=None, concurrency=None, resources=None,
            **ray_remote_args):
        return self._row_op("map", fn, compute, concurrency, fn_args, fn_kwargs,
                            fn_constructor_args, num_cpus, num_gpus, memory, resources,
                            ray_remote_args)

    def flat_map(self, fn, *, compute=None, fn_args=None, fn_kwargs=None,
                 fn_constructor_args=None, num_cpus=None, num_gpus=None, memory=None,
                 concurrency=None, resources=None, **ray_remote_args):
        return self._row_op("flat_map", fn, compute, concurrency, fn_args, fn_kwargs,
                            fn_constructor_args, num_cpus, num_gpus, memory, resources,
                            ray_remote_args)

    def filter(self, fn=None, expr=None, *, compute=None, fn_args=None, fn_kwargs=None,
               fn_constructor_args=None, fn_constructor_kwargs=None, num_cpus=None,
               num_gpus=None, memory=None, concurrency=None, resources=None, **ray_remote_args):
        """Rows for which fn(row) is true, or for which the string predicate `expr` holds
        (airt.data._expressions: parsed, never evaluated as Python, and computed by pyarrow
        over each block's columns). A malformed expression, or a column the dataset is known
        not to have, is a ValueError here; other columns are checked in each block."""
        if (fn is None) == (expr is None):
            raise ValueError("Exactly one of 'fn' or 'expr' must be provided.")
        if expr is None:
            return self._row_op("filter", fn, compute, concurrency, fn_args, fn_kwargs,
                                fn_constructor_args, num_cpus, num_gpus, memory, resources,
                                ray_remote_args, fn_constructor_kwargs)
        if any(a is not None for a in (fn_args, fn_kwargs, fn_constructor_args,
                                       fn_constructor_kwargs)):
            raise ValueError("when 'expr' is used, 'fn_args/fn_kwargs' or "
                             "'fn_constructor_args/fn_constructor_kwargs' cannot be used.")
        from airt.data._expressions import Predicate
        predicate = Predicate(expr)
        known = _plan.known_columns(self._plan)
        if known is not None:
            predicate.check_columns(known)
        options = _map_options(num_cpus, num_gpus, memory, resources, ray_remote_args)
        return self._with(("map", T.ExpressionFilter(predicate),
                           strategy_for(None, compute, concurrency, None), options, (), {}))

    def add_column(self, col, fn, *, batch_format="pandas", compute=None, concurrency=None,
                   **ray_remote_args):
        return self._with(("map", T.Columns("add_column", col, fn, batch_format),
                           strategy_for(fn, compute, concurrency, None), ray_remote_args, (), {}))

    def _columns(self, kind, names):
        return self._with(("map", T.Columns(kind, names), None, {}, (), {}))

    def drop_columns(self, cols, **_):
        return self._columns("drop_columns", list(cols))

    def select_columns(self, cols, **_):
        return self._columns("select_columns", [cols] if isinstance(cols, str) else list(cols))

    def rename_columns(self, names, **_):
        return self._columns("rename_columns", dict(names))

    def limit(self, limit):
        if not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit must be a non-negative int, got {limit!r}")
        return self._with(("limit", limit))

    # ---- all-to-all transforms
    def _all(self, name, fn):
        return self._with(("all", name, fn))

    def repartition(self, num_blocks=None, *, shuffle=False, target_num_rows_per_block=None):
        if num_blocks is None and target_num_rows_per_block is None:
            raise ValueError("repartition() needs num_blocks or target_num_rows_per_block")
        if shuffle:
            return self._all("Repartition",
                             lambda b, ctx: A.random_shuffle(b, None, num_blocks, ctx))

        def fn(blocks, ctx):
            n = num_blocks
            if n is None:
                total = sum(m["num_rows"] for _, m in blocks)
                n = max(1, -(-total // target_num_rows_per_block))
            return A.repartition(blocks, n, ctx)
        return self._all("Repartition", fn)

    def random_shuffle(self, *, seed=None, num_blocks=None, **_):
        return self._all("RandomShuffle",
                         lambda b, ctx: A.random_shuffle(b, seed, num_blocks, ctx))

    def randomize_block_order(self, *, seed=None):
        def fn(blocks, ctx):
            order = np.random.default_rng(seed).permutation(len(blocks))
            return [blocks[i] for i in order]
        return self._all("RandomizeBlockOrder", fn)

    def sort(self, key, descending=False):
        if isinstance(descending, (list, tuple)):
            descending = bool(descending[0])
        return self._all("Sort", lambda b, ctx: A.sort(b, key, descending, ctx))

    def groupby(self, key):
        return GroupedData(self, key)

    def union(self, *others):
        datasets = [self] + list(others)

        def fn(blocks, ctx):
            out = list(blocks)
            for other in datasets[1:]:
                out.extend(other._blocks(ctx))
            return out
        return self._all("Union", fn)

    def zip(self, *others):
        def fn(blocks, ctx):
            for other in others:
                blocks = A.zip_blocks(blocks, other._blocks(ctx), ctx)
            return blocks
        return self._all("Zip", fn)

    # ---- execution
    def _blocks(self, context=None):
        """The output blocks, all of them (executing the plan; `context`: the DataContext of
        the execution this is part of, else the current one)."""
        self._stats = DatasetStats()  # stats() describes the latest execution
        return _plan.materialize(self._plan, self._stats, context)

    def _stream(self):
        self._stats = DatasetStats()
        return _plan.stream(self._plan, self._stats)

    def materialize(self):
        from airt.data.dataset import MaterializedDataset
        blocks = self._blocks()
        ds = MaterializedDataset(blocks)
        ds._stats = self._stats
        return ds

    def stats(self):
        return self._stats.to_string()

    def _tables(self):
        for ref, _ in self._stream():
            yield airt.get(ref)

    # ---- consumption
    def iterator(self):
        return DataIterator(self)

    def iter_batches(self, *, prefetch_batches=1, batch_size=256, batch_format="default",
                     drop_last=False, local_shuffle_buffer_size=None, local_shuffle_seed=None,
                     _collate_fn=None):
        return self.iterator().iter_batches(
            prefetch_batches=prefetch_batches, batch_size=batch_size, batch_format=batch_format,
            drop_last=drop_last, local_shuffle_buffer_size=local_shuffle_buffer_size,
            local_shuffle_seed=local_shuffle_seed, _collate_fn=_collate_fn)

    def iter_torch_batches(self, **kwargs):
        return self.iterator().iter_torch_batches(**kwargs)

    def iter_rows(self):
        return self.iterator().iter_rows()

    def take_batch(self, batch_size=20, *, batch_format="default"):
        tables, count = [], 0
        for table in self.limit(batch_size)._tables():
            tables.append(table)
            count += table.num_rows
        if count == 0:
            raise ValueError("The dataset is empty.")
        return B.to_batch(B.concat(tables), batch_format)

    def take(self, limit=20):
        return list(itertools.islice(self.limit(limit).iter_rows(), limit))

    def take_all(self, limit=None):
        rows = []
        for row in self.iter_rows():
            rows.append(row)
            if limit is not None and len(rows) > limit:
                raise ValueError(f"The dataset has more than the given limit of {limit} records.")
        return rows

    def show(self, limit=20):
        for row in self.take(limit):
            print(row)

    def count(self):
        return sum(m["num_rows"] for _, m in self._stream())

    def schema(self):
        for table in self.limit(1)._tables():
            if table.num_columns:
                return Schema(table.schema)
        blocks = self._blocks()
        for ref, meta in blocks:
            table = airt.get(ref)
            if table.num_columns:
                return Schema(table.schema)
        return None

    def columns(self, fetch_if_missing=True):
        schema = self.schema()
        return None if schema is None else schema.names

    def num_blocks(self):
        return len(self._blocks())

    def size_bytes(self):
        return sum(m["size_bytes"] for _, m in self._blocks())

    def input_files(self):
        return []

    def to_pandas(self, limit=None):
        tables = list(self._tables())
        table = B.concat(tables)
        if limit is not None and table.num_rows > limit:
            raise ValueError(f"the dataset has more than the given limit of {limit} rows")
        return B.to_pandas(table)

    def to_arrow_refs(self):
        return [ref for ref, _ in self._blocks()]

    def split(self, n, *, equal=False, locality_hints=None):
        from airt.data.iterator import split_blocks
        return [MaterializedDataset(bs) for bs in split_blocks(self._blocks(), n, equal)]

    def split_at_indices(self, indices):
        """Datasets of the rows before indices[0], between each two, and after the last (as
        Ray's; an index past the end is the end): len(indices) + 1 datasets, some maybe empty."""
        indices = list(indices)
        if not indices:
            raise ValueError("indices must not be empty")
        if any(i < 0 for i in indices) or indices != sorted(indices):
            raise ValueError(f"indices must be sorted and non-negative, got {indices}")
        blocks = self._blocks()
        total = sum(m["num_rows"] for _, m in blocks)
        bounds = [0] + [min(i, total) for i in indices] + [total]
        counts = [b - a for a, b in zip(bounds, bounds[1:])]
        pieces = iter(A.reshape(blocks, [c for c in counts if c > 0]) if total else [])
        return [MaterializedDataset([next(pieces)] if c > 0 else []) for c in counts]

    def split_proportionately(self, proportions):
        """Datasets of the given shares of the rows, and one of the rest (as Ray's: each share
        > 0, their sum < 1)."""
        if not proportions or any(p <= 0 for p in proportions) or sum(proportions) >= 1:
            raise ValueError("proportions must be > 0 and sum to less than 1, got "
                             f"{list(proportions)}")
        total = self.count()
        indices, acc = [], 0.0
        for p in proportions:
            acc += p
            indices.append(int(total * acc))
        return self.split_at_indices(indices)

    def train_test_split(self, test_size, *, shuffle=False, seed=None, stratify=None):
        """(train, test), as Ray's: `test_size` a share of the rows (0 < f < 1) or a count of
        them; shuffle=True shuffles the rows first (seeded by `seed`)."""
        if stratify is not None:
            from airt.exceptions import UnimplementedError
            raise UnimplementedError("train_test_split(stratify=) is not built in airt.data: "
                                     "split by key with groupby or filter")
        ds = self.random_shuffle(seed=seed) if shuffle else self
        if isinstance(test_size, float):
            if not 0 < test_size < 1:
                raise ValueError(f"a float test_size must be in (0, 1), got {test_size}")
            return tuple(ds.split_proportionately([1 - test_size]))
        if isinstance(test_size, int):
            total = ds.count()
            if not 0 < test_size < total:
                raise ValueError(f"an int test_size must be in (0, {total}), got {test_size}")
            return tuple(ds.split_at_indices([total - test_size]))
        raise TypeError(f"test_size must be a float or an int, got {type(test_size).__name__}")

    def streaming_split(self, n, *, equal=False, locality_hints=None):
        from airt.data.iterator import streaming_split
        return streaming_split(self, n, equal, locality_hints)

    # ---- aggregates
    def _aggregate(self, on, kind, label=None):
        columns = [on] if isinstance(on, str) else list(on) if on is not None else None

        def partial(tables):
            table = tables[0]
            names = columns or [f.name for f in table.schema
                                if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)]
            out = {}
            for name in names:
                if name not in table.column_names:
                    if table.num_columns == 0:
                        continue
                    raise ValueError(f"no column {name!r} in {table.column_names}")
                values = table.column(name).drop_null().to_numpy(zero_copy_only=False)
                if len(values) == 0:
                    out[name] = None
                    continue
                v = values.astype(np.float64)
                out[name] = (len(values), values.sum(), values.min(), values.max(),
                             float(v.mean()), float(((v - v.mean()) ** 2).sum()))
            return out
        partials = A.run_values(partial, self._blocks())
        names = columns or list(dict.fromkeys(k for p in partials for k in p))
        results = {}
        for name in names:
            parts = [p[name] for p in partials if p.get(name) is not None]
            results[name] = _combine(parts, kind)
        if len(names) == 1:
            return results[names[0]]
        return {f"{label or kind}({k})": v for k, v in results.items()}

    def sum(self, on=None, ignore_nulls=True):
        return self._aggregate(on, "sum")

    def min(self, on=None, ignore_nulls=True):
        return self._aggregate(on, "min")

    def max(self, on=None, ignore_nulls=True):
        return self._aggregate(on, "max")

    def mean(self, on=None, ignore_nulls=True):
        return self._aggregate(on, "mean")

    def std(self, on=None, ddof=1, ignore_nulls=True):
        return self._aggregate(on, f"std{ddof}", "std")

    def unique(self, column):
        return sorted(set(itertools.chain.from_iterable(
            airt.get(ref).column(column).to_pylist() for ref, _ in self._blocks())),
            key=lambda v: (v is None, v))

    # ---- sinks
    def write_parquet(self, path, **kwargs):
        from airt.data.read_api import write_blocks
        write_blocks(self, path, "parquet", kwargs)

    def write_csv(self, path, **kwargs):
        from airt.data.read_api import write_blocks
        write_blocks(self, path, "csv", kwargs)

    def write_json(self, path, **kwargs):
        from airt.data.read_api import write_blocks
        write_blocks(self, path, "json", kwargs)

    def write_numpy(self, path, *, column, **kwargs):
        from airt.data.read_api import write_blocks
        write_blocks(self, path, "numpy", {"column": column, **kwargs})


def _combine(parts, kind):
    """One column's aggregate from per-block (count, sum, min, max, mean, m2)."""
    if not parts:
        return None
    if kind == "sum":
        return sum(p[1] for p in parts).item() if hasattr(parts[0][1], "item") else \
            sum(p[1] for p in parts)
    if kind == "min":
        return min(p[2] for p in parts).item()
    if kind == "max":
        return max(p[3] for p in parts).item()
    count = sum(p[0] for p in parts)
    mean = sum(p[0] * p[4] for p in parts) / count
    if kind == "mean":
        return mean
    ddof = int(kind[3:])
    m2 = sum(p[5] + p[0] * (p[4] - mean) ** 2 for p in parts)
    return float(np.sqrt(m2 / (count - ddof))) if count - ddof > 0 else None


class MaterializedDataset(Dataset):
    """A dataset whose blocks are in the object store (materialize(), from_* sources)."""

    def __init__(self, blocks, name=""):
        super().__init__([("blocks", list(blocks), name)])

    def num_blocks(self):
        return len(self._plan[0][1])

    def count(self):
        return sum(m["num_rows"] for _, m in self._plan[0][1])


class Schema:
    """A dataset's schema: names and types (pyarrow's), as Ray's Schema."""

    def __init__(self, arrow_schema):
        self.base_schema = arrow_schema
        self.names = list(arrow_schema.names)
        self.types = list(arrow_schema.types)

    def __eq__(self, other):
        return isinstance(other, Schema) and other.base_schema == self.base_schema

    def __repr__(self):
        return "Column  Type\n" + "\n".join(f"{n}  {t}" for n, t in zip(self.names, self.types))


class GroupedData:
    """ds.groupby(key): aggregates per group, sorted by key, as Ray's."""

    def __init__(self, dataset, key):
        self._ds = dataset
        self._key = key

    def _agg(self, aggs):
        key = self._key
        return self._ds._all("Aggregate",
                             lambda b, ctx: A.groupby_aggregate(b, key, aggs, ctx))

    def _on(self, name, on):
        cols = [on] if isinstance(on, str) else list(on)
        return self._agg([(name, c) for c in cols])

    def count(self):
        return self._agg([("count", None)])

    def sum(self, on):
        return self._on("sum", on)

    def min(self, on):
        return self._on("min", on)

    def max(self, on):
        return self._on("max", on)

    def mean(self, on):
        return self._on("mean", on)

    def std(self, on, ddof=1):
        return self._on("std", on)

    def map_groups(self, fn, *, batch_format="default", fn_args=None, fn_kwargs=None, **_):
        key = self._key
        return self._ds._all("MapGroups", lambda b, ctx: A.map_groups(
            b, key, fn, batch_format, tuple(fn_args or ()), dict(fn_kwargs or {}), ctx))
