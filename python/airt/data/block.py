"""Blocks: pyarrow Tables, as Ray Data's Arrow blocks, and the batch formats user code sees.

A block travels through the object store as a framed pickle (airt.object_ref.FRAME_MAGIC): the
table's Arrow buffers are the pickle's out-of-band buffers, so a reader (the driver, or a worker
given the block as a task argument) gets a table whose columns are views of the store's shared
memory, with no copy. Tensor columns (a numpy array of more than one dimension per batch) are
pyarrow's fixed_shape_tensor extension arrays, which parquet round-trips.
"""

import pickle

import numpy as np
import pyarrow as pa

from airt.object_ref import FRAME_MAGIC

BATCH_FORMATS = ("default", "numpy", "pandas", "pyarrow")


def encode(table):
    """The object bytes of `table`: FRAME_MAGIC, counts, the pickle, then each buffer 64-aligned
    (the layout airt.object_ref.decode_pickled reads without copying)."""
    buffers = []
    meta = pickle.dumps(table, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    parts = [FRAME_MAGIC, len(raws).to_bytes(8, "little"), len(meta).to_bytes(8, "little"), meta]
    at = len(FRAME_MAGIC) + 16 + len(meta)
    for raw in raws:
        pad = (at + 8 + 63) // 64 * 64 - 8 - at
        parts.append(b"\0" * pad)
        parts.append(len(raw).to_bytes(8, "little"))
        parts.append(raw)
        at += pad + 8 + len(raw)
    return b"".join(parts)


class Encoded:
    """A block already encoded for the store (what a data task emits as one generator item)."""

    __slots__ = ("data",)

    def __init__(self, table):
        self.data = encode(table)


def metadata(table):
    """What the executor keeps of a block: rows, bytes and column names."""
    return {"num_rows": table.num_rows, "size_bytes": table.nbytes,
            "columns": table.column_names}


def empty():
    return pa.table({})


def concat(tables):
    """One table of `tables` (empty ones and ones with no columns dropped)."""
    tables = [t for t in tables if t.num_columns > 0 or t.num_rows > 0]
    tables = [t for t in tables if t.num_rows > 0] or tables[:1]
    if not tables:
        return empty()
    if len(tables) == 1:
        return tables[0]
    try:
        return pa.concat_tables(tables, promote_options="default")
    except pa.ArrowInvalid as error:
        raise ValueError(f"blocks with different schemas cannot be combined: {error}") from None


def rebatch(tables, batch_size, drop_last=False):
    """Tables of `batch_size` rows cut from `tables` in order (None: each non-empty table whole);
    the last one may be shorter, and is dropped with `drop_last`. A batch spans tables only to
    fill `batch_size`."""
    if batch_size is None:
        for t in tables:
            if t.num_rows > 0:
                yield t
        return
    pending, count = [], 0
    for t in tables:
        at = 0
        while at < t.num_rows:
            take = min(batch_size - count, t.num_rows - at)
            pending.append(t.slice(at, take))
            count += take
            at += take
            if count == batch_size:
                yield concat(pending)
                pending, count = [], 0
    if count and not drop_last:
        yield concat(pending)


def _column_to_numpy(column):
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if isinstance(column.type, pa.FixedShapeTensorType):
        return column.to_numpy_ndarray()
    if isinstance(column, pa.ExtensionArray):
        column = column.storage
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type) or \
            pa.types.is_struct(column.type) or pa.types.is_map(column.type):
        values = column.to_pylist()
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    return column.to_numpy(zero_copy_only=False)


def to_numpy(table):
    """A dict of column name to numpy array (views of the table's buffers where Arrow allows)."""
    return {name: _column_to_numpy(table.column(name)) for name in table.column_names}


def to_batch(table, batch_format):
    if batch_format in ("default", "numpy", None):
        return to_numpy(table)
    if batch_format == "pandas":
        return to_pandas(table)
    if batch_format == "pyarrow":
        return table
    raise ValueError(f"batch_format must be one of {BATCH_FORMATS}, got {batch_format!r}")


def to_pandas(table):
    import pandas as pd
    if not any(isinstance(f.type, pa.FixedShapeTensorType) for f in table.schema):
        return table.to_pandas()
    data = {}
    for name in table.column_names:
        values = _column_to_numpy(table.column(name))
        data[name] = list(values) if values.ndim > 1 else values
    return pd.DataFrame(data)


def _tensor(values):
    """A fixed_shape_tensor array of an n-d numpy array's rows (its buffer, when contiguous)."""
    flat = np.ascontiguousarray(values).reshape(-1)
    shape = list(values.shape[1:])
    width = int(np.prod(shape)) if shape else 1
    storage = pa.FixedSizeListArray.from_arrays(pa.array(flat), width)
    return pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.from_numpy_dtype(values.dtype), shape), storage)


def _array(values):
    """A pyarrow array of one column's values (a numpy array, a list, a pyarrow array)."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    if isinstance(values, np.ndarray):
        if values.ndim > 1:
            return _tensor(values)
        if values.dtype == object:
            return _array(list(values))
        return pa.array(values)
    values = list(values)
    if values and all(isinstance(v, np.ndarray) for v in values):
        shapes = {v.shape for v in values}
        if len(shapes) == 1 and values[0].ndim >= 1:
            return _tensor(np.stack(values))
    if values and all(isinstance(v, np.generic) for v in values):
        return pa.array(np.array(values))
    return pa.array(values)


def from_columns(columns):
    """A table of a dict of column name to values (numpy arrays, lists, pyarrow arrays)."""
    if not columns:
        return empty()
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"the batch's columns have different lengths: "
                         f"{ {k: len(v) for k, v in columns.items()} }")
    return pa.table({str(k): _array(v) for k, v in columns.items()})


def from_batch(batch):
    """A table of what a map_batches function returned: a dict of arrays, a pandas DataFrame or
    a pyarrow Table."""
    if isinstance(batch, pa.Table):
        return batch
    if isinstance(batch, dict):
        return from_columns(batch)
    try:
        import pandas as pd
        if isinstance(batch, pd.DataFrame):
            if any(isinstance(v, np.ndarray) for v in batch.iloc[:1].values.ravel()):
                return from_columns({c: list(batch[c]) for c in batch.columns})
            return pa.Table.from_pandas(batch, preserve_index=False)
    except ImportError:
        pass
    raise ValueError(f"a batch must be a dict of arrays, a pandas DataFrame or a pyarrow Table, "
                     f"got {type(batch).__name__}")


def from_rows(rows):
    """A table of a list of row dicts (a column per key, in first-seen order)."""
    if not rows:
        return empty()
    names = {}
    for row in rows:
        if not isinstance(row, dict):
            raise ValueError(f"a row must be a dict, got {type(row).__name__}: {row!r}")
        for k in row:
            names.setdefault(k, None)
    return from_columns({k: [row.get(k) for row in rows] for k in names})


def rows(table):
    """The table's rows as dicts (Python values; tensor columns as numpy arrays)."""
    tensors = {f.name for f in table.schema if isinstance(f.type, pa.FixedShapeTensorType)}
    if not tensors:
        return table.to_pylist()
    columns = {}
    for name in table.column_names:
        columns[name] = (_column_to_numpy(table.column(name)) if name in tensors
                         else table.column(name).to_pylist())
    return [{k: v[i] for k, v in columns.items()} for i in range(table.num_rows)]


def split_rows(table, sizes):
    """Slices of `table` of the given row counts, in order (zero-copy)."""
    out, at = [], 0
    for n in sizes:
        out.append(table.slice(at, n))
        at += n
    return out
