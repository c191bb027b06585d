"""torch.distributed's gloo backend, the same loop as allreduce_loop.h: one process per rank
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment); rank 0 prints "BYTES SECONDS".

    python torch_allreduce.py SIZES_CSV
"""
import os
import sys
import time


def iterations(nbytes):
    return max(3, min(200, (512 << 20) // max(nbytes, 1)))


def main():
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=int(os.environ["RANK"]),
                            world_size=int(os.environ["WORLD_SIZE"]))
    for nbytes in (int(s) for s in sys.argv[1].split(",")):
        data = torch.ones(nbytes // 4, dtype=torch.float32)
        dist.all_reduce(data)
        dist.barrier()
        iters = iterations(nbytes)
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(data)
        seconds = (time.perf_counter() - start) / iters
        if dist.get_rank() == 0:
            print(nbytes, f"{seconds:.9f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
