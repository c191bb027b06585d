"""A dataset fed to airt.train ranks through streaming_split when the ranks hold every CPU: its
read and map tasks run on the CPUs the ranks hold (a rank waiting for input lends its CPU in
effect) instead of waiting for CPUs nobody will free. The training runs as a driver process of
its own on a one-node, 2-CPU cluster, so that a hang is a timeout, not a stuck session."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import Cluster


@pytest.fixture(scope="module")
def two_cpus(tmp_path_factory):
    cluster = Cluster(str(tmp_path_factory.mktemp("data-train")))
    try:
        cluster.start_head()
        cluster.add_node("--num-cpus=2")
        yield cluster
    finally:
        cluster.stop()


DRIVER = """
import json, os, sys
import airt
from airt import data, train
from airt.train import DataParallelTrainer, RunConfig, ScalingConfig

files, out = sys.argv[1], sys.argv[2]
airt.init()
data.DataContext.get_current().enable_progress_bars = False

def loop():
    shard = train.get_dataset_shard("train")
    epochs = [[row["id"] for row in shard.iter_rows()] for _ in range(2)]
    rank = train.get_context().get_world_rank()
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(epochs, f)
    train.report({"rows": len(epochs[0])})

# Two ranks of 1 CPU each (ScalingConfig's default) take both CPUs of the node.
ds = data.read_parquet(files).map_batches(lambda b: {"id": b["id"] * 2})
result = DataParallelTrainer(loop, datasets={"train": ds},
                             scaling_config=ScalingConfig(num_workers=2),
                             run_config=RunConfig(name="run", storage_path=out)).fit()
assert result.error is None, result.error
print("OK")
"""


def test_two_ranks_holding_every_cpu_still_read_their_dataset(two_cpus, tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    for i in range(4):
        pq.write_table(pa.table({"id": list(range(i * 25, (i + 1) * 25))}),
                       files / f"part{i}.parquet")
    out = tmp_path / "out"
    out.mkdir()
    stdout = two_cpus.run_driver(DRIVER, str(files), str(out), timeout=420)
    assert stdout.strip().endswith("OK"), stdout
    epochs = [json.load(open(out / f"rank{r}.json")) for r in range(2)]
    for epoch in range(2):
        got = epochs[0][epoch] + epochs[1][epoch]
        assert len(epochs[0][epoch]) == len(epochs[1][epoch]) == 50  # equal=True
        assert sorted(got) == [i * 2 for i in range(100)]


def test_actors_in_a_placement_group_holding_every_cpu_consume_their_splits(two_cpus):
    """The same without the train layer, over a dataset with all-to-all ops: two actors in the
    bundles of a placement group that takes both CPUs (a blocked worker lends the CPUs of its
    own lease, not those of a bundle, so without sharing nothing would run)."""
    code = """
import airt
from airt import data
from airt.util import placement_group
from airt.util.scheduling_strategies import PlacementGroupSchedulingStrategy
airt.init()
data.DataContext.get_current().enable_progress_bars = False

@airt.remote
class Consumer:
    def rows(self, split):
        return [[r["id"] for r in split.iter_rows()] for _ in range(2)]

pg = placement_group([{"CPU": 1}] * 2)
assert pg.wait(120)
consumers = [Consumer.options(num_cpus=1, scheduling_strategy=PlacementGroupSchedulingStrategy(
    pg, i)).remote() for i in range(2)]
# The all-to-all ops' tasks (a shuffle, and the reads of the dataset a union adds) share the
# consumers' CPUs too.
rest = data.range(20, override_num_blocks=2).map(lambda r: {"id": r["id"] + 40})
ds = data.range(40, override_num_blocks=4).random_shuffle(seed=3).union(rest)
splits = ds.streaming_split(2, equal=True)
got = airt.get([c.rows.remote(s) for c, s in zip(consumers, splits)], timeout=300)
for epoch in range(2):
    assert sorted(got[0][epoch] + got[1][epoch]) == list(range(60)), got
    assert len(got[0][epoch]) == len(got[1][epoch]) == 30
print("OK")
"""
    assert two_cpus.run_driver(code, timeout=420).strip().endswith("OK")
