"""One data-parallel training step through airt.train beside the same loop launched by plain
torchrun (`python -m torch.distributed.run`), and what ASYNC checkpoint uploads save over SYNC.

Both launchers run the same loop on 2 CPU ranks over gloo: an MLP (--hidden wide, 4 layers) under
DistributedDataParallel, one thread per rank, --warmup steps, then --steps timed steps (forward,
backward with the gradients' allreduce, optimizer step); a run's figure is rank 0's median step.
The airt run times, in the same gang, three kinds of step in turn: the plain step; the step with
report(metrics) (airt.train's barrier); and the step with a checkpoint of the model every
step, reported with SYNC and with ASYNC (rank 0's part, the others' none; storage on local disk,
flushed). Launchers are interleaved (airt, torchrun, airt, ...) for --runs rounds; the medians
and the spread (min-max) of the runs are printed side by side. Never in CI.

    PYTHONPATH=build/python .venv/bin/python bench/train/train_step_bench.py [--runs 5]
        [--steps 60] [--hidden 512]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(__file__)


def build(hidden):
    import torch
    torch.manual_seed(0)
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(hidden, hidden), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def timed_steps(model, optimizer, batch, count, after=None):
    """The median seconds of `count` steps (each followed by after(step) when given)."""
    import torch
    x, y = batch
    times = []
    for step in range(count):
        started = time.perf_counter()
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if after is not None:
            after(step, loss.item())
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def setup_step(config):
    import torch
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(build(config["hidden"]))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    batch = (torch.randn(64, config["hidden"], generator=g),
             torch.randn(64, config["hidden"], generator=g))
    timed_steps(model, optimizer, batch, config["warmup"])
    return model, optimizer, batch


def airt_loop(config):
    """Inside airt.train: the plain step, the step with report, and with SYNC/ASYNC checkpoints."""
    import torch
    from airt import train
    model, optimizer, batch = setup_step(config)
    rank = train.get_context().get_world_rank()
    figures = {"plain": timed_steps(model, optimizer, batch, config["steps"])}
    figures["report"] = timed_steps(model, optimizer, batch, config["steps"],
                                    lambda step, loss: train.report({"loss": loss}))

    def checkpointing(mode):
        def after(step, loss):
            checkpoint = None
            if rank == 0:
                folder = tempfile.mkdtemp(prefix="bench-ckpt-")
                torch.save(model.module.state_dict(), os.path.join(folder, "model.pt"))
                checkpoint = train.Checkpoint.from_directory(folder)
            train.report({"loss": loss}, checkpoint=checkpoint, checkpoint_upload_mode=mode,
                         delete_local_checkpoint_after_upload=True)
        return after
    for mode in ("SYNC", "ASYNC"):
        figures[mode] = timed_steps(model, optimizer, batch, config["ckpt_steps"],
                                    checkpointing(train.CheckpointUploadMode(mode)))
    return figures


def run_airt(args, storage):
    import airt
    from airt import train
    from airt.train.torch import TorchTrainer
    config = dict(hidden=args.hidden, warmup=args.warmup, steps=args.steps,
                  ckpt_steps=args.ckpt_steps)
    result = TorchTrainer(
        airt_loop, train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name=f"bench-{time.time_ns()}", storage_path=storage,
                                   checkpoint_config=train.CheckpointConfig(num_to_keep=2))
    ).fit()
    return result.return_value


def torchrun_worker(args):
    """Under torchrun: the same step, rank 0 prints its median."""
    import torch.distributed as dist
    dist.init_process_group("gloo")
    model, optimizer, batch = setup_step(dict(hidden=args.hidden, warmup=args.warmup))
    median = timed_steps(model, optimizer, batch, args.steps)
    if dist.get_rank() == 0:
        print("STEP " + json.dumps(median), flush=True)
    dist.destroy_process_group()


def run_torchrun(args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # torch 1.13's torchrun parses its default "--redirects 0 --tee 0" into None on Python 3.11
    # (IntFlag iteration skips 0), so name both: stderr to its log folder, stdout teed.
    logs = tempfile.mkdtemp(prefix="torchrun-logs-")
    out = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "--redirects", "2", "--tee", "1", "--log_dir", logs, HERE, "--worker", "--hidden", str(args.hidden), "--warmup", str(args.warmup),
         "--steps", str(args.steps)], env=env, capture_output=True, text=True, timeout=600)
    for line in out.stdout.splitlines():
        if "STEP " in line:
            return json.loads(line.split("STEP ", 1)[1])
    raise RuntimeError(f"torchrun failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")


def summary(values):
    ms = [v * 1e3 for v in values]
    return f"{statistics.median(ms):8.2f} ms  ({min(ms):.2f}-{max(ms):.2f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--ckpt-steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return torchrun_worker(args)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("torch: not installed (both launchers need it)")
        return
    import cloudpickle
    import airt
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    airt.init(num_cpus=2)
    storage = tempfile.mkdtemp(prefix="airt-train-bench-")
    rows = {"airt": [], "torchrun": [], "report": [], "SYNC": [], "ASYNC": []}
    for run in range(args.runs):
        figures = run_airt(args, storage)
        rows["airt"].append(figures["plain"])
        for key in ("report", "SYNC", "ASYNC"):
            rows[key].append(figures[key])
        rows["torchrun"].append(run_torchrun(args))
        print(f"run {run + 1}/{args.runs}: airt {figures['plain'] * 1e3:.2f} ms, torchrun "
              f"{rows['torchrun'][-1] * 1e3:.2f} ms, SYNC {figures['SYNC'] * 1e3:.2f} ms, "
              f"ASYNC {figures['ASYNC'] * 1e3:.2f} ms", flush=True)
    params = sum(p.numel() for p in build(args.hidden).parameters())
    print(f"\n2 ranks, gloo, MLP of {params / 1e6:.2f} M parameters ({params * 4 / 2**20:.1f} MiB), "
          f"batch 64; median step of each run, then median (min-max) over {args.runs} runs")
    print(f"{'step through airt.train':34s}{summary(rows['airt'])}")
    print(f"{'step under torchrun':34s}{summary(rows['torchrun'])}")
    ratio = [t / a for a, t in zip(rows["airt"], rows["torchrun"])]
    print(f"{'airt speed / torchrun (per run)':34s}{statistics.median(ratio):8.3f}   "
          f"({min(ratio):.3f}-{max(ratio):.3f})  target >= 0.98")
    print(f"{'airt step + report(metrics)':34s}{summary(rows['report'])}")
    print(f"{'airt step + SYNC checkpoint':34s}{summary(rows['SYNC'])}")
    print(f"{'airt step + ASYNC checkpoint':34s}{summary(rows['ASYNC'])}")
    saved = [s - a for s, a in zip(rows["SYNC"], rows["ASYNC"])]
    print(f"{'ASYNC saves per step (SYNC-ASYNC)':34s}{summary(saved)}")
    airt.shutdown()


if __name__ == "__main__":
    main()
