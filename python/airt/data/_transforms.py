"""The one-to-one transforms a data task runs on its blocks (map, map_batches, filter, ...).

Each transform is a picklable callable from an iterator of tables to an iterator of tables; a
task applies a chain of them to its input (a read task's output, or one input block) and
emits the blocks that come out (airt.data._tasks).
"""

import inspect

import pyarrow as pa

from airt.data import block as B


class MapBatches:
    """fn(batch) -> batch (or a generator of batches), as Dataset.map_batches."""

    def __init__(self, fn, batch_size, batch_format, fn_args=(), fn_kwargs=None):
        if batch_format not in B.BATCH_FORMATS:
            raise ValueError(f"batch_format must be one of {B.BATCH_FORMATS}, "
                             f"got {batch_format!r}")
        self.fn = fn
        self.batch_size = batch_size
        self.batch_format = batch_format
        self.fn_args = tuple(fn_args or ())
        self.fn_kwargs = dict(fn_kwargs or {})
        self.name = f"MapBatches({getattr(fn, '__name__', type(fn).__name__)})"

    def bind(self, fn):
        """This transform with `fn` (an actor's instance of a callable class) in its place."""
        bound = MapBatches(fn, self.batch_size, self.batch_format, self.fn_args, self.fn_kwargs)
        bound.name = self.name
        return bound

    def __call__(self, tables):
        for table in B.rebatch(tables, self.batch_size):
            out = self.fn(B.to_batch(table, self.batch_format), *self.fn_args, **self.fn_kwargs)
            if inspect.isgenerator(out):
                for item in out:
                    yield B.from_batch(item)
            else:
                yield B.from_batch(out)


class RowTransform:
    """map, flat_map and filter: a function of each row (a dict)."""

    def __init__(self, kind, fn, fn_args=(), fn_kwargs=None):
        self.kind = kind
        self.fn = fn
        self.fn_args = tuple(fn_args or ())
        self.fn_kwargs = dict(fn_kwargs or {})
        self.name = f"{kind.title().replace('_', '')}({getattr(fn, '__name__', type(fn).__name__)})"

    def bind(self, fn):
        bound = RowTransform(self.kind, fn, self.fn_args, self.fn_kwargs)
        bound.name = self.name
        return bound

    def __call__(self, tables):
        fn, args, kwargs = self.fn, self.fn_args, self.fn_kwargs
        for table in tables:
            if table.num_rows == 0:
                continue
            rows = B.rows(table)
            if self.kind == "filter":
                keep = [bool(fn(r, *args, **kwargs)) for r in rows]
                yield table.filter(pa.array(keep, type=pa.bool_()))
                continue
            if self.kind == "map":
                out = []
                for r in rows:
                    value = fn(r, *args, **kwargs)
                    if not isinstance(value, dict):
                        raise ValueError(f"map's function must return a dict, got "
                                         f"{type(value).__name__}: {value!r}")
                    out.append(value)
            else:
                out = [item for r in rows for item in fn(r, *args, **kwargs)]
            yield B.from_rows(out)


class ExpressionFilter:
    """filter(expr="..."): the rows of each block whose predicate (airt.data._expressions) holds,
    computed by pyarrow over the block's columns."""

    def __init__(self, predicate):
        self.predicate = predicate
        self.name = f"Filter({predicate.text})"

    def __call__(self, tables):
        for table in tables:
            if table.num_rows == 0:
                continue
            yield table.filter(self.predicate.mask(table))


class Columns:
    """add_column, drop_columns, select_columns, rename_columns."""

    def __init__(self, kind, names=None, fn=None, batch_format="pandas"):
        self.kind = kind
        self.names = names
        self.fn = fn
        self.batch_format = batch_format
        self.name = kind.title().replace("_", "")

    def columns_after(self, names):
        """The columns a table of columns `names` has after this transform."""
        if self.kind == "add_column":
            return [n for n in names if n != self.names] + [self.names]
        if self.kind == "drop_columns":
            return [n for n in names if n not in self.names]
        if self.kind == "select_columns":
            return list(self.names)
        return [self.names.get(n, n) for n in names]

    def __call__(self, tables):
        for table in tables:
            if self.kind == "add_column":
                values = self.fn(B.to_batch(table, self.batch_format)) if table.num_rows else []
                if hasattr(values, "to_numpy") and not isinstance(values, (pa.Array,
                                                                           pa.ChunkedArray)):
                    values = values.to_numpy()
                column = B._array(values)
                if self.names in table.column_names:
                    table = table.drop_columns([self.names])
                yield table.append_column(self.names, column)
            elif self.kind == "drop_columns":
                missing = [n for n in self.names if n not in table.column_names]
                if missing and table.num_columns:
                    raise ValueError(f"drop_columns: no columns {missing} in "
                                     f"{table.column_names}")
                yield table.drop_columns(self.names) if table.num_columns else table
            elif self.kind == "select_columns":
                missing = [n for n in self.names if n not in table.column_names]
                if missing and table.num_columns:
                    raise ValueError(f"select_columns: no columns {missing} in "
                                     f"{table.column_names}")
                yield table.select(self.names) if table.num_columns else table
            elif self.kind == "rename_columns":
                yield table.rename_columns([self.names.get(n, n) for n in table.column_names])
            else:
                raise ValueError(f"unknown column transform {self.kind}")


def apply(chain, tables):
    """The tables `chain` (a list of transforms) makes of `tables`."""
    for transform in chain:
        tables = transform(tables)
    return tables


def coalesce(tables, target_max_block_size):
    """Output blocks: consecutive tables combined until they reach target_max_block_size, a
    larger one cut into pieces under it; one empty block when nothing came out."""
    pending, size, any_out = [], 0, False
    for t in tables:
        if t.nbytes > target_max_block_size and t.num_rows > 1:
            if pending:
                yield B.concat(pending)
                pending, size, any_out = [], 0, True
            pieces = -(-t.nbytes // target_max_block_size)
            step = -(-t.num_rows // pieces)
            for at in range(0, t.num_rows, step):
                yield t.slice(at, step)
            any_out = True
            continue
        pending.append(t)
        size += t.nbytes
        if size >= target_max_block_size:
            yield B.concat(pending)
            pending, size, any_out = [], 0, True
    if pending or not any_out:
        out = B.concat(pending) if pending else B.empty()
        yield out
