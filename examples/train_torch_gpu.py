"""The DDP example of train_torch_ddp.py on GPUs: ScalingConfig(use_gpu=True), one GPU per
rank, nccl, the model and batches on cuda:<LOCAL_RANK>. For a machine with GPUs and a CUDA
build of torch (one rank per GPU; --num-workers defaults to the GPUs the cluster has).

    PYTHONPATH=build/python python examples/train_torch_gpu.py [--num-workers N]"""

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_torch_ddp  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=None)
    parser.add_argument("--num-workers", type=int, default=None)
    args = parser.parse_args()
    import cloudpickle
    import torch
    import airt
    if not torch.cuda.is_available():
        print("skipped: no CUDA device (or a CPU build of torch)")
        return
    cloudpickle.register_pickle_by_value(train_torch_ddp)  # the ranks need not import it
    airt.init(address=args.address)
    workers = args.num_workers or int(airt.cluster_resources().get("GPU", 0))
    if workers < 1:
        print("skipped: the cluster has no GPUs")
        return
    result = train_torch_ddp.make_trainer(tempfile.mkdtemp(prefix="airt-gpu-"), "gpu",
                                          num_workers=workers, use_gpu=True).fit()
    print(f"{workers} GPU ranks: held-out accuracy {result.return_value['accuracy']:.3f} "
          f"(target {train_torch_ddp.TARGET_ACCURACY})")
    assert result.return_value["accuracy"] >= train_torch_ddp.TARGET_ACCURACY
    airt.shutdown()


if __name__ == "__main__":
    main()
