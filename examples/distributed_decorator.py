"""@airt.distributed: one function on N ranks. Each rank has the torchrun environment, so
torch.distributed initialises from it; the call returns every rank's value in rank order, and a
rank's exception comes back with its rank and traceback.

    PYTHONPATH=build/python python examples/distributed_decorator.py            # 2 CPU ranks
    PYTHONPATH=build/python python examples/distributed_decorator.py --gpus 8 --gpu-type H100"""

import argparse

import airt


def allreduce(n):
    """Each rank contributes arange(n) * (rank + 1); every rank ends with their sum."""
    import torch
    import torch.distributed as dist
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend)
    device = torch.device("cuda", airt.runtime.get_local_rank()) if backend == "nccl" \
        else torch.device("cpu")
    values = torch.arange(n, dtype=torch.float32, device=device)
    values *= airt.runtime.get_global_rank() + 1
    dist.all_reduce(values)
    dist.destroy_process_group()
    return values.cpu().tolist()


def check_rank(limit):
    if airt.runtime.get_global_rank() >= limit:
        raise ValueError(f"rank {airt.runtime.get_global_rank()} is past {limit}")
    return airt.runtime.get_global_rank()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=None)
    parser.add_argument("--gpus", type=int, default=None)
    parser.add_argument("--gpu-type", default=None)
    parser.add_argument("--num-workers", type=int, default=2)
    args = parser.parse_args()
    airt.init(address=args.address, num_cpus=None if args.address else 2)
    if args.gpus:
        decorate = airt.distributed(gpus=args.gpus, gpu_type=args.gpu_type)
    else:
        decorate = airt.distributed(num_workers=args.num_workers)
    world = args.gpus or args.num_workers
    sums = decorate(allreduce).distributed(4)
    scale = world * (world + 1) // 2
    assert sums == [[float(i * scale) for i in range(4)]] * world, sums
    print(f"allreduce on {world} ranks: {sums[0]} on every rank")
    try:
        decorate(check_rank).distributed(world - 1)
    except ValueError as error:
        print(f"rank {error.rank} raised, as expected: {str(error).splitlines()[0]}")
    else:
        raise AssertionError("the last rank should have raised")
    airt.shutdown()


if __name__ == "__main__":
    main()
