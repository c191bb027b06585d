"""Sweep overhead: airt.tune beside Ray Tune 2.60 in the same run.

64 trials x 20 reports of a trainable that does no work, with FIFO and with ASHA; both tuners
get the same trial resources ({"CPU": 0.25}: eight at once on a 2-CPU local cluster, capped by
max_concurrent_trials=8), reuse_actors=True, verbose=0 and their experiment folders written
(params.json, result.json, progress.csv per trial). Each tuner runs in a process of its own
(its own local cluster, started before the clock); the clock covers Tuner.fit() only.

    PYTHONPATH=build/python .venv/bin/python bench/tune/tune_bench.py [--trials 64]
        [--reports 20] [--peer ray|none]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, sys, tempfile, time
which, scheduler_name, trials, reports = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if which == "airt":
    import airt as ray
    from airt import tune
    RunConfig = tune.RunConfig
else:
    import ray
    from ray import tune
    RunConfig = tune.RunConfig
ray.init(num_cpus=2, **({"include_dashboard": False} if which == "ray" else {}))

def noop(config):
    for i in range(reports):
        tune.report({"score": config["x"] * i})

scheduler = (tune.schedulers.ASHAScheduler(max_t=reports, grace_period=2, reduction_factor=2)
             if scheduler_name == "asha" else tune.schedulers.FIFOScheduler())
storage = tempfile.mkdtemp(prefix=f"tune-bench-{which}-")
tuner = tune.Tuner(
    tune.with_resources(noop, {"CPU": 0.25}),
    param_space={"x": tune.uniform(0, 1)},
    tune_config=tune.TuneConfig(metric="score", mode="max", num_samples=trials,
                                scheduler=scheduler, max_concurrent_trials=8, reuse_actors=True),
    run_config=RunConfig(name="bench", storage_path=storage, verbose=0))
start = time.perf_counter()
grid = tuner.fit()
wall = time.perf_counter() - start
reported = sum(r.metrics["training_iteration"] for r in grid)
print("RESULT " + json.dumps({"wall": wall, "trials": len(grid), "errors": grid.num_errors,
                              "reports": reported}))
ray.shutdown()
"""


def run(which, scheduler, trials, reports):
    env = dict(os.environ)
    env.pop("AIRT_ADDRESS", None)
    if which == "ray":
        env["RAY_AUTH_MODE"] = "disabled"   # Ray 2.60's local clusters otherwise want a token
        env.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(CHILD)
    try:
        p = subprocess.run([sys.executable, f.name, which, scheduler, str(trials), str(reports)],
                           capture_output=True, text=True, env=env, timeout=1200)
    finally:
        os.unlink(f.name)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (p.stdout + p.stderr).strip().splitlines()[-5:]
    raise RuntimeError(f"{which} {scheduler} failed (rc {p.returncode}): " + " | ".join(tail))


def ray_available():
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    p = subprocess.run([sys.executable, "-c", "import ray.tune"], capture_output=True, env=env)
    return p.returncode == 0


def main():
    parser = argparse.ArgumentParser(description="airt.tune vs Ray Tune sweep overhead")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--reports", type=int, default=20)
    parser.add_argument("--peer", choices=["ray", "none"], default="ray")
    args = parser.parse_args()
    peer = args.peer == "ray" and ray_available()
    print(f"{args.trials} trials x {args.reports} reports, no work, {{CPU: 0.25}} each, "
          "max_concurrent_trials=8, reuse_actors, verbose=0, folders written")
    print(f"{'scheduler':<10} {'airt wall s':>12} {'airt trials/s':>14} {'ray wall s':>11} "
          f"{'ray trials/s':>13} {'airt/ray':>9}")
    for scheduler in ("fifo", "asha"):
        a = run("airt", scheduler, args.trials, args.reports)
        assert a["errors"] == 0 and a["trials"] == args.trials, a
        cells = [f"{a['wall']:12.2f}", f"{a['trials'] / a['wall']:14.2f}"]
        if peer:
            r = run("ray", scheduler, args.trials, args.reports)
            cells += [f"{r['wall']:11.2f}", f"{r['trials'] / r['wall']:13.2f}",
                      f"{r['wall'] / a['wall']:9.1f}x"]
        else:
            cells += [f"{'not installed' if args.peer == 'ray' else '-':>11}", f"{'-':>13}",
                      f"{'-':>9}"]
        print(f"{scheduler:<10} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
