"""airt.data: Ray Data's datasets (2.60's API) on airt's object store and streaming generators.

    import airt
    import airt.data as rd
    airt.init()
    ds = rd.read_parquet("folder").map_batches(lambda b: {"y": b["x"] * 2}, batch_size=1024)
    for batch in ds.iter_batches(batch_size=256):   # numpy dicts
        ...

Blocks are pyarrow Tables in the object store; a dataset is a lazy plan run by a streaming
executor (airt.data._executor) that keeps the bytes in flight within a share of the store
(DataContext). docs/data.md has the whole API and what differs from Ray.
"""

from airt.data.compute import ActorPoolStrategy, TaskPoolStrategy
from airt.data.context import DataContext, ExecutionOptions
from airt.data.dataset import Dataset, GroupedData, MaterializedDataset, Schema
from airt.data.iterator import DataIterator
from airt.data.read_api import (from_arrow, from_items, from_numpy, from_pandas, range,
                                range_tensor, read_binary_files, read_csv, read_images,
                                read_json, read_numpy, read_parquet, read_text)

__all__ = [
    "ActorPoolStrategy", "TaskPoolStrategy", "DataContext", "ExecutionOptions", "Dataset",
    "GroupedData", "MaterializedDataset", "Schema", "DataIterator", "from_arrow", "from_items",
    "from_numpy", "from_pandas", "range", "range_tensor", "read_binary_files", "read_csv",
    "read_images", "read_json", "read_numpy", "read_parquet", "read_text",
]
