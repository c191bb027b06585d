"""Python drivers on a two-node cluster (head and nodes as processes): work and objects crossing
nodes, scheduling strategies, namespaces shared by drivers, working_dir on each node."""

import os
import subprocess
import sys
import time

import pytest

PRELUDE = """
import os, sys
import numpy as np
import airt
from airt.util.scheduling_strategies import NodeAffinitySchedulingStrategy
airt.init()
node1, node2 = sys.argv[1], sys.argv[2]

@airt.remote
def where():
    return airt.get_runtime_context().get_node_id()
"""


def test_tasks_actors_and_objects_cross_nodes(two_nodes):
    code = PRELUDE + """
assert sorted(n["NodeID"] for n in airt.nodes() if n["Alive"]) == sorted([node1, node2])
assert airt.cluster_resources()["CPU"] == 4.0

@airt.remote(resources={"node2": 1})
def make_on_node2():
    return airt.get_runtime_context().get_node_id(), np.full(16 << 20, 7, dtype=np.uint8)

@airt.remote
def total(array):
    return airt.get_runtime_context().get_node_id(), int(array.sum())

made_on, array = airt.get(make_on_node2.remote())
assert made_on == node2, made_on
assert array.shape == (16 << 20,) and int(array[0]) == 7
local = np.ones(32 << 20, dtype=np.uint8)
ran_on, sum_there = airt.get(total.options(resources={"node2": 1}).remote(airt.put(local)))
assert (ran_on, sum_there) == (node2, 32 << 20), (ran_on, sum_there)

for node in (node1, node2):
    pinned = where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
    assert airt.get(pinned.remote()) == node
assert set(airt.get([where.options(scheduling_strategy="SPREAD").remote()
                     for _ in range(4)])) == {node1, node2}

@airt.remote(resources={"node2": 1})
class Keeper:
    def __init__(self):
        self.items = []
    def add(self, x):
        self.items.append(x)
        return airt.get_runtime_context().get_node_id(), len(self.items)

keeper = Keeper.remote()
keeper.add.remote(1)
assert airt.get(keeper.add.remote(2)) == (node2, 2)
print("OK")
"""
    assert two_nodes.run_driver(code, *two_nodes.node_ids).strip().endswith("OK")


def test_named_actors_are_shared_within_a_namespace(two_nodes):
    owner_code = """
import sys
import airt
airt.init(namespace="team")

@airt.remote
class Board:
    def __init__(self):
        self.notes = []
    def post(self, note):
        self.notes.append(note)
        return len(self.notes)

board = Board.options(name="board").remote()
airt.get(board.post.remote("first"))
print("ready", flush=True)
sys.stdin.readline()  # lives until the test closes stdin
"""
    owner = subprocess.Popen([sys.executable, "-c", owner_code], env=two_nodes.env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout.readline().strip() == "ready"
        same = two_nodes.run_driver("""
import airt
airt.init(namespace="team")
print(airt.get(airt.get_actor("board").post.remote("second")))
""")
        assert same.strip() == "2"
        other = two_nodes.run_driver("""
import airt
airt.init()
try:
    airt.get_actor("board")
    print("found in the anonymous namespace")
except ValueError:
    print(airt.get(airt.get_actor("board", namespace="team").post.remote("third")))
""")
        assert other.strip() == "3"
    finally:
        owner.stdin.close()
        owner.wait(timeout=60)
    # The owner's job ended: its non-detached actor is gone.
    gone = """
import time
import airt
airt.init(namespace="team")
deadline = time.time() + 30
while time.time() < deadline:
    try:
        airt.get_actor("board")
    except ValueError:
        print("gone")
        break
    time.sleep(0.2)
"""
    assert two_nodes.run_driver(gone).strip() == "gone"


def test_working_dir_is_unpacked_on_each_node(two_nodes, tmp_path):
    folder = tmp_path / "app"
    folder.mkdir()
    (folder / "settings.txt").write_text("from the driver's machine")
    code = PRELUDE.replace("airt.init()", f"airt.init(runtime_env={{'working_dir': {str(folder)!r}, "
                                          "'env_vars': {'APP_MODE': 'test'}})") + """
@airt.remote
def look():
    return (airt.get_runtime_context().get_node_id(), os.getcwd(), open("settings.txt").read(),
            os.environ["APP_MODE"])

seen = {}
for node in (node1, node2):
    strategy = NodeAffinitySchedulingStrategy(node, soft=False)
    ran_on, cwd, text, mode = airt.get(look.options(scheduling_strategy=strategy).remote())
    assert ran_on == node and text == "from the driver's machine" and mode == "test"
    assert "node-" + node[:12] in cwd, (node, cwd)
    seen[node] = cwd
assert seen[node1] != seen[node2]
print("OK")
"""
    assert two_nodes.run_driver(code, *two_nodes.node_ids).strip().endswith("OK")


def test_address_auto_joins_the_cluster_airt_start_made(tmp_path):
    from conftest import BUILD, Cluster
    temp = str(tmp_path / "session")
    cli = os.path.join(BUILD, "cli", "airt")
    env = Cluster(temp).env()
    env.pop("AIRT_ADDRESS", None)
    env["AIRT_TEMP_DIR"] = temp
    started = subprocess.run([cli, "start", "--head", "--port=0", f"--temp-dir={temp}",
                              "--num-cpus=1", "--object-store-memory=128M"], env=env,
                             capture_output=True, text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        code = """
import airt
airt.init(address="auto")
@airt.remote
def one():
    return 1
print(airt.get(one.remote()), airt.cluster_resources()["CPU"])
"""
        joined = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                text=True, timeout=120)
        assert joined.returncode == 0, joined.stderr
        assert joined.stdout.split() == ["1", "1.0"]
    finally:
        subprocess.run([cli, "stop", f"--temp-dir={temp}"], env=env, capture_output=True,
                       timeout=120)


def test_a_detached_actor_outlives_its_driver(two_nodes):
    creator = two_nodes.run_driver("""
import airt
airt.init(namespace="services")

@airt.remote
class Registry:
    def __init__(self):
        self.entries = {}
    def register(self, key, value):
        self.entries[key] = value
        return len(self.entries)

registry = Registry.options(name="registry", lifetime="detached").remote()
print(airt.get(registry.register.remote("a", 1)))
""")
    assert creator.strip() == "1"
    user = two_nodes.run_driver("""
import airt
airt.init()
registry = airt.get_actor("registry", namespace="services")
print(airt.get(registry.register.remote("b", 2)))
airt.kill(registry)
try:
    airt.get_actor("registry", namespace="services")
    print("still there")
except ValueError:
    print("gone")
""")
    assert user.split() == ["2", "gone"]


def test_a_detached_actor_is_restarted_by_the_head_after_its_driver_exits(two_nodes):
    creator = two_nodes.run_driver("""
import os
import airt
airt.init(namespace="services")

@airt.remote(max_restarts=1)
class Phoenix:
    def __init__(self, start):
        self.value = start
    def add(self, k):
        self.value += k
        return self.value
    def pid(self):
        return os.getpid()

phoenix = Phoenix.options(name="phoenix", lifetime="detached").remote(100)
print(airt.get(phoenix.add.remote(1)), airt.get(phoenix.pid.remote()))
""")
    value, pid = creator.split()
    assert value == "101"
    os.kill(int(pid), 9)  # the creator has exited: only the head can restart it
    user = two_nodes.run_driver("""
import sys, time
import airt
airt.init()
phoenix = airt.get_actor("phoenix", namespace="services")
deadline = time.monotonic() + 60
while True:
    try:
        value = airt.get(phoenix.add.remote(1))  # the constructor ran again: 100 + 1
        break
    except airt.exceptions.ActorUnavailableError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.1)
pid = airt.get(phoenix.pid.remote())
print(value, pid != int(sys.argv[1]))
""", pid)
    assert user.split() == ["101", "True"]
