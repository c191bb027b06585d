"""The autoscaler's figures (docs/autoscaler.md "Figures"), printed, never asserted; never in CI.

  cold start   from the .remote() of a {"GPU": 1} task on a cluster with no GPU node to that
               task's first line running on a node the local provider started (both instants
               stamped here: time.time() in the driver and in the task, one machine's clock)
  scale-up     a STRICT_SPREAD placement group of 8 bundles no node holds: from its creation to
               pg.wait() returning True (8 nodes launched and registered, bundles reserved)
  scale-down   from removing that group to the cluster back at its head node alone
               (idle_timeout_minutes below)

Run from the repository root after building: python3 bench/autoscaler/autoscaler_bench.py
[--build build] [--rounds 3]. Ray's autoscaler is not measured beside it: its local scaling
needs the fake_multinode provider under `ray up`, a launcher this script does not drive; it
prints so.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

CONFIG = """
cluster_name: bench
max_workers: 10
idle_timeout_minutes: {idle}
provider: {{type: local}}
available_node_types:
  head:
    resources: {{CPU: 1}}
  gpu_node:
    resources: {{CPU: 1, GPU: 1}}
    max_workers: 1
  spread_node:
    resources: {{CPU: 1, spread_me: 1}}
    max_workers: 8
head_node_type: head
"""

DRIVER = """
import sys, time, airt
airt.init(address=sys.argv[1])
rounds = int(sys.argv[2])
from airt.util.placement_group import placement_group, remove_placement_group

def alive():
    return sum(1 for n in airt.nodes() if n["Alive"])

def wait_alive(count, deadline_s=120):
    deadline = time.time() + deadline_s
    while alive() != count and time.time() < deadline:
        time.sleep(0.02)
    return alive() == count

@airt.remote(num_gpus=1)
def first_line():
    return time.time()

for r in range(rounds):
    assert wait_alive(1), "the cluster did not come back to its head node"
    start = time.time()
    ran = airt.get(first_line.remote(), timeout=120)
    print("COLD", ran - start, flush=True)

assert wait_alive(1)
start = time.time()
pg = placement_group([{"spread_me": 1}] * 8, strategy="STRICT_SPREAD")
assert pg.wait(180)
up = time.time() - start
nodes = alive()
start = time.time()
remove_placement_group(pg)
assert wait_alive(1, 180)
print("PG", up, nodes, time.time() - start, flush=True)
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle-timeout-minutes", type=float, default=0.02)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    airt = os.path.join(build, "cli", "airt")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(build, "python")
    env["AIRT_PYTHON"] = sys.executable
    env.pop("AIRT_ADDRESS", None)
    with tempfile.TemporaryDirectory() as root:
        config = os.path.join(root, "cluster.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.format(idle=args.idle_timeout_minutes))
        temp = os.path.join(root, "airt")
        up = subprocess.run([airt, "up", config, f"--temp-dir={temp}",
                             f"--python-executable={sys.executable}"],
                            env=env, capture_output=True, text=True)
        if up.returncode != 0:
            sys.exit("airt up failed: " + up.stdout + up.stderr)
        try:
            with open(os.path.join(temp, "session", "head_address")) as f:
                address = f.read().strip()
            out = subprocess.run([sys.executable, "-c", DRIVER, address, str(args.rounds)],
                                 env=env, capture_output=True, text=True, timeout=1200)
            if out.returncode != 0:
                sys.exit("the driver failed:\n" + out.stdout + out.stderr)
            cold = [float(line.split()[1]) for line in out.stdout.splitlines()
                    if line.startswith("COLD")]
            pg = [line.split() for line in out.stdout.splitlines() if line.startswith("PG")][0]
        finally:
            subprocess.run([airt, "down", config, f"--temp-dir={temp}"], env=env,
                           capture_output=True)
    print(f"{'figure':<44} {'airt':>12} {'ray':>16}")
    print(f"{'cold start, .remote() to first line (s)':<44} "
          f"{statistics.median(cold):>12.2f} {'not measured':>16}")
    print(f"{'  each round (s)':<44} {' '.join(f'{c:.2f}' for c in cold):>12}")
    print(f"{'scale-up, 8-node STRICT_SPREAD group (s)':<44} {float(pg[1]):>12.2f} "
          f"{'not measured':>16}")
    print(f"{'  alive nodes then':<44} {pg[2]:>12}")
    print(f"{'scale-down to the head node, idle ' + str(args.idle_timeout_minutes) + ' min (s)':<44} "
          f"{float(pg[3]):>12.2f} {'not measured':>16}")


if __name__ == "__main__":
    main()
