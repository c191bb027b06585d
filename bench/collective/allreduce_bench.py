"""Allreduce GB/s (float32 SUM, 2 ranks on this machine, loopback TCP): airt's communicator
(ranks as tasks of a local cluster) next to a bare Gloo program over the same libgloo and
transport, and torch.distributed's gloo backend ("not installed" without torch). The three run
in turn, `--runs` rounds (at least 5), each round over every size; per size the median GB/s over
the rounds and the spread (min-max) are printed, with airt's median over bare Gloo's.

    python bench/collective/allreduce_bench.py [--build build] [--runs 5] [--world 2]
        [--sizes 1K,16K,256K,1M,4M,16M,64M,256M] [--op allreduce|reducescatter]

GB/s is the algorithm bandwidth: bytes of the (input) buffer over seconds per operation. With
--op reducescatter (each rank keeps an equal block of the sum) airt's ring reduce-scatter runs
next to Gloo's own (ReduceScatterHalvingDoubling) in the bare program; torch.distributed's gloo
backend has no reduce_scatter, so it is left out. Never run in CI.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def human(nbytes):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def parse(output):
    out = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            out[int(parts[0])] = int(parts[0]) / float(parts[1]) / 1e9
    return out


def run_airt(build, world, sizes, round_index, op):
    cmd = [os.path.join(build, "bench", "collective", "airt_allreduce_bench"), str(world),
           sizes, str(round_index), op]
    env = dict(os.environ)
    env.pop("AIRT_ADDRESS", None)
    return parse(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env,
                                timeout=900).stdout)


def run_gloo(build, world, sizes, op):
    with tempfile.TemporaryDirectory() as store:
        cmd = [os.path.join(build, "bench", "collective", "bare_gloo_allreduce"), store,
               str(world), sizes, op]
        return parse(subprocess.run(cmd, check=True, capture_output=True, text=True,
                                    timeout=900).stdout)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torch(world, sizes):
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "torch_allreduce.py"),
                                       sizes], env=env, stdout=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=900)[0] for p in procs]
    if any(p.returncode for p in procs):
        raise RuntimeError("torch.distributed run failed")
    return parse(outputs[0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--sizes", default="1K,16K,256K,1M,4M,16M,64M,256M")
    parser.add_argument("--op", default="allreduce", choices=["allreduce", "reducescatter"])
    args = parser.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    csv = ",".join(str(s) for s in sizes)
    try:
        import torch  # noqa: F401
        have_torch = args.op == "allreduce"
        missing = "no reduce_scatter"
    except ImportError:
        have_torch, missing = False, "not installed"
    peers = ["airt", "bare gloo"] + (["torch gloo"] if have_torch else [])
    samples = {p: {s: [] for s in sizes} for p in peers}
    for i in range(args.runs):
        for peer in peers:  # interleaved: one round of each, in turn
            if peer == "airt":
                got = run_airt(args.build, args.world, csv, i, args.op)
            elif peer == "bare gloo":
                got = run_gloo(args.build, args.world, csv, args.op)
            else:
                got = run_torch(args.world, csv)
            for s in sizes:
                samples[peer][s].append(got[s])
        print(f"round {i + 1} done", file=sys.stderr, flush=True)

    def cell(values):
        return f"{statistics.median(values):7.3f} [{min(values):.3f}-{max(values):.3f}]"

    header = f"{'size':>9} | " + " | ".join(f"{p + ' GB/s':>26}" for p in peers)
    header += f" | {'torch gloo':>26}" if not have_torch else ""
    print(f"{args.op} float32 SUM, {args.world} ranks, loopback TCP; median [min-max] over "
          f"{args.runs} interleaved rounds")
    print(header + " | airt/bare")
    for s in sizes:
        row = f"{human(s):>9} | " + " | ".join(f"{cell(samples[p][s]):>26}" for p in peers)
        if not have_torch:
            row += f" | {missing:>26}"
        ratio = statistics.median(samples["airt"][s]) / statistics.median(samples["bare gloo"][s])
        print(row + f" | {ratio:.2f}")


if __name__ == "__main__":
    main()
