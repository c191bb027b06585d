"""airt.data's consumption: iter_batches (sizes, formats, drop_last, local shuffle, prefetch),
iter_torch_batches, iter_rows, to_pandas, split and streaming_split (each row to exactly one
consumer, once per epoch, consumers in processes of their own)."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest


@pytest.fixture(scope="module")
def rd(cluster):
    import airt.data
    airt.data.DataContext.get_current().enable_progress_bars = False
    return airt.data


@pytest.mark.parametrize("batch_size", [1, 4, 10, 33, None])
@pytest.mark.parametrize("prefetch", [0, 2])
def test_iter_batches_cuts_batches_across_block_boundaries(rd, batch_size, prefetch):
    ds = rd.range(33, override_num_blocks=5)
    batches = list(ds.iter_batches(batch_size=batch_size, prefetch_batches=prefetch))
    assert np.concatenate([b["id"] for b in batches]).tolist() == list(range(33))
    if batch_size is not None:
        assert [len(b["id"]) for b in batches[:-1]] == [batch_size] * (len(batches) - 1)
    dropped = list(ds.iter_batches(batch_size=batch_size or 33, drop_last=True))
    assert all(len(b["id"]) == (batch_size or 33) for b in dropped)
    assert len(dropped) == 33 // (batch_size or 33)


def test_iter_batches_formats(rd):
    ds = rd.range(6, override_num_blocks=2)
    assert isinstance(next(iter(ds.iter_batches(batch_format="pandas"))), pd.DataFrame)
    assert isinstance(next(iter(ds.iter_batches(batch_format="pyarrow"))), pa.Table)
    assert isinstance(next(iter(ds.iter_batches(batch_format="numpy")))["id"], np.ndarray)
    with pytest.raises(ValueError, match="batch_format"):
        list(ds.iter_batches(batch_format="arrow"))


def test_batches_read_the_store_in_place(rd):
    import airt
    ds = rd.range_tensor(64, shape=(1024,), override_num_blocks=1).materialize()
    batch = next(iter(ds.iter_batches(batch_size=None, prefetch_batches=0)))
    assert not batch["data"].flags.writeable  # a view of the block in the store
    table = airt.get(ds.to_arrow_refs()[0])
    assert table.column("data").chunk(0).storage.values.buffers()[1].address == \
        airt.get(ds.to_arrow_refs()[0]).column("data").chunk(0).storage.values.buffers()[1] \
        .address  # both reads land on the one copy in shared memory


def test_local_shuffle_keeps_every_row_and_changes_the_order(rd):
    ds = rd.range(200, override_num_blocks=4)
    got = np.concatenate([b["id"] for b in ds.iter_batches(
        batch_size=16, local_shuffle_buffer_size=64, local_shuffle_seed=7)]).tolist()
    assert sorted(got) == list(range(200)) and got != list(range(200))


def test_iter_torch_batches_dtypes(rd):
    import torch
    ds = rd.range(10, override_num_blocks=3).map_batches(
        lambda b: {"x": b["id"].astype(np.float64), "y": b["id"]})
    batches = list(ds.iter_torch_batches(batch_size=4, dtypes={"x": torch.float32},
                                         device="cpu"))
    assert [b["x"].dtype for b in batches] == [torch.float32] * 3
    assert batches[0]["y"].dtype == torch.int64
    assert torch.cat([b["y"] for b in batches]).tolist() == list(range(10))


def test_iter_torch_batches_device_and_collate_fn_as_ray(rd):
    import torch
    ds = rd.range(10, override_num_blocks=3)
    batches = list(ds.iter_torch_batches(batch_size=5, device=torch.device("cpu")))
    assert all(b["id"].device.type == "cpu" for b in batches)
    # "auto" in a driver that holds no GPU: the CPU
    assert next(iter(ds.iter_torch_batches(batch_size=5)))["id"].device.type == "cpu"
    collated = list(ds.iter_torch_batches(
        batch_size=5, collate_fn=lambda b: (torch.as_tensor(b["id"]) * 2, len(b["id"]))))
    assert [n for _, n in collated] == [5, 5]
    assert torch.cat([t for t, _ in collated]).tolist() == [2 * i for i in range(10)]
    with pytest.raises(ValueError, match="collate_fn cannot be used with dtypes and device"):
        ds.iter_torch_batches(collate_fn=lambda b: b, device="cpu")
    with pytest.raises(ValueError, match="prefetch_batches"):
        ds.iter_batches(prefetch_batches=-1)


@pytest.mark.parametrize("depth", [1, 3])
def test_prefetch_batches_makes_that_many_batches_ahead_of_the_one_held(rd, depth):
    import threading
    from airt.data.iterator import _prefetched
    made, beyond = [], threading.Event()
    reached = threading.Event()

    def items():
        for i in range(10):
            if i == depth + 1:
                beyond.set()  # one more than the caller holds plus depth
            made.append(i)
            if len(made) == depth + 1:
                reached.set()
            yield i

    it = _prefetched(items(), depth)
    assert next(it) == 0
    assert reached.wait(30), made  # the thread makes the next `depth` while 0 is held
    assert not beyond.wait(0.5), made  # and no more
    assert list(it) == list(range(1, 10))


def test_randomize_block_order_moves_whole_blocks(rd):
    ds = rd.range(40, override_num_blocks=8)
    blocks = [list(b["id"]) for b in ds.randomize_block_order(seed=5).iter_batches(
        batch_size=None)]
    assert sorted(map(tuple, blocks)) == [tuple(range(5 * k, 5 * k + 5)) for k in range(8)]
    assert [b[0] for b in blocks] != [5 * k for k in range(8)]  # seed 5 changes the order
    again = [list(b["id"]) for b in ds.randomize_block_order(seed=5).iter_batches(
        batch_size=None)]
    assert again == blocks


def test_iter_rows_and_to_pandas(rd):
    ds = rd.from_items([{"a": i, "b": -i} for i in range(12)], override_num_blocks=5)
    assert list(ds.iter_rows()) == [{"a": i, "b": -i} for i in range(12)]
    assert ds.to_pandas().equals(pd.DataFrame({"a": range(12), "b": [-i for i in range(12)]}))


@pytest.mark.parametrize("equal", [False, True])
def test_split_gives_each_row_to_one_part(rd, equal):
    ds = rd.range(23, override_num_blocks=6)
    parts = ds.split(3, equal=equal)
    rows = [[r["id"] for r in p.take_all()] for p in parts]
    flat = sorted(i for r in rows for i in r)
    if equal:
        assert [len(r) for r in rows] == [7, 7, 7]
        assert len(set(flat)) == 21
    else:
        assert flat == list(range(23))


@pytest.mark.parametrize("equal", [False, True])
def test_streaming_split_feeds_each_row_to_exactly_one_consumer_per_epoch(cluster, rd, equal):
    import airt

    @airt.remote(num_cpus=0)
    class Consumer:
        def __init__(self, it):
            self.it = it

        def epoch(self):
            return [int(i) for b in self.it.iter_batches(batch_size=5) for i in b["id"]]

    ds = rd.range(103, override_num_blocks=9).map(lambda r: {"id": r["id"] * 2})
    its = ds.streaming_split(2, equal=equal)
    consumers = [Consumer.remote(it) for it in its]
    for _ in range(2):  # two epochs, each a barrier between the two consumers
        got = airt.get([c.epoch.remote() for c in consumers])
        flat = sorted(got[0] + got[1])
        if equal:
            assert len(got[0]) == len(got[1]) == 51
            assert len(set(flat)) == 102 and set(flat) <= set(range(0, 206, 2))
        else:
            assert flat == list(range(0, 206, 2))
            assert got[0] and got[1]


def test_streaming_split_rejects_bad_arguments(rd):
    with pytest.raises(ValueError):
        rd.range(3).streaming_split(0)
    with pytest.raises(ValueError, match="locality_hints"):
        rd.range(3).streaming_split(2, locality_hints=["a"])
