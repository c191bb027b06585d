"""airt.data against Ray Data on the same generated parquet files, in the same run.

    PYTHONPATH=build/python .venv/bin/python bench/data/bench_data.py [--rows N --files F]

Both read the same files (same block count, batch_size, batch_format="numpy"), after one
untimed pass that warms the page cache and each system's workers:
  pipeline: read_parquet -> map_batches (x * 2 + 1 on every column) -> iter_batches
  actors:   the same with map_batches on a pool of 2 actors (a callable class)
Each run's output is checksummed (the sum of every value) and the checksums compared. Each
system runs in a process of its own with a local cluster of --cpus CPUs. Ray Data missing:
"not installed". Ray 2.60 needs RAY_AUTH_MODE=disabled for its local cluster (set here).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def generate(folder, rows, files, columns):
    import pyarrow as pa
    import pyarrow.parquet as pq
    rng = np.random.default_rng(0)
    per = rows // files
    for i in range(files):
        table = pa.table({f"c{j}": rng.random(per) for j in range(columns)})
        pq.write_table(table, os.path.join(folder, f"part-{i:04d}.parquet"))
    for name in os.listdir(folder):  # the page cache: warm for both systems
        with open(os.path.join(folder, name), "rb") as f:
            while f.read(1 << 24):
                pass


def transform(batch):
    return {k: v * 2 + 1 for k, v in batch.items()}


class Transform:
    def __call__(self, batch):
        return {k: v * 2 + 1 for k, v in batch.items()}


def run_one(system, folder, files, batch_size, cpus):
    if system == "ray":
        os.environ["RAY_AUTH_MODE"] = "disabled"
        import ray as rt
        import ray.data as rd
        rt.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
        rd.DataContext.get_current().enable_progress_bars = False
    else:
        import airt as rt
        import airt.data as rd
        rt.init(num_cpus=cpus)
        rd.DataContext.get_current().enable_progress_bars = False

    def pipeline(actors):
        ds = rd.read_parquet(folder, override_num_blocks=files)
        if actors:
            ds = ds.map_batches(Transform, batch_size=batch_size, batch_format="numpy",
                                compute=rd.ActorPoolStrategy(size=2))
        else:
            ds = ds.map_batches(transform, batch_size=batch_size, batch_format="numpy")
        rows = nbytes = 0
        checksum = 0.0
        start = time.perf_counter()
        for batch in ds.iter_batches(batch_size=batch_size, batch_format="numpy"):
            n = len(next(iter(batch.values())))
            rows += n
            nbytes += sum(v.nbytes for v in batch.values())
            checksum += float(sum(v.sum() for v in batch.values()))
        return time.perf_counter() - start, rows, nbytes, checksum

    out = {}
    for name, actors in (("pipeline", False), ("actors", True)):
        pipeline(actors)  # warm: workers started, files read
        seconds, rows, nbytes, checksum = pipeline(actors)
        out[name] = {"seconds": seconds, "rows": rows, "bytes": nbytes,
                     "checksum": round(checksum, 3)}
    rt.shutdown()
    print("RESULT " + json.dumps(out))


def spawn(system, args, folder):
    if system == "ray":
        try:
            import ray.data  # noqa: F401
        except Exception:
            return None
    cmd = [sys.executable, __file__, "--child", system, "--folder", folder,
           "--files", str(args.files), "--batch-size", str(args.batch_size),
           "--cpus", str(args.cpus)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    for line in result.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{system} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--columns", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--cpus", type=int, default=4,
                        help="logical CPUs of each local cluster: 2 actors and 2 read tasks")
    parser.add_argument("--child", default=None)
    parser.add_argument("--folder", default=None)
    args = parser.parse_args()
    if args.child:
        run_one(args.child, args.folder, args.files, args.batch_size, args.cpus)
        return
    folder = tempfile.mkdtemp(prefix="airt-bench-data-")
    generate(folder, args.rows, args.files, args.columns)
    results = {"airt": spawn("airt", args, folder), "ray": spawn("ray", args, folder)}
    print(f"{args.rows} rows x {args.columns} float64 columns in {args.files} parquet files, "
          f"batch_size {args.batch_size}, {args.cpus} CPUs")
    print(f"{'metric':<30}{'airt':>14}{'Ray Data':>14}{'airt/Ray':>10}")
    for name in ("pipeline", "actors"):
        a, r = results["airt"][name], results["ray"] and results["ray"][name]
        for unit, fn, fmt in (("rows/s", lambda m: m["rows"] / m["seconds"], ",.0f"),
                              ("GB/s", lambda m: m["bytes"] / m["seconds"] / 1e9, ".3f")):
            peer = f"{fn(r):>14{fmt}}" if r else f"{'not installed':>14}"
            ratio = f"{fn(a) / fn(r):>10.2f}" if r else f"{'—':>10}"
            print(f"{name + ' ' + unit:<30}{fn(a):>14{fmt}}{peer}{ratio}")
        if r:
            same = abs(a["checksum"] - r["checksum"]) <= 1e-6 * abs(r["checksum"]) and \
                a["rows"] == r["rows"]
            print(f"{name + ' checksum':<30}{a['checksum']:>14.1f}{r['checksum']:>14.1f}"
                  f"{'same' if same else 'DIFFERENT':>10}")


if __name__ == "__main__":
    main()
