"""streaming_split's locality_hints on two nodes: blocks made on a hinted consumer's node go
to that consumer mostly (each block records the node its task ran on), every row still goes
to exactly one consumer, and equal=True stays equal; the totals are those of a split without
hints. Drivers run as processes of their own against real daemons."""

import json

import pytest

from conftest import Cluster


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    cluster = Cluster(str(tmp_path_factory.mktemp("data-split-nodes")))
    try:
        cluster.start_head()
        cluster.add_node("--num-cpus=2")
        cluster.add_node("--num-cpus=2")
        yield cluster
    finally:
        cluster.stop()


# Blocks of 150 KB (in the store, not inline), made by tasks spread over both nodes (each
# holds a node's 2 CPUs a moment, so the next one goes to the other node); two
# consumers, one pinned to each node, each returning the (id, node) of the rows it got.
DRIVER = """
import json, sys, time
import numpy as np
import airt
import airt.data as rd
from airt.util.scheduling_strategies import NodeAffinitySchedulingStrategy

airt.init()
rd.DataContext.get_current().enable_progress_bars = False
alive = [n["NodeID"] for n in airt.nodes() if n["Alive"]]
assert len(alive) == 2, alive
equal, hinted = sys.argv[1] == "equal", sys.argv[2] == "hints"

def where(batch):
    time.sleep(0.1)
    n = len(batch["id"])
    node = airt.get_runtime_context().get_node_id()
    return {"id": batch["id"], "node": np.array([node] * n),
            "pad": np.zeros((n, 3000), dtype=np.uint8)}

@airt.remote(num_cpus=0)
class Consumer:
    def __init__(self, it):
        self.it = it

    def node(self):
        return airt.get_runtime_context().get_node_id()

    def epoch(self):
        return [(int(i), str(n)) for b in self.it.iter_batches(batch_size=None)
                for i, n in zip(b["id"], b["node"])]

ds = rd.range(1201, override_num_blocks=24).map_batches(where, num_cpus=2,
                                                                  scheduling_strategy="SPREAD")
its = ds.streaming_split(2, equal=equal, locality_hints=alive if hinted else None)
consumers = [Consumer.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
    node, soft=False)).remote(it) for node, it in zip(alive, its)]
assert airt.get([c.node.remote() for c in consumers]) == alive
got = airt.get([c.epoch.remote() for c in consumers])
print(json.dumps({"nodes": alive, "got": got,
                  "locality": airt.get(its[0]._coordinator.locality.remote())}))
"""


def split(nodes, equal, hints):
    out = nodes.run_driver(DRIVER, "equal" if equal else "any", "hints" if hints else "none",
                           timeout=300)
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("equal", [False, True])
def test_a_hinted_consumer_gets_mostly_the_blocks_of_its_node(nodes, equal):
    result = split(nodes, equal, hints=True)
    alive, got = result["nodes"], result["got"]
    made_on = {n for rows in got for _, n in rows}
    assert made_on == set(alive), made_on  # the blocks lie on both nodes
    ids = [i for rows in got for i, _ in rows]
    assert len(ids) == len(set(ids))  # each row to exactly one consumer
    if equal:
        assert len(got[0]) == len(got[1]) == 600
    else:
        assert sorted(ids) == list(range(1201))
    # Each node's blocks go to its consumer as far as that consumer takes rows: of the rows made
    # on a node, those its consumer got are (nearly) all it could take.
    for node, rows in zip(alive, got):
        local = sum(1 for _, n in rows if n == node)
        made = sum(1 for r in got for _, n in r if n == node)
        assert local >= 0.8 * min(made, len(rows)), (node, local, made, len(rows))
    hits, misses = result["locality"]["hits"], result["locality"]["misses"]
    assert hits + misses > 0 and hits >= misses, result["locality"]


@pytest.mark.parametrize("equal", [False, True])
def test_hints_leave_the_totals_unchanged(nodes, equal):
    with_hints = split(nodes, equal, hints=True)["got"]
    without = split(nodes, equal, hints=False)["got"]
    assert sum(map(len, with_hints)) == sum(map(len, without))
    if equal:
        assert [len(r) for r in with_hints] == [len(r) for r in without] == [600, 600]
    else:
        assert sorted(i for r in with_hints for i, _ in r) == \
            sorted(i for r in without for i, _ in r) == list(range(1201))
