"""Placement groups from Python drivers on a three-node cluster (head and nodes as processes):
Ray's airt.util.placement_group API, tasks and actors scheduled into bundles, removal, and a
job's groups removed when its driver exits."""

import pytest

from conftest import Cluster

PRELUDE = """
import sys, warnings
import airt
from airt.util.placement_group import (placement_group, remove_placement_group,
    get_placement_group, placement_group_table, get_current_placement_group)
from airt.util.scheduling_strategies import PlacementGroupSchedulingStrategy
airt.init()

@airt.remote(num_cpus=1)
def where():
    return airt.get_runtime_context().get_node_id()
"""


@pytest.fixture(scope="module")
def three_nodes(tmp_path_factory, task_functions_dir):
    cluster = Cluster(str(tmp_path_factory.mktemp("three-nodes")))
    try:
        cluster.start_head()
        for _ in range(3):
            cluster.add_node("--num-cpus=2", code_search_path=task_functions_dir)
        yield cluster
    finally:
        cluster.stop()


def test_strategies_bundles_tasks_and_actors(three_nodes):
    code = PRELUDE + """
pg = placement_group([{"CPU": 1}] * 3, strategy="STRICT_SPREAD", name="gang")
assert airt.get(pg.ready(), timeout=60) is True
assert pg.wait(timeout_seconds=10)
nodes = [airt.get(where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, i))
                  .remote(), timeout=60) for i in range(3)]
assert len(set(nodes)) == 3, nodes
entry = placement_group_table(pg)
assert entry["state"] == "CREATED" and entry["strategy"] == "STRICT_SPREAD", entry
assert [entry["bundles_to_node_id"][i] for i in range(3)] == nodes, (entry, nodes)
assert get_placement_group("gang") == pg
assert get_current_placement_group() is None

@airt.remote
class Member:
    def group(self):
        current = get_current_placement_group()
        return current.id.hex() if current else None
    def node(self):
        return airt.get_runtime_context().get_node_id()

member = Member.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 2)).remote()
assert airt.get(member.node.remote(), timeout=60) == nodes[2]
assert airt.get(member.group.remote()) == pg.id.hex()

remove_placement_group(pg)
assert placement_group_table(pg)["state"] == "REMOVED"
try:
    airt.get(member.node.remote(), timeout=60)
    raise SystemExit("the actor of a removed group still answers")
except airt.exceptions.RayActorError:
    pass

packed = placement_group([{"CPU": 2}], strategy="STRICT_PACK")
assert packed.wait(30)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    huge = placement_group([{"CPU": 100}])
    assert not huge.wait(timeout_seconds=1.5)
assert any("cannot be placed" in str(w.message) for w in caught), [str(w.message) for w in caught]
assert placement_group_table(huge)["stats"]["scheduling_state"] == "INFEASIBLE"
remove_placement_group(huge)

detached = placement_group([{"CPU": 0.5}], name="keeper", lifetime="detached")
assert detached.wait(30)
left = placement_group([{"CPU": 0.5}], name="mine")
assert left.wait(30)
for bad in ([], [{}], [{"CPU": 0}]):
    try:
        placement_group(bad)
        raise SystemExit(f"bundles {bad!r} accepted")
    except ValueError:
        pass
try:
    placement_group([{"CPU": 1}], strategy="NOPE")
    raise SystemExit("bad strategy accepted")
except ValueError:
    pass
print("OK", detached.id.hex(), left.id.hex())
"""
    out = three_nodes.run_driver(code).strip().splitlines()[-1].split()
    assert out[0] == "OK"
    detached_id, left_id = out[1], out[2]

    # The first driver has exited: its job's groups went with it, except the detached one.
    check = """
import time
import airt
from airt.util.placement_group import placement_group_table
airt.init()
detached_id, left_id = __import__("sys").argv[1:3]
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    table = placement_group_table()
    if table[left_id]["state"] == "REMOVED":
        break
    time.sleep(0.1)
assert table[left_id]["state"] == "REMOVED", table[left_id]
assert table[detached_id]["state"] == "CREATED", table[detached_id]
print("OK")
"""
    assert three_nodes.run_driver(check, detached_id, left_id).strip().endswith("OK")
