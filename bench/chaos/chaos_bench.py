"""Chaos: chained tasks over 3 nodes while one node is killed (kill -9) mid-run, airt beside Ray
in the same run (docs/fault_tolerance.md). Never run in CI; tests/e2e/chaos_test.cc is the small
version the suite runs.

Each run starts a head and 3 nodes of 2 CPUs (the driver's node runs nothing: only the other two
have the custom resource "work"), submits `--chains` chains of two tasks (make a 256 KiB array,
then add 1 to it; max_retries=-1), kills one of the two working nodes once a third of the
second tasks have started, and gets every result. It prints, per runtime: the results right,
wrong and lost (an error), the task runs beyond one per task split into retries (a run killed
before it finished) and rebuilds (a run of a task that had finished already: its return was
lost with the node and rebuilt from lineage), and the time lost against the same run without a
kill measured just before it. The only acceptable result is 0 wrong and 0 lost.

    PYTHONPATH=build/python .venv/bin/python bench/chaos/chaos_bench.py [--chains 200]
        [--build build] [--peer ray|none]
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

# One run in a process of its own: `which` ("airt" or "ray"), the marker folder, the number of
# chains, whether to kill, and how to start the cluster (airt: the binaries' folder).
CHILD = r"""
import json, os, signal, sys, time
import numpy as np
which, markers, chains, kill, build = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5]
SIZE = 256 << 10

def mark(what):
    open(os.path.join(markers, f"{what}-{os.getpid()}-{time.monotonic_ns()}"), "w").close()

if which == "airt":
    import subprocess
    import airt as ray
    root = os.path.join(markers, "cluster")
    os.makedirs(root)
    procs = []
    def spawn(name, argv):
        log = open(os.path.join(root, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        procs.append(p)
        return os.path.join(root, name + ".log"), p
    def wait_line(path, prefix):
        deadline = time.time() + 60
        while time.time() < deadline:
            for line in open(path):
                if line.startswith(prefix):
                    return line[len(prefix):].strip()
            time.sleep(0.05)
        raise RuntimeError(path + ": not ready")
    log, _ = spawn("head", [os.path.join(build, "head", "airt-head"), "--port=0",
                            f"--temp-dir={root}", "--heartbeat-interval-ms=200",
                            "--node-timeout-ms=20000", "--node-disconnect-grace-ms=300"])
    address = wait_line(log, "head ready ")
    nodes = []
    for i, extra in enumerate([[], ['--resources={"work": 2}'], ['--resources={"work": 2}']]):
        log, p = spawn(f"node{i}", [os.path.join(build, "worker", "airt-node"),
                                    f"--head-address={address}", f"--temp-dir={root}",
                                    "--num-cpus=2", "--object-store-memory=256M",
                                    "--cluster-view-interval-ms=100",
                                    f"--python-executable={sys.executable}", *extra])
        wait_line(log, "node ready ")
        nodes.append(p)
    ray.init(address)
    victim = lambda: nodes[1].send_signal(signal.SIGKILL)
    options = {"resources": {"work": 1}, "max_retries": -1}
else:
    import ray
    from ray.cluster_utils import Cluster
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    workers = [cluster.add_node(num_cpus=2, resources={"work": 2}) for _ in range(2)]
    ray.init(address=cluster.address)
    cluster.wait_for_nodes()
    victim = lambda: cluster.remove_node(workers[0], allow_graceful=False)
    options = {"resources": {"work": 1}, "max_retries": -1}

@ray.remote(**options)
def make(seed):
    mark(f"start.make{seed}")
    out = (np.arange(SIZE, dtype=np.int64) * 7 + seed).astype(np.uint8)
    mark(f"done.make{seed}")
    return out

@ray.remote(**options)
def add(array, seed):
    mark(f"start.add{seed}")
    time.sleep(0.05)
    out = array + np.uint8(1)
    mark(f"done.add{seed}")
    return out

start = time.perf_counter()
results = [add.remote(make.remote(i), i) for i in range(chains)]
if kill:
    while sum(n.startswith("start.add") for n in os.listdir(markers)) < chains // 3:
        time.sleep(0.01)
    victim()
right = wrong = lost = 0
for i, ref in enumerate(results):
    try:
        value = ray.get(ref, timeout=600)
        expected = ((np.arange(SIZE, dtype=np.int64) * 7 + i).astype(np.uint8) + np.uint8(1))
        if np.array_equal(value, expected):
            right += 1
        else:
            wrong += 1
    except Exception as error:
        lost += 1
        print("lost:", type(error).__name__, str(error)[:200], file=sys.stderr)
wall = time.perf_counter() - start
print("RESULT " + json.dumps({"wall": wall, "right": right, "wrong": wrong, "lost": lost}))
sys.stdout.flush()
os._exit(0)
"""


def run(which, chains, kill, build):
    markers = tempfile.mkdtemp(prefix=f"chaos-{which}-")
    env = dict(os.environ)
    env.pop("AIRT_ADDRESS", None)
    env["RAY_AUTH_MODE"] = "disabled"
    child = subprocess.Popen([sys.executable, "-c", CHILD, which, markers, str(chains),
                              "1" if kill else "0", build], env=env, stdout=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        out, _ = child.communicate(timeout=1800)
    finally:
        try:
            os.killpg(child.pid, signal.SIGKILL)  # the cluster it started goes with it
        except ProcessLookupError:
            pass
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    if not lines:
        return None
    result = json.loads(lines[-1][len("RESULT "):])
    starts, dones = {}, {}
    for name in os.listdir(markers):
        kind, _, rest = name.partition(".")
        if kind in ("start", "done") and rest:
            task = rest.split("-")[0]
            (starts if kind == "start" else dones).setdefault(task, 0)
            (starts if kind == "start" else dones)[task] += 1
    result["tasks"] = 2 * chains
    result["runs"] = sum(starts.values())
    result["rebuilt"] = sum(max(0, n - 1) for n in dones.values())
    result["retried"] = sum(starts.get(t, 0) - dones.get(t, 0) for t in starts)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=200)
    parser.add_argument("--build", default="build")
    parser.add_argument("--peer", choices=["ray", "none"], default="ray")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    peers = ["airt"]
    if args.peer == "ray":
        try:
            import ray  # noqa: F401
            peers.append("ray")
        except ImportError:
            print("ray: not installed")
    print(f"{args.chains} chains of 2 tasks over 3 nodes (2 working), one working node killed "
          f"with kill -9 once a third of the second tasks started")
    header = (f"{'runtime':8} {'tasks':>6} {'right':>6} {'wrong':>6} {'lost':>5} {'runs':>6} "
              f"{'retried':>8} {'rebuilt':>8} {'wall s':>7} {'no-kill s':>9} {'lost s':>7}")
    print(header)
    for which in peers:
        calm = run(which, args.chains, False, build)
        chaos = run(which, args.chains, True, build)
        if calm is None or chaos is None:
            print(f"{which:8} failed to run")
            continue
        print(f"{which:8} {chaos['tasks']:6d} {chaos['right']:6d} {chaos['wrong']:6d} "
              f"{chaos['lost']:5d} {chaos['runs']:6d} {chaos['retried']:8d} {chaos['rebuilt']:8d} "
              f"{chaos['wall']:7.2f} {calm['wall']:9.2f} {chaos['wall'] - calm['wall']:7.2f}")


if __name__ == "__main__":
    main()
