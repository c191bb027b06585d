#!/usr/bin/env python3
"""python_put_bench: airt.put of a 1 GiB numpy array next to a memcpy of the same bytes into
touched memory, in the same run (issue 4's put target), and airt.get of it (read in place: its
time does not grow with the size). Starts its own local cluster.

    PYTHONPATH=build/python .venv/bin/python bench/python_put_bench.py [--gib N] [--runs N]
"""

import argparse
import time

import numpy as np

import airt


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    nbytes = int(args.gib * (1 << 30))
    array = np.ones(nbytes // 8, dtype=np.int64)  # touched, as a filled array is
    target = np.zeros_like(array)
    target.fill(1)  # touched too: the baseline copies into mapped memory
    airt.init(num_cpus=2, object_store_memory=int(2.5 * nbytes) + (256 << 20))
    try:
        airt.put(array)  # warm-up: maps the store's pages this process writes
        print(f"# python_put_bench: airt.put of a {args.gib:g} GiB numpy array vs np.copyto "
              "into touched memory; GB/s")
        for run in range(args.runs):
            start = time.perf_counter()
            np.copyto(target, array)
            memcpy = nbytes / (time.perf_counter() - start) / 1e9
            start = time.perf_counter()
            ref = airt.put(array)
            put = nbytes / (time.perf_counter() - start) / 1e9
            start = time.perf_counter()
            got = airt.get(ref)
            get_us = (time.perf_counter() - start) * 1e6
            assert got.shape == array.shape
            print(f"run {run}: put {put:.2f}  memcpy {memcpy:.2f}  ratio {put / memcpy:.2f}  "
                  f"get {get_us:.0f} us ({nbytes / (get_us / 1e6) / 1e9:.0f} GB/s as a copy "
                  f"would count it)", flush=True)
            del got, ref
    finally:
        airt.shutdown()


if __name__ == "__main__":
    main()
