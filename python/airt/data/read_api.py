"""Sources (range, from_*, read_*) and the sinks' write tasks, as Ray Data's read API."""

import builtins
import os
import uuid
import warnings

import numpy as np
import pyarrow as pa

import airt
from airt.data import _tasks
from airt.data import block as B
from airt.data import datasource as S
from airt.data.context import DataContext
from airt.data.dataset import Dataset, MaterializedDataset


def _num_blocks(parallelism, override_num_blocks, rows=None):
    if parallelism not in (-1, None):
        warnings.warn("The argument ``parallelism`` is deprecated in Ray 2.10. Please specify "
                      "argument ``override_num_blocks`` instead.", DeprecationWarning,
                      stacklevel=3)
        override_num_blocks = override_num_blocks or parallelism
    if override_num_blocks is not None:
        if not isinstance(override_num_blocks, int) or override_num_blocks < 1:
            raise ValueError(f"override_num_blocks must be >= 1, got {override_num_blocks!r}")
        return override_num_blocks
    ctx = DataContext.get_current()
    try:
        cpus = int(airt.cluster_resources().get("CPU", 1))
    except Exception:
        cpus = 1
    n = max(ctx.read_op_min_num_blocks, 2 * cpus)
    return max(1, min(n, rows)) if rows is not None else n


def _ranges(n, blocks):
    blocks = max(1, min(blocks, n)) if n > 0 else 1
    size, extra = divmod(n, blocks)
    out, at = [], 0
    for i in builtins.range(blocks):
        take = size + (1 if i < extra else 0)
        out.append((at, at + take))
        at += take
    return out


def range(n, *, parallelism=-1, override_num_blocks=None, **_):  # noqa: A001 - Ray's name
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"range() needs a non-negative int, got {n!r}")
    blocks = _num_blocks(parallelism, override_num_blocks, n)
    return Dataset([("read", [S.RangeRead(a, b) for a, b in _ranges(n, blocks)], "Range")])


def range_tensor(n, *, shape=(1,), parallelism=-1, override_num_blocks=None, **_):
    blocks = _num_blocks(parallelism, override_num_blocks, n)
    return Dataset([("read", [S.RangeRead(a, b, tuple(shape)) for a, b in _ranges(n, blocks)],
                     "RangeTensor")])


def _put_tables(tables, name):
    return MaterializedDataset([(airt.put(t), B.metadata(t)) for t in tables], name)


def from_items(items, *, parallelism=-1, override_num_blocks=None):
    items = list(items)
    blocks = _num_blocks(parallelism, override_num_blocks, max(1, len(items)))
    rows = [i if isinstance(i, dict) else {"item": i} for i in items]
    tables = [B.from_rows(rows[a:b]) for a, b in _ranges(len(rows), blocks)]
    return _put_tables(tables, "FromItems")


def from_numpy(ndarrays):
    if isinstance(ndarrays, np.ndarray):
        ndarrays = [ndarrays]
    return _put_tables([B.from_columns({"data": a}) for a in ndarrays], "FromNumpy")


def from_pandas(dfs, override_num_blocks=None):
    import pandas as pd
    if isinstance(dfs, pd.DataFrame):
        dfs = [dfs]
    tables = [B.from_batch(df) for df in dfs]
    ds = _put_tables(tables, "FromPandas")
    return ds.repartition(override_num_blocks).materialize() if override_num_blocks else ds


def from_arrow(tables, *, override_num_blocks=None):
    if isinstance(tables, (pa.Table, pa.RecordBatch)):
        tables = [tables]
    tables = [pa.Table.from_batches([t]) if isinstance(t, pa.RecordBatch) else t for t in tables]
    ds = _put_tables(tables, "FromArrow")
    return ds.repartition(override_num_blocks).materialize() if override_num_blocks else ds


def _files(fmt, paths, extensions, parallelism, override_num_blocks, options,
           include_paths=False, name=""):
    files = S.expand_paths(paths, extensions)
    wanted = None if (parallelism in (-1, None) and override_num_blocks is None) else \
        _num_blocks(parallelism, override_num_blocks)
    pieces = S.parquet_pieces(files, wanted) if fmt == "parquet" else [(f, None) for f in files]
    groups = S.split_evenly(pieces, wanted or len(pieces))
    reads = [S.FileRead(fmt, g, options, include_paths) for g in groups if g]
    return Dataset([("read", reads, name)])


def read_parquet(paths, *, columns=None, parallelism=-1, override_num_blocks=None,
                 file_extensions=("parquet",), include_paths=False, **_):
    return _files("parquet", paths, file_extensions, parallelism, override_num_blocks,
                  {"columns": columns}, include_paths, "Parquet")


def read_csv(paths, *, parallelism=-1, override_num_blocks=None, file_extensions=("csv",),
             include_paths=False, **arrow_csv_args):
    return _files("csv", paths, file_extensions, parallelism, override_num_blocks,
                  arrow_csv_args, include_paths, "CSV")


def read_json(paths, *, parallelism=-1, override_num_blocks=None,
              file_extensions=("json", "jsonl"), include_paths=False, **_):
    return _files("json", paths, file_extensions, parallelism, override_num_blocks, {},
                  include_paths, "JSON")


def read_numpy(paths, *, parallelism=-1, override_num_blocks=None, file_extensions=("npy",),
               include_paths=False, **_):
    return _files("numpy", paths, file_extensions, parallelism, override_num_blocks, {},
                  include_paths, "Numpy")


def read_text(paths, *, encoding="utf-8", drop_empty_lines=True, parallelism=-1,
              override_num_blocks=None, file_extensions=None, include_paths=False, **_):
    return _files("text", paths, file_extensions, parallelism, override_num_blocks,
                  {"encoding": encoding, "drop_empty_lines": drop_empty_lines}, include_paths,
                  "Text")


def read_binary_files(paths, *, include_paths=False, parallelism=-1, override_num_blocks=None,
                      file_extensions=None, **_):
    return _files("binary", paths, file_extensions, parallelism, override_num_blocks, {},
                  include_paths, "BinaryFiles")


def read_images(paths, *, size=None, mode=None, include_paths=False, parallelism=-1,
                override_num_blocks=None,
                file_extensions=("png", "jpg", "jpeg", "bmp", "gif", "tiff"), **_):
    return _files("images", paths, file_extensions, parallelism, override_num_blocks,
                  {"size": size, "mode": mode}, include_paths, "Images")


def _write_one(fmt, path, name, options, table):
    """A write task: one block to one file; its path ("" for an empty block, not written)."""
    if table.num_rows == 0:
        return ""
    target = os.path.join(path, f"{name}.{ 'npy' if fmt == 'numpy' else fmt}")
    if fmt == "parquet":
        import pyarrow.parquet as pq
        pq.write_table(table, target, **options)
    elif fmt == "csv":
        import pyarrow.csv as pcsv
        pcsv.write_csv(table, target)
    elif fmt == "json":
        import json
        with open(target, "w") as f:
            for row in table.to_pylist():
                f.write(json.dumps(row, default=_json_default) + "\n")
    elif fmt == "numpy":
        np.save(target, B.to_numpy(table)[options["column"]])
    return target


def _json_default(value):
    if isinstance(value, (np.generic,)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, bytes):
        return value.decode("latin-1")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def write_blocks(dataset, path, fmt, options):
    """Writes each block of `dataset` to a file of its own under `path`, by tasks, as the
    blocks come (at most the cluster's CPUs writes in flight)."""
    os.makedirs(path, exist_ok=True)
    task = _tasks.remote(_write_one).options(num_cpus=1)
    run = uuid.uuid4().hex[:8]
    cap = max(2, int(airt.cluster_resources().get("CPU", 1)))
    pending, written = [], []
    for index, (ref, _) in enumerate(dataset._stream()):
        pending.append(task.remote(fmt, path, f"{run}_{index:06d}", options, ref))
        if len(pending) >= cap:
            ready, pending = airt.wait(pending, num_returns=1)
            written.extend(airt.get(ready))
    written.extend(airt.get(pending))
    return [w for w in written if w]
