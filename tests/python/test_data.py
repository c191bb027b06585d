"""airt.data: every source, sink, transform and aggregate against the same computation in plain
Python, over block boundaries of every size (empty blocks, one-row blocks)."""

import json
import os
import statistics

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


@pytest.fixture(scope="module")
def rd(cluster):
    import airt.data
    ctx = airt.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    return airt.data


def ids(rows, key="id"):
    return [r[key] for r in rows]


@pytest.mark.parametrize("blocks", [1, 3, 7, 100])
def test_range_gives_every_id_in_order_for_any_block_count(rd, blocks):
    ds = rd.range(100, override_num_blocks=blocks)
    assert ids(ds.take_all()) == list(range(100))
    assert ds.materialize().num_blocks() == blocks
    assert ds.count() == 100


def test_range_tensor_rows_are_arrays_of_their_index(rd):
    rows = rd.range_tensor(10, shape=(2, 3), override_num_blocks=3).take_all()
    assert len(rows) == 10
    for i, row in enumerate(rows):
        assert row["data"].shape == (2, 3) and (row["data"] == i).all()


def test_from_items_numpy_pandas_arrow(rd):
    items = [{"a": i, "b": str(i)} for i in range(25)]
    assert rd.from_items(items, override_num_blocks=4).take_all() == items
    assert ids(rd.from_items(list(range(5))).take_all(), "item") == list(range(5))
    arr = np.arange(24).reshape(6, 4)
    got = rd.from_numpy(arr).take_all()
    assert np.array_equal(np.stack([r["data"] for r in got]), arr)
    df = pd.DataFrame({"x": np.arange(8), "y": np.arange(8) * 0.5})
    assert rd.from_pandas([df.iloc[:3], df.iloc[3:]]).to_pandas().equals(df)
    table = pa.table({"x": list(range(9))})
    assert rd.from_arrow(table).take_all() == table.to_pylist()


def test_file_sources_read_what_plain_python_wrote(rd, tmp_path):
    rows = [{"a": i, "b": f"s{i}"} for i in range(30)]
    table = pa.Table.from_pylist(rows)
    (tmp_path / "pq").mkdir()
    for i in range(3):
        pq.write_table(table.slice(i * 10, 10), tmp_path / "pq" / f"{i}.parquet")
    assert rd.read_parquet(str(tmp_path / "pq")).take_all() == rows
    assert rd.read_parquet(str(tmp_path / "pq"), columns=["a"]).take_all() == \
        [{"a": r["a"]} for r in rows]
    assert rd.read_parquet(str(tmp_path / "pq"), override_num_blocks=2).materialize() \
        .num_blocks() == 2
    (tmp_path / "f.csv").write_text("a,b\n" + "".join(f"{r['a']},{r['b']}\n" for r in rows))
    assert rd.read_csv(str(tmp_path / "f.csv")).take_all() == rows
    (tmp_path / "f.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert rd.read_json(str(tmp_path / "f.jsonl")).take_all() == rows
    np.save(tmp_path / "a.npy", np.arange(12).reshape(4, 3))
    got = rd.read_numpy(str(tmp_path / "a.npy")).take_all()
    assert np.array_equal(np.stack([r["data"] for r in got]), np.arange(12).reshape(4, 3))
    (tmp_path / "t.txt").write_text("one\ntwo\n\nthree\n")
    assert ids(rd.read_text(str(tmp_path / "t.txt")).take_all(), "text") == ["one", "two",
                                                                             "three"]
    (tmp_path / "bin").mkdir()
    for i in range(3):
        (tmp_path / "bin" / f"{i}.bin").write_bytes(bytes([i]) * (i + 1))
    got = rd.read_binary_files(str(tmp_path / "bin"), include_paths=True).take_all()
    assert [r["bytes"] for r in got] == [bytes([i]) * (i + 1) for i in range(3)]
    assert [os.path.basename(r["path"]) for r in got] == ["0.bin", "1.bin", "2.bin"]


def test_read_images_gives_the_pixels(rd, tmp_path):
    from PIL import Image
    images = [np.full((4, 5, 3), i * 40, dtype=np.uint8) for i in range(3)]
    for i, image in enumerate(images):
        Image.fromarray(image).save(tmp_path / f"{i}.png")
    got = rd.read_images(str(tmp_path)).take_all()
    assert [r["image"].shape for r in got] == [(4, 5, 3)] * 3
    assert all(np.array_equal(r["image"], images[i]) for i, r in enumerate(got))
    resized = rd.read_images(str(tmp_path), size=(2, 2), mode="L").take_all()
    assert resized[0]["image"].shape == (2, 2)


def test_missing_paths_raise_clear_errors(rd, tmp_path):
    with pytest.raises(FileNotFoundError):
        rd.read_parquet(str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="no input files"):
        rd.read_csv(str(tmp_path))


def test_sinks_write_files_plain_python_reads_back(rd, tmp_path):
    ds = rd.range(50, override_num_blocks=4).map(lambda r: {"id": r["id"], "sq": r["id"] ** 2})
    ds.write_parquet(str(tmp_path / "pq"))
    back = pa.concat_tables(pq.read_table(tmp_path / "pq" / f)
                            for f in sorted(os.listdir(tmp_path / "pq")))
    assert sorted(back.to_pylist(), key=lambda r: r["id"]) == \
        [{"id": i, "sq": i * i} for i in range(50)]
    ds.write_csv(str(tmp_path / "csv"))
    rows = [line for f in sorted(os.listdir(tmp_path / "csv"))
            for line in (tmp_path / "csv" / f).read_text().splitlines()[1:]]
    assert sorted(int(r.split(",")[0]) for r in rows) == list(range(50))
    ds.write_json(str(tmp_path / "json"))
    rows = [json.loads(line) for f in os.listdir(tmp_path / "json")
            for line in (tmp_path / "json" / f).read_text().splitlines()]
    assert sorted(r["sq"] for r in rows) == [i * i for i in range(50)]
    rd.range_tensor(6, shape=(2,), override_num_blocks=2).write_numpy(str(tmp_path / "np"),
                                                                      column="data")
    arrays = [np.load(tmp_path / "np" / f) for f in sorted(os.listdir(tmp_path / "np"))]
    assert np.array_equal(np.concatenate(arrays)[:, 0], np.arange(6))
    assert rd.read_parquet(str(tmp_path / "pq")).count() == 50


@pytest.mark.parametrize("batch_format", ["numpy", "pandas", "pyarrow"])
@pytest.mark.parametrize("batch_size", [None, 1, 7])
def test_map_batches_matches_plain_python(rd, batch_format, batch_size):
    def double(batch):
        if batch_format == "pyarrow":
            return pa.table({"id": batch.column("id"),
                             "y": pa.compute.multiply(batch.column("id"), 2)})
        if batch_format == "pandas":
            return batch.assign(y=batch["id"] * 2)
        return {"id": batch["id"], "y": batch["id"] * 2}

    ds = rd.range(40, override_num_blocks=6).map_batches(double, batch_size=batch_size,
                                                         batch_format=batch_format)
    assert ds.take_all() == [{"id": i, "y": 2 * i} for i in range(40)]


def test_row_transforms_match_plain_python(rd):
    base = rd.range(30, override_num_blocks=5)
    assert ids(base.map(lambda r: {"id": r["id"] + 1}).take_all()) == list(range(1, 31))
    assert ids(base.filter(lambda r: r["id"] % 4 == 0).take_all()) == list(range(0, 30, 4))
    assert ids(base.flat_map(lambda r: [r, r] if r["id"] < 3 else []).take_all()) == \
        [0, 0, 1, 1, 2, 2]
    with_col = base.add_column("half", lambda df: df["id"] / 2)
    assert with_col.take(3) == [{"id": 0, "half": 0.0}, {"id": 1, "half": 0.5},
                                {"id": 2, "half": 1.0}]
    assert with_col.drop_columns(["id"]).columns() == ["half"]
    assert with_col.select_columns(["half"]).take(1) == [{"half": 0.0}]
    assert ids(base.limit(7).take_all()) == list(range(7))
    assert base.limit(0).take_all() == []


def test_filter_that_empties_blocks_keeps_the_rest(rd):
    ds = rd.range(20, override_num_blocks=20).filter(lambda r: r["id"] in (0, 19))
    assert ids(ds.take_all()) == [0, 19]
    assert rd.range(10).filter(lambda r: False).take_all() == []


def test_all_to_all_ops_match_plain_python(rd):
    values = list(np.random.default_rng(0).permutation(60))
    ds = rd.from_items([{"v": int(v), "k": int(v) % 4} for v in values],
                       override_num_blocks=5)
    assert [r["v"] for r in ds.sort("v").take_all()] == sorted(values)
    assert [r["v"] for r in ds.sort("v", descending=True).take_all()] == \
        sorted(values, reverse=True)
    parts = ds.repartition(7).materialize()
    assert parts.num_blocks() == 7 and sorted(r["v"] for r in parts.take_all()) == \
        sorted(values)
    shuffled = [r["v"] for r in ds.random_shuffle(seed=3).take_all()]
    assert sorted(shuffled) == sorted(values) and shuffled != values
    assert shuffled == [r["v"] for r in ds.random_shuffle(seed=3).take_all()]
    grouped = {r["k"]: r for r in ds.groupby("k").count().take_all()}
    assert {k: r["count()"] for k, r in grouped.items()} == {k: 15 for k in range(4)}
    for agg, fn in [("sum", sum), ("min", min), ("max", max),
                    ("mean", statistics.mean)]:
        got = getattr(ds.groupby("k"), agg)("v").take_all()
        assert [r["k"] for r in got] == [0, 1, 2, 3]
        for r in got:
            assert r[f"{agg}(v)"] == pytest.approx(fn([int(v) for v in values
                                                       if v % 4 == r["k"]]))
    sizes = ds.groupby("k").map_groups(lambda g: {"k": g["k"][:1], "n": [len(g["k"])]})
    assert sorted((r["k"], r["n"]) for r in sizes.take_all()) == [(k, 15) for k in range(4)]
    union = rd.range(3).union(rd.range(2))
    assert sorted(ids(union.take_all())) == [0, 0, 1, 1, 2]
    zipped = rd.range(10, override_num_blocks=3).zip(
        rd.range(10, override_num_blocks=4).map(lambda r: {"sq": r["id"] ** 2}))
    assert zipped.take_all() == [{"id": i, "sq": i * i} for i in range(10)]


def test_aggregates_match_plain_python(rd):
    values = [float(v) for v in np.random.default_rng(1).normal(size=57)]
    ds = rd.from_items([{"x": v} for v in values], override_num_blocks=6)
    assert ds.count() == 57
    assert ds.sum("x") == pytest.approx(sum(values))
    assert ds.min("x") == min(values) and ds.max("x") == max(values)
    assert ds.mean("x") == pytest.approx(statistics.mean(values))
    assert ds.std("x") == pytest.approx(statistics.stdev(values))
    assert ds.std("x", ddof=0) == pytest.approx(statistics.pstdev(values))


def test_take_show_schema_columns_stats(rd, capsys):
    ds = rd.range(10, override_num_blocks=2).map(lambda r: {"id": r["id"], "s": str(r["id"])})
    assert ds.columns() == ["id", "s"]
    assert ds.schema().types == [pa.int64(), pa.string()]
    assert ds.take_batch(3)["id"].tolist() == [0, 1, 2]
    assert list(ds.take_batch(2, batch_format="pandas")["s"]) == ["0", "1"]
    ds.show(2)
    assert capsys.readouterr().out == "{'id': 0, 's': '0'}\n{'id': 1, 's': '1'}\n"
    mat = ds.materialize()
    assert type(mat).__module__ == "airt.data.dataset" and type(mat).__name__ == \
        "MaterializedDataset"
    stats = mat.stats()
    assert "ReadRange->Map" in stats and "Output rows: 10" in stats


def test_bad_input_raises_clear_errors(rd):
    with pytest.raises(ValueError, match="batch_format"):
        rd.range(3).map_batches(lambda b: b, batch_format="torch")
    with pytest.raises(ValueError, match="must return a dict"):
        rd.range(3).map(lambda r: r["id"]).take_all()
    with pytest.raises(ValueError, match="different numbers of rows"):
        rd.range(3).zip(rd.range(4)).take_all()
    with pytest.raises(ValueError, match="regular functions cannot run on the actor pool"):
        rd.range(3).map_batches(lambda b: b, compute=rd.ActorPoolStrategy(size=1))


def test_empty_and_one_row_blocks_pass_every_op(rd):
    table = pa.table({"x": list(range(8))})
    pieces = [table.slice(0, 0), table.slice(0, 1), table.slice(1, 0), table.slice(1, 6),
              table.slice(7, 1), table.slice(8, 0)]
    ds = rd.from_arrow(pieces)
    assert ds.materialize().num_blocks() == 6
    assert [r["x"] for r in ds.take_all()] == list(range(8))
    assert ds.count() == 8 and ds.sum("x") == 28
    doubled = ds.map_batches(lambda b: {"x": b["x"] * 2}, batch_size=3)
    assert [r["x"] for r in doubled.take_all()] == [2 * i for i in range(8)]
    assert [r["x"] for r in ds.sort("x", descending=True).take_all()] == list(range(7, -1, -1))
    assert np.concatenate([b["x"] for b in ds.iter_batches(batch_size=3)]).tolist() == \
        list(range(8))
    assert [r["x"] for r in ds.repartition(3).take_all()] == list(range(8))


def test_progress_bars_show_rows_and_queued_blocks_per_operator(rd, capfd):
    ctx = rd.DataContext.get_current()
    ctx.enable_progress_bars = True
    try:
        rd.range(10, override_num_blocks=2).map_batches(lambda b: b).take_all()
    finally:
        ctx.enable_progress_bars = False
    err = capfd.readouterr().err
    assert "- ReadRange->MapBatches(<lambda>): 10 rows, " in err
    assert "rows/s, 0 blocks queued" in err


def test_split_at_indices_proportionately_and_train_test_split_keep_every_row_once(rd):
    ds = rd.range(100, override_num_blocks=7)
    parts = ds.split_at_indices([10, 10, 55, 500])
    assert [p.count() for p in parts] == [10, 0, 45, 45, 0]
    assert sorted(r["id"] for p in parts for r in p.take_all()) == list(range(100))
    assert [r["id"] for r in parts[2].take_all()] == list(range(10, 55))  # in order
    assert [p.count() for p in ds.split_proportionately([0.25, 0.5])] == [25, 50, 25]
    train, test = ds.train_test_split(test_size=0.2)
    assert (train.count(), test.count()) == (80, 20)
    assert [r["id"] for r in test.take_all()] == list(range(80, 100))
    train, test = ds.train_test_split(test_size=30, shuffle=True, seed=7)
    assert (train.count(), test.count()) == (70, 30)
    ids = [r["id"] for r in train.take_all()] + [r["id"] for r in test.take_all()]
    assert sorted(ids) == list(range(100)) and ids != list(range(100))
    with pytest.raises(ValueError, match="sorted"):
        ds.split_at_indices([5, 2])
    with pytest.raises(ValueError, match="sum to less than 1"):
        ds.split_proportionately([0.5, 0.5])
    with pytest.raises(ValueError, match="test_size"):
        ds.train_test_split(test_size=1.5)
