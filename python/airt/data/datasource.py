"""Read tasks of the file sources and the generated ones: each is a picklable callable that
yields pyarrow Tables when a data task runs it on a worker."""

import glob
import io
import os

import numpy as np
import pyarrow as pa

from airt.data import block as B


def expand_paths(paths, extensions=None):
    """The files of `paths` (a path or a list; folders walked, sorted), filtered by extension."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = []
    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path):
            for root, dirs, names in os.walk(path):
                dirs.sort()
                for name in sorted(names):
                    if name.startswith(".") or name.startswith("_"):
                        continue
                    files.append(os.path.join(root, name))
        elif any(ch in path for ch in "*?["):
            files.extend(sorted(glob.glob(path)))
        elif os.path.exists(path):
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    if extensions:
        exts = tuple("." + e.lstrip(".").lower() for e in extensions)
        files = [f for f in files if f.lower().endswith(exts)]
    if not files:
        raise ValueError(f"no input files found in {paths}")
    return files


def split_evenly(items, n):
    """`items` in n consecutive groups as even as they go (no group empty unless items are)."""
    n = max(1, min(n, len(items))) if items else 1
    size, extra = divmod(len(items), n)
    out, at = [], 0
    for i in range(n):
        take = size + (1 if i < extra else 0)
        out.append(items[at:at + take])
        at += take
    return out


class RangeRead:
    def __init__(self, start, end, tensor_shape=None, column="id"):
        self.start, self.end, self.tensor_shape, self.column = start, end, tensor_shape, column

    def columns(self):
        return [self.column] if self.tensor_shape is None else ["data"]

    def __call__(self):
        ids = np.arange(self.start, self.end, dtype=np.int64)
        if self.tensor_shape is None:
            yield pa.table({self.column: ids})
            return
        shape = tuple(self.tensor_shape)
        data = np.ones((len(ids),) + shape, dtype=np.int64) * ids.reshape((-1,) + (1,) * len(shape))
        yield B.from_columns({"data": data})


class FileRead:
    """Reads a group of files (or parquet row groups) of one format."""

    def __init__(self, fmt, pieces, options, include_paths=False):
        self.fmt = fmt
        self.pieces = pieces        # [(path, row_groups or None)]
        self.options = options
        self.include_paths = include_paths

    # The column of each format that has one whatever the file holds.
    _FIXED = {"numpy": "data", "text": "text", "binary": "bytes", "images": "image"}

    def columns(self):
        """The columns of the tables this read makes, when known without reading the data (a
        parquet file's footer is read), else None."""
        if self.fmt in self._FIXED:
            names = [self._FIXED[self.fmt]]
        elif self.fmt == "parquet" and self.pieces:
            import pyarrow.parquet as pq
            try:
                names = self.options.get("columns") or pq.read_schema(self.pieces[0][0]).names
            except (OSError, pa.ArrowInvalid):  # the read task will say what is wrong
                return None
        else:
            return None
        return list(names) + (["path"] if self.include_paths else [])

    def __call__(self):
        for path, row_groups in self.pieces:
            table = getattr(self, "_" + self.fmt)(path, row_groups)
            if self.include_paths:
                table = table.append_column("path", pa.array([path] * table.num_rows,
                                                              type=pa.string()))
            yield table

    def _parquet(self, path, row_groups):
        import pyarrow.parquet as pq
        columns = self.options.get("columns")
        f = pq.ParquetFile(path)
        if row_groups is None:
            return f.read(columns=columns)
        return f.read_row_groups(row_groups, columns=columns)

    def _csv(self, path, _):
        import pyarrow.csv as pcsv
        return pcsv.read_csv(path, **self.options)

    def _json(self, path, _):
        import json
        with open(path, "rb") as f:
            head = f.read(1).lstrip()
            while head in (b" ", b"\n", b"\r", b"\t"):
                head = f.read(1)
        if head == b"[":  # a JSON array of records
            with open(path) as f:
                return B.from_rows(json.load(f))
        import pyarrow.json as pjson
        return pjson.read_json(path)

    def _numpy(self, path, _):
        return B.from_columns({"data": np.load(path, allow_pickle=False)})

    def _text(self, path, _):
        encoding = self.options.get("encoding", "utf-8")
        with open(path, encoding=encoding) as f:
            lines = f.read().splitlines()
        if self.options.get("drop_empty_lines", True):
            lines = [line for line in lines if line.strip()]
        return pa.table({"text": pa.array(lines, type=pa.string())})

    def _binary(self, path, _):
        with open(path, "rb") as f:
            data = f.read()
        return pa.table({"bytes": pa.array([data], type=pa.binary())})

    def _images(self, path, _):
        from PIL import Image
        with Image.open(path) as image:
            if self.options.get("mode"):
                image = image.convert(self.options["mode"])
            if self.options.get("size"):
                height, width = self.options["size"]
                image = image.resize((width, height))
            array = np.asarray(image)
        return B.from_columns({"image": array[np.newaxis]})


def parquet_pieces(files, num_blocks):
    """Read units: whole files, or row groups when more blocks than files are asked for."""
    if num_blocks is None or num_blocks <= len(files):
        return [(f, None) for f in files]
    import pyarrow.parquet as pq
    pieces = []
    for f in files:
        groups = pq.ParquetFile(f).metadata.num_row_groups
        pieces.extend((f, [g]) for g in range(groups)) if groups > 1 else pieces.append((f, None))
    return pieces


def decode_image_bytes(data):
    from PIL import Image
    return np.asarray(Image.open(io.BytesIO(data)))
