#!/usr/bin/env python3
"""peer_microbenchmark: bench/microbenchmark's operations on Ray, on Dask distributed, and on
airt's Python client (the Ray code run with `import airt as ray`).

    .venv/bin/python bench/peer_microbenchmark.py [--quick] [--peers airt-py,ray,dask]
        [--metrics placement_group_create_removal,...]

Prints, for each peer, a line "[<peer>] <what ran>" and then one line per metric under Ray's
metric names (ray/_private/ray_perf.py), as bench/microbenchmark does:
    <metric> <figure>              ops/s (*_gigabytes: GB/s)
    <metric> not measured: <why>   the peer cannot do it, or it failed in this run
    <metric> not installed         the peer does not import here
Every figure is measured in this run; bench/run_microbenchmarks puts them next to airt's.

The peers:
  Ray   ray.init(num_cpus=2, include_dashboard=False); tasks and actors as in ray_perf.py.
        multi_client_tasks_async uses client actors (num_cpus=0), each submitting its own batch,
        as ray_perf.py does (airt, whose tasks cannot call actors yet, uses driver threads instead).
  Dask  LocalCluster(n_workers=2, threads_per_worker=1, processes=True); tasks are
        client.submit(pure=False), puts are client.scatter(hash=False), gets are Future.result(),
        actors are Dask actors (submit(actor=True); n_n: tasks calling them);
        multi_client_tasks_async uses driver threads sharing one Client.

The sizes and the timing are bench/microbenchmark.cc's Plan (change both together): batches of
1000 tasks, 4 clients of 1000 tasks, 800 MiB puts (a numpy array whose pages are touched, as
airt's vector is), one warm-up stretch of 0.5 s and one timed stretch of 2 s per metric.
"""

import argparse
import gc
import os
import sys
import threading
import time

METRICS = [
    "single_client_tasks_sync",
    "single_client_tasks_async",
    "multi_client_tasks_async",
    "1_1_actor_calls_sync",
    "1_1_actor_calls_async",
    "1_1_actor_calls_concurrent",
    "n_n_actor_calls_async",
    "single_client_get_calls",
    "single_client_put_calls",
    "single_client_put_gigabytes",
    "single_client_tasks_and_get_batch",
    "single_client_wait_1k_refs",
    "placement_group_create_removal",
    "cross_node_pull_gigabytes",
    "cross_node_get_gigabytes",
    "raw_tcp_copy_gigabytes",
    "cross_node_pull_vs_raw_tcp",
]

# airt's own metrics (bench/microbenchmark.cc): a pull between the stores of two nodes, and its
# baseline. The peers run on one node here, so they have no figure for them.
AIRT_ONLY = {
    "cross_node_pull_gigabytes": "not measured: airt's own: two nodes; this peer runs one",
    "cross_node_get_gigabytes": "not measured: airt's own: two nodes; this peer runs one",
    "raw_tcp_copy_gigabytes": "not measured: airt's baseline for its cross-node pull",
    "cross_node_pull_vs_raw_tcp": "not measured: airt's baseline for its cross-node pull",
}

FULL = dict(warmup_s=0.5, measure_s=2.0, batch=1000, clients=4, client_batch=1000,
            put_bytes=100 << 23, pgs=100)
QUICK = dict(warmup_s=0.0, measure_s=0.0, batch=20, clients=4, client_batch=20,
             put_bytes=64 << 20, pgs=10)


def rate(plan, multiplier, op):
    """Calls op for the warm-up stretch, then for the timed one (each at least once), and returns
    multiplier * timed calls / timed seconds, as bench/microbenchmark.cc's Rate."""
    start = time.perf_counter()
    while True:
        op()
        if time.perf_counter() - start >= plan["warmup_s"]:
            break
    timed = 0
    start = time.perf_counter()
    while True:
        op()
        timed += 1
        elapsed = time.perf_counter() - start
        if elapsed >= plan["measure_s"]:
            break
    return multiplier * timed / elapsed


def emit(metric, figure):
    """figure: a number, or the text that stands in its place."""
    if isinstance(figure, str):
        print(f"{metric} {figure}", flush=True)
    else:
        print(f"{metric} {figure:.2f}", flush=True)


# --metrics: the metrics to run (None: all); the others print no line.
SELECTED = None


def run_metrics(measures):
    """measures: metric -> a callable returning its figure, or a "not measured: ..." text.
    A metric that raises is reported as not measured, with the error, and the rest go on."""
    for metric in METRICS:
        if SELECTED is not None and metric not in SELECTED:
            continue
        measure = measures.get(metric, AIRT_ONLY.get(metric))
        if measure is None:
            emit(metric, "not measured: not written for this peer")
            continue
        if isinstance(measure, str):
            emit(metric, measure)
            continue
        try:
            emit(metric, measure())
        except Exception as e:  # a failed metric is a missing figure, never a made-up one
            emit(metric, f"not measured: failed: {type(e).__name__}: {e}".replace("\n", " "))
        gc.collect()


def not_installed(peer, error):
    print(f"[{peer}] not installed: {error}".replace("\n", " "), flush=True)
    for metric in METRICS:
        emit(metric, "not installed")


def touched_array(numpy, nbytes):
    array = numpy.zeros(nbytes // 8, dtype=numpy.int64)
    array.fill(0)  # np.zeros leaves the pages unmapped; airt's vector is written
    return array


# ---- Ray ------------------------------------------------------------------------------------

def run_ray(plan, module="ray", label="ray"):
    """Ray's code of ray_perf.py; with module="airt", the same code on airt's Python client
    (`import airt as ray`)."""
    try:
        import importlib
        import numpy
        ray = importlib.import_module(module)
    except ImportError as e:
        not_installed(label, e)
        return
    import logging
    # {"custom": 100}: ray_perf.py's resource for its placement groups' bundles.
    ray.init(num_cpus=2, resources={"custom": 100}, include_dashboard=False,
             logging_level=logging.WARNING, log_to_driver=False)
    print(f"[{label}] {module} {ray.__version__}, {module}.init(num_cpus=2)", flush=True)
    try:
        @ray.remote
        def small_value():
            return 0

        @ray.remote(num_cpus=0)
        class Actor:
            def small_value(self):
                return 0

        @ray.remote(num_cpus=0)
        class Client:
            def small_value_batch(self, n):
                ray.get([small_value.remote() for _ in range(n)])

        @ray.remote
        def call_actors(actors, n):
            ray.get([actors[i % len(actors)].small_value.remote() for i in range(n)])

        batch, clients, client_batch = plan["batch"], plan["clients"], plan["client_batch"]

        def submit_and_get():
            ray.get([small_value.remote() for _ in range(batch)])

        def multi_client():
            actors = [Client.remote() for _ in range(clients)]
            ray.get([a.small_value_batch.remote(1) for a in actors])  # started
            return rate(plan, clients * client_batch,
                        lambda: ray.get([a.small_value_batch.remote(client_batch)
                                         for a in actors]))

        def actor_calls(concurrency, sync):
            a = Actor.options(max_concurrency=concurrency).remote()
            if sync:
                return rate(plan, 1, lambda: ray.get(a.small_value.remote()))
            return rate(plan, batch,
                        lambda: ray.get([a.small_value.remote() for _ in range(batch)]))

        def n_n_actor_calls():
            n_cpu = max(1, (os.cpu_count() or 2) // 2)  # as ray_perf.py
            actors = [Actor.remote() for _ in range(n_cpu)]
            return rate(plan, clients * client_batch,
                        lambda: ray.get([call_actors.remote(actors, client_batch)
                                         for _ in range(clients)]))

        def get_calls():
            value = ray.put(0)
            return rate(plan, 1, lambda: ray.get(value))

        def put_gigabytes():
            array = touched_array(numpy, plan["put_bytes"])
            return rate(plan, array.nbytes / 1e9, lambda: ray.put(array))

        def wait_1k_refs():
            not_ready = [small_value.remote() for _ in range(batch)]
            fetch_local = True  # as ray_perf.py: one fetch request is enough
            for _ in range(batch):
                _, not_ready = ray.wait(not_ready, fetch_local=fetch_local)
                fetch_local = False

        def placement_group_create_removal():
            # ray_perf.py's: NUM_PGS groups of one {"custom": 0.001} bundle per CPU, created,
            # waited for, then removed; the rate counts groups.
            num_pgs = plan["pgs"]

            def create_removal():
                pgs = [ray.util.placement_group(
                    bundles=[{"custom": 0.001} for _ in range(os.cpu_count() or 2)])
                    for _ in range(num_pgs)]
                [pg.wait(timeout_seconds=30) for pg in pgs]
                for pg in pgs:
                    ray.util.remove_placement_group(pg)
            return rate(plan, num_pgs, create_removal)

        run_metrics({
            "placement_group_create_removal": placement_group_create_removal,
            "single_client_tasks_sync": lambda: rate(plan, 1,
                                                     lambda: ray.get(small_value.remote())),
            "single_client_tasks_async": lambda: rate(plan, batch, submit_and_get),
            "multi_client_tasks_async": multi_client,
            "1_1_actor_calls_sync": lambda: actor_calls(1, True),
            "1_1_actor_calls_async": lambda: actor_calls(1, False),
            "1_1_actor_calls_concurrent": lambda: actor_calls(16, False),
            "n_n_actor_calls_async": n_n_actor_calls,
            "single_client_get_calls": get_calls,
            "single_client_put_calls": lambda: rate(plan, 1, lambda: ray.put(0)),
            "single_client_put_gigabytes": put_gigabytes,
            "single_client_tasks_and_get_batch": lambda: rate(plan, 1, submit_and_get),
            "single_client_wait_1k_refs": lambda: rate(plan, 1, wait_1k_refs),
        })
    finally:
        ray.shutdown()


# ---- Dask distributed -----------------------------------------------------------------------

def small_value():
    return 0


class DaskActor:
    def small_value(self):
        return 0


def call_dask_actors(actors, n):
    for f in [actors[i % len(actors)].small_value() for i in range(n)]:
        f.result()


def run_dask(plan):
    try:
        import logging

        import distributed
        import numpy
        from distributed import Client, LocalCluster
    except ImportError as e:
        not_installed("dask", e)
        return
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=logging.ERROR)
    client = Client(cluster)
    print(f"[dask] distributed {distributed.__version__}, "
          "LocalCluster(n_workers=2, threads_per_worker=1, processes=True)", flush=True)
    try:
        batch, clients, client_batch = plan["batch"], plan["clients"], plan["client_batch"]

        def submit_and_get(n=batch):
            client.gather([client.submit(small_value, pure=False) for _ in range(n)])

        def multi_client():
            def once():
                threads = [threading.Thread(target=submit_and_get, args=(client_batch,))
                           for _ in range(clients)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            return rate(plan, clients * client_batch, once)

        def actor_calls(sync):
            actor = client.submit(DaskActor, actor=True, pure=False).result()
            if sync:
                return rate(plan, 1, lambda: actor.small_value().result())

            def calls():
                for f in [actor.small_value() for _ in range(batch)]:
                    f.result()
            return rate(plan, batch, calls)

        def n_n_actor_calls():
            n_cpu = max(1, (os.cpu_count() or 2) // 2)  # as Ray's
            actors = [client.submit(DaskActor, actor=True, pure=False).result()
                      for _ in range(n_cpu)]
            return rate(plan, clients * client_batch, lambda: client.gather(
                [client.submit(call_dask_actors, actors, client_batch, pure=False)
                 for _ in range(clients)]))

        def get_calls():
            value = client.scatter(0, hash=False)
            return rate(plan, 1, value.result)

        def put_gigabytes():
            array = touched_array(numpy, plan["put_bytes"])
            return rate(plan, array.nbytes / 1e9, lambda: client.scatter(array, hash=False))

        def wait_1k_refs():
            not_ready = {client.submit(small_value, pure=False) for _ in range(batch)}
            while not_ready:  # one ready future taken per wait, as ray.wait returns one
                done, _ = distributed.wait(not_ready, return_when="FIRST_COMPLETED")
                not_ready.discard(next(iter(done)))

        run_metrics({
            "single_client_tasks_sync": lambda: rate(
                plan, 1, lambda: client.submit(small_value, pure=False).result()),
            "single_client_tasks_async": lambda: rate(plan, batch, submit_and_get),
            "multi_client_tasks_async": multi_client,
            "1_1_actor_calls_sync": lambda: actor_calls(True),
            "1_1_actor_calls_async": lambda: actor_calls(False),
            "1_1_actor_calls_concurrent":
                "not measured: a Dask actor has no max_concurrency setting",
            "n_n_actor_calls_async": n_n_actor_calls,
            "single_client_get_calls": get_calls,
            "single_client_put_calls": lambda: rate(
                plan, 1, lambda: client.scatter(0, hash=False)),
            "single_client_put_gigabytes": put_gigabytes,
            "single_client_tasks_and_get_batch": lambda: rate(plan, 1, submit_and_get),
            "single_client_wait_1k_refs": lambda: rate(plan, 1, wait_1k_refs),
        })
    finally:
        client.close()
        cluster.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small batches, one call per metric (for smoke runs)")
    parser.add_argument("--peers", default="airt-py,ray,dask",
                        help="comma-separated: airt-py (airt's Python client), ray, dask")
    parser.add_argument("--metrics", default="",
                        help="comma-separated metric names to run (default: all of them)")
    args = parser.parse_args()
    if args.metrics:
        global SELECTED
        SELECTED = set(args.metrics.split(","))
        unknown = SELECTED - set(METRICS)
        if unknown:
            parser.error(f"unknown metrics {sorted(unknown)} (known: {', '.join(METRICS)})")
    plan = QUICK if args.quick else FULL
    runners = {"airt-py": lambda plan: run_ray(plan, "airt", "airt-py"), "ray": run_ray,
               "dask": run_dask}
    for peer in args.peers.split(","):
        if peer not in runners:
            parser.error(f"unknown peer {peer!r} (airt-py, ray, dask)")
        try:
            runners[peer](plan)
        except Exception as e:  # the peer would not start: its figures are missing, not zero
            print(f"[{peer}] failed: {type(e).__name__}: {e}".replace("\n", " "), flush=True)
            for metric in METRICS:
                emit(metric, "not measured: the peer failed to start")
    return 0


if __name__ == "__main__":
    sys.exit(main())
