"""Actor pools leave the other operators their CPUs (DataContext.op_resource_reservation_ratio,
as Ray's ReservationOpResourceAllocator): a pool whose min_size cannot fit beside the tasks that
feed it fails at once with an error naming its needs and the cluster's CPUs, and an autoscaling
pool grows only into what the task operators leave. A head and one 4-CPU node; each test a
driver process of its own (the driver's timeout guards against a hang)."""

import json

import pytest

from conftest import Cluster


@pytest.fixture(scope="module")
def four_cpus(tmp_path_factory):
    cluster = Cluster(str(tmp_path_factory.mktemp("data-reservation")))
    try:
        cluster.start_head()
        cluster.add_node("--num-cpus=4")
        yield cluster
    finally:
        cluster.stop()


PRELUDE = """
import json, time
import numpy as np
import airt
import airt.data as rd
airt.init()
ctx = rd.DataContext.get_current()
ctx.enable_progress_bars = False
ctx.wait_for_min_actors_s = 120  # a pool that cannot start fails the pipeline, never hangs it

class Slow:
    def __call__(self, batch):
        time.sleep(0.2)
        return batch

def pool_stats(ds):
    return [s.as_dict() for s in ds._stats.operators if s.name.startswith("MapBatches(Slow")][0]
"""


def run(cluster, body):
    out = cluster.run_driver(PRELUDE + body, timeout=240)
    return json.loads(out.strip().splitlines()[-1])


def test_a_pool_of_min_size_all_cpus_behind_a_read_fails_fast_naming_its_needs(four_cpus):
    result = run(four_cpus, """
ds = rd.range(40, override_num_blocks=8).map_batches(
    Slow, compute=rd.ActorPoolStrategy(min_size=4, max_size=4))
try:
    ds.take_all()
    print(json.dumps({"error": None}))
except Exception as error:
    print(json.dumps({"error": str(error), "type": type(error).__name__}))
""")
    assert result["error"] is not None, "the pool took every CPU and the pipeline completed"
    assert result["type"] == "ValueError", result
    message = result["error"]
    assert "needs 4 CPUs" in message and "min_size=4" in message, message
    assert "the cluster has 4 CPUs" in message and "ReadRange" in message, message


def test_a_pool_that_fits_beside_the_read_reservation_completes(four_cpus):
    result = run(four_cpus, """
ds = rd.range(40, override_num_blocks=8).map_batches(
    Slow, compute=rd.ActorPoolStrategy(min_size=3, max_size=3))
ids = sorted(r["id"] for r in ds.take_all())
print(json.dumps({"ids": ids, "pool": pool_stats(ds)}))
""")
    assert result["ids"] == list(range(40))
    assert result["pool"]["max_actors"] == 3


def test_an_autoscaling_pool_grows_only_into_what_the_tasks_leave(four_cpus):
    # Read (1 CPU) -> pool of 1-CPU actors (up to 4) -> a task map (1 CPU): the read and the
    # map keep a CPU each while they run, so the pool never holds more than 3 (2 while the read
    # runs); a backlog of slow blocks would grow it to 4 otherwise.
    result = run(four_cpus, """
ds = (rd.range(200, override_num_blocks=20)
        .map_batches(Slow, compute=rd.ActorPoolStrategy(min_size=1, max_size=4))
        .map_batches(lambda b: {"id": b["id"] * 2}))
ids = sorted(r["id"] for r in ds.take_all())
print(json.dumps({"ids": ids, "pool": pool_stats(ds)}))
""")
    assert result["ids"] == [2 * i for i in range(200)]
    pool = result["pool"]
    assert 2 <= pool["max_actors"] <= 3, pool


def test_a_pool_over_blocks_already_made_may_take_every_cpu(four_cpus):
    result = run(four_cpus, """
blocks = rd.range(40, override_num_blocks=8).materialize()
ds = blocks.map_batches(Slow, compute=rd.ActorPoolStrategy(size=4))
ids = sorted(r["id"] for r in ds.take_all())
print(json.dumps({"ids": ids, "pool": pool_stats(ds)}))
""")
    assert result["ids"] == list(range(40))
    assert result["pool"]["max_actors"] == 4
