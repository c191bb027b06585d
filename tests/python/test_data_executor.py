"""airt.data's streaming executor on a cluster of its own (a head and a 2-CPU node with a 64 MiB
store), each test a driver process: the store stays within the budget under a pipeline ten
times its size, actor pools grow and shrink, a killed worker's block is made again."""

import json

import pytest

from conftest import Cluster

STORE = 64 << 20


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    cluster = Cluster(str(tmp_path_factory.mktemp("data-small-store")))
    try:
        cluster.start_head()
        cluster.add_node("--num-cpus=2", f"--object-store-memory={STORE}")
        yield cluster
    finally:
        cluster.stop()


PRELUDE = """
import json, os, sys, threading, time
import numpy as np
import airt
import airt.data as rd
airt.init()
ctx = rd.DataContext.get_current()
ctx.enable_progress_bars = False
"""


def run(cluster, body, *args):
    out = cluster.run_driver(PRELUDE + body, *args, timeout=240)
    return json.loads(out.strip().splitlines()[-1])


def test_pipeline_of_ten_times_the_store_keeps_its_peak_within_the_budget(small_store):
    result = run(small_store, """
capacity = airt._airt.store_stats()["capacity_bytes"]
ctx.object_store_memory_fraction = 0.25
ctx.target_max_block_size = 1 << 20
budget = ctx.budget_bytes()
row = 1024 * 8                      # one row: 1024 int64
rows = 10 * capacity // row         # ten stores' worth
blocks = rows * row // (1 << 20)    # 1 MiB blocks
peak, done = [0], threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], airt._airt.store_stats()["used_bytes"])
        time.sleep(0.002)
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
ds = rd.range_tensor(rows, shape=(1024,), override_num_blocks=blocks)
ds = ds.map_batches(lambda b: {"data": b["data"] + 1})
seen, total = 0, 0
for batch in ds.iter_batches(batch_size=64):
    seen += len(batch["data"])
    total += int(batch["data"][:, 0].sum())
done.set()
sampler.join()  # not inside the store's client while the process exits
print(json.dumps({"capacity": capacity, "budget": budget, "peak": peak[0], "rows": rows,
                  "seen": seen, "total": total, "bytes": rows * row}))
""")
    assert result["capacity"] == STORE
    assert result["bytes"] >= 10 * STORE
    assert result["seen"] == result["rows"]
    n = result["rows"]
    assert result["total"] == n * (n - 1) // 2 + n  # every row once, each + 1
    assert 0 < result["peak"] <= result["budget"], result


def test_actor_pool_grows_with_the_backlog_and_shrinks_when_idle(small_store):
    result = run(small_store, """
ctx.actor_pool_idle_timeout_s = 0.2
class Slow:
    def __init__(self, delay):
        self.delay = delay
    def __call__(self, batch):
        time.sleep(self.delay)
        return {"id": batch["id"], "pid": np.full(len(batch["id"]), os.getpid())}
def slow_tail(batch):
    if batch["id"][0] >= 600:
        time.sleep(0.3)  # the source slows down: the pool idles and shrinks
    return batch
ds = rd.range(800, override_num_blocks=40).map_batches(slow_tail, num_cpus=0.5).map_batches(
    Slow, fn_constructor_args=(0.05,), num_cpus=0.25,  # 2 fit beside the tasks' 1.5 CPUs
    compute=rd.ActorPoolStrategy(min_size=1, max_size=2))
rows = ds.take_all()
pool = [s.as_dict() for s in ds._stats.operators if s.name.startswith("MapBatches(Slow")][0]
print(json.dumps({"ids": [r["id"] for r in rows], "pids": sorted({r["pid"] for r in rows}),
                  "pool": pool, "stats": ds.stats()}))
""")
    assert result["ids"] == list(range(800))
    pool = result["pool"]
    assert pool["max_actors"] == 2 and pool["scale_ups"] >= 1
    assert pool["scale_downs"] >= 1
    assert len(result["pids"]) >= 2
    assert 0.0 <= pool["idle_fraction"] <= 1.0
    assert "idle fraction" in result["stats"]


def test_fixed_actor_pool_and_deprecated_concurrency(small_store):
    result = run(small_store, """
import warnings
class AddOne:
    def __init__(self, k):
        self.k = k
    def __call__(self, batch):
        return {"id": batch["id"] + self.k}
ds = rd.range(100, override_num_blocks=10).map_batches(
    AddOne, fn_constructor_args=(1,), compute=rd.ActorPoolStrategy(size=2), num_cpus=0.5)
fixed = [r["id"] for r in ds.take_all()]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    old = rd.range(10).map_batches(AddOne, fn_constructor_args=(2,), concurrency=1,
                                   num_cpus=0.5)
    task_old = rd.range(10).map_batches(lambda b: b, concurrency=2)
print(json.dumps({"fixed": fixed, "old": [r["id"] for r in old.take_all()],
                  "tasks": [r["id"] for r in task_old.take_all()],
                  "warned": [str(w.message) for w in caught]}))
""")
    assert result["fixed"] == list(range(1, 101))
    assert result["old"] == list(range(2, 12))
    assert result["tasks"] == list(range(10))
    assert len(result["warned"]) == 2 and all("deprecated" in w for w in result["warned"])


def test_worker_killed_mid_pipeline_recomputes_its_block(small_store, tmp_path):
    marker = str(tmp_path / "killed")
    result = run(small_store, """
marker = sys.argv[1]
def die_once(batch):
    if batch["id"][0] == 50 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)  # the worker dies in the middle of the pipeline
    return {"id": batch["id"] * 10}
ds = rd.range(100, override_num_blocks=10).map_batches(die_once, batch_size=5)
ids = [r["id"] for r in ds.take_all()]
print(json.dumps({"ids": ids, "killed": os.path.exists(marker), "stats": ds.stats()}))
""", marker)
    assert result["killed"]
    assert result["ids"] == [10 * i for i in range(100)]  # nothing lost, nothing repeated
    assert "retried after a worker died" in result["stats"]


def test_actor_killed_mid_pipeline_loses_and_repeats_nothing(small_store, tmp_path):
    marker = str(tmp_path / "actor-killed")
    result = run(small_store, """
marker = sys.argv[1]
class DieOnce:
    def __call__(self, batch):
        if batch["id"][0] == 40 and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)
        return batch
ds = rd.range(100, override_num_blocks=10).map_batches(
    DieOnce, compute=rd.ActorPoolStrategy(size=1), num_cpus=0.5)
print(json.dumps({"ids": [r["id"] for r in ds.take_all()], "killed": os.path.exists(marker)}))
""", marker)
    assert result["killed"]
    assert result["ids"] == list(range(100))
