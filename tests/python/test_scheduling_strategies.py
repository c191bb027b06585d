"""Scheduling strategies decided by the schedulers, on a three-node cluster (head and nodes as
processes, labelled zone=a/b/c; the third has two declared GPUs and accelerator type H100):
SPREAD, node affinity hard and soft (a dead node's name in the error), label selectors and
NodeLabelSchedulingStrategy, placement_group_capture_child_tasks, and a bundle's GPU ids."""

import os

import pytest

from conftest import BUILD, Cluster

PRELUDE = """
import os, sys, time
import airt
from airt.util.placement_group import placement_group, remove_placement_group
from airt.util.scheduling_strategies import (
    DoesNotExist, Exists, In, NodeAffinitySchedulingStrategy, NodeLabelSchedulingStrategy, NotIn,
    PlacementGroupSchedulingStrategy)
airt.init()
NODES = sys.argv[1].split(",")

@airt.remote(num_cpus=1)
def where(hold=0.0):
    time.sleep(hold)
    return airt.get_runtime_context().get_node_id()

@airt.remote
class Where:
    def node(self):
        return airt.get_runtime_context().get_node_id()
"""


@pytest.fixture(scope="module")
def labelled(tmp_path_factory, task_functions_dir):
    cluster = Cluster(str(tmp_path_factory.mktemp("labelled")))
    try:
        cluster.start_head()
        cluster.add_node("--num-cpus=2", "--labels=zone=a", code_search_path=task_functions_dir)
        cluster.add_node("--num-cpus=2", "--labels=zone=b", code_search_path=task_functions_dir)
        cluster.add_node("--num-cpus=2", "--num-gpus=2",
                         "--labels=zone=c,ray.io/accelerator-type=H100",
                         code_search_path=task_functions_dir)
        yield cluster
    finally:
        cluster.stop()


def run(cluster, code):
    return cluster.run_driver(PRELUDE + code, ",".join(cluster.node_ids),
                              os.path.join(BUILD, "cli", "airt"), cluster.address)


def test_spread_puts_one_task_on_each_node(labelled):
    run(labelled, """
# The driver's node knows the other two (its view of the cluster is polled from the head) once
# a task only they can run has run there.
for zone in ("b", "c"):
    airt.get(where.options(label_selector={"zone": zone}).remote(), timeout=60)
refs = [where.options(scheduling_strategy="SPREAD").remote(1.0) for _ in range(3)]
placed = airt.get(refs, timeout=120)
assert sorted(placed) == sorted(NODES), (placed, NODES)
actors, placed = [], []
for _ in range(3):  # one at a time: each placement is recorded before the next is decided
    actors.append(Where.options(scheduling_strategy="SPREAD").remote())
    placed.append(airt.get(actors[-1].node.remote(), timeout=120))
assert sorted(placed) == sorted(NODES), placed
""")


def test_node_affinity_hard_and_soft(labelled):
    run(labelled, """
for node in NODES:
    hard = NodeAffinitySchedulingStrategy(node, soft=False)
    assert airt.get(where.options(scheduling_strategy=hard).remote(), timeout=60) == node
    actor = Where.options(scheduling_strategy=hard).remote()
    assert airt.get(actor.node.remote(), timeout=60) == node
unknown = "ab" * 28
soft = NodeAffinitySchedulingStrategy(unknown, soft=True)
assert airt.get(where.options(scheduling_strategy=soft).remote(), timeout=60) in NODES
try:
    NodeAffinitySchedulingStrategy(NODES[0], soft=False, _spill_on_unavailable=True)
    raise SystemExit("_spill_on_unavailable with soft=False was accepted")
except ValueError:
    pass
""")


def test_label_selectors_and_node_label_strategy(labelled):
    run(labelled, """
a, b, c = NODES
def on(**options):
    return airt.get(where.options(**options).remote(), timeout=60)
assert on(label_selector={"zone": "b"}) == b
assert on(label_selector={"zone": "in(a,c)"}) in (a, c)
assert on(label_selector={"zone": "!in(a,b)"}) == c
assert on(label_selector={"accelerator_type": "H100"}) == c
assert on(label_selector={"ray.io/accelerator-type": "H100", "zone": "!a"}) == c
assert on(scheduling_strategy=NodeLabelSchedulingStrategy({"zone": NotIn("a", "c")})) == b
assert on(scheduling_strategy=NodeLabelSchedulingStrategy(
    {"zone": In("a", "b")}, soft={"zone": In("a")})) == a
assert on(scheduling_strategy=NodeLabelSchedulingStrategy(
    {"ray.io/accelerator-type": Exists()})) == c
assert on(scheduling_strategy=NodeLabelSchedulingStrategy(
    {"ray.io/accelerator-type": DoesNotExist(), "zone": NotIn("a")})) == b
actor = Where.options(label_selector={"zone": "a"}).remote()
assert airt.get(actor.node.remote(), timeout=60) == a
try:
    airt.get(where.options(label_selector={"zone": "mars"}).remote(), timeout=60)
    raise SystemExit("a label no node has was scheduled")
except airt.exceptions.InfeasibleError as error:
    assert "zone in (mars)" in str(error) and "zone=a" in str(error), str(error)
""")


def test_placement_group_capture_child_tasks(labelled):
    run(labelled, """
@airt.remote(num_cpus=1)
def child():
    ctx = airt.get_runtime_context()
    return ctx.get_placement_group_id(), ctx.get_node_id()

@airt.remote(num_cpus=1)
def parent(explicit):
    ctx = airt.get_runtime_context()
    inner = child.options(scheduling_strategy="DEFAULT") if explicit else child
    return ctx.should_capture_child_tasks_in_placement_group, airt.get(inner.remote())

pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_PACK")
assert pg.wait(60)
node = airt.get(where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, 0))
                .remote(), timeout=60)
captured = PlacementGroupSchedulingStrategy(pg, 0, placement_group_capture_child_tasks=True)
flag, (group, child_node) = airt.get(parent.options(scheduling_strategy=captured).remote(False),
                                      timeout=60)
assert flag is True and group == pg.id.hex() and child_node == node, (flag, group, node)
flag, (group, _) = airt.get(parent.options(scheduling_strategy=captured).remote(True), timeout=60)
assert group is None, group
plain = PlacementGroupSchedulingStrategy(pg, 0)
flag, (group, _) = airt.get(parent.options(scheduling_strategy=plain).remote(False), timeout=60)
assert flag is False and group is None, (flag, group)
remove_placement_group(pg)
""")


def test_bundle_gpu_ids_are_the_bundles(labelled):
    run(labelled, """
@airt.remote(num_gpus=1, num_cpus=0)
def gpus():
    return airt.get_gpu_ids(), os.environ.get("CUDA_VISIBLE_DEVICES")

pg = placement_group([{"GPU": 1, "CPU": 0.1}, {"GPU": 1, "CPU": 0.1}], strategy="STRICT_PACK")
assert pg.wait(60)
seen = [airt.get(gpus.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, i))
                 .remote(), timeout=60) for i in range(2)]
ids = sorted(s[0][0] for s in seen)
assert ids == [0, 1], seen
assert all(len(s[0]) == 1 and s[1] == str(s[0][0]) for s in seen), seen
remove_placement_group(pg)
""")


def test_bundle_label_selector_and_status(labelled):
    run(labelled, """
import subprocess
from airt.util.placement_group import placement_group_table
a, b, c = NODES
pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="SPREAD",
                     bundle_label_selector=[{"zone": "b"}, {"zone": "in(a,c)"}])
assert pg.wait(60)
placed = [airt.get(where.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, i))
                   .remote(), timeout=60) for i in range(2)]
assert placed[0] == b and placed[1] in (a, c), placed
never = placement_group([{"CPU": 1}], name="never", bundle_label_selector=[{"zone": "mars"}])
assert not never.wait(timeout_seconds=1)
assert placement_group_table(never)["stats"]["scheduling_state"] == "INFEASIBLE"
status = subprocess.run([sys.argv[2], "status", "--address", sys.argv[3]], capture_output=True,
                        text=True, timeout=60).stdout
assert pg.id.hex() in status and "SPREAD" in status and "CREATED" in status, status
assert "never" in status and "INFEASIBLE" in status and "zone in (mars)" in status, status
assert "node " + b[:8] in status, status
remove_placement_group(pg)
remove_placement_group(never)
""")


def test_hard_affinity_to_a_dead_node_fails_naming_it(labelled):
    victim = labelled.node_ids[1]
    labelled.processes[2].terminate()  # head, node1, node2 (the victim), node3
    labelled.processes[2].wait(timeout=30)
    run(labelled, f"""
deadline = time.time() + 60
while any(n["NodeID"] == "{victim}" and n["Alive"] for n in airt.nodes()):
    assert time.time() < deadline, "the head never saw the node die"
    time.sleep(0.1)
hard = NodeAffinitySchedulingStrategy("{victim}", soft=False)
try:
    airt.get(where.options(scheduling_strategy=hard).remote(), timeout=60)
    raise SystemExit("a task ran on a dead node")
except airt.exceptions.InfeasibleError as error:
    assert "{victim}" in str(error), str(error)
soft = NodeAffinitySchedulingStrategy("{victim}", soft=True)
assert airt.get(where.options(scheduling_strategy=soft).remote(), timeout=60) != "{victim}"
actor = Where.options(scheduling_strategy=hard).remote()
try:
    airt.get(actor.node.remote(), timeout=60)
    raise SystemExit("an actor was placed on a dead node")
except airt.exceptions.RayActorError as error:
    assert "{victim}" in str(error), str(error)
""")
