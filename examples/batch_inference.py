"""Batch inference with airt.data: a folder of generated images, a small PyTorch model on a pool
of GPU actors, predictions written to parquet.

    PYTHONPATH=build/python python examples/batch_inference.py --images 2000 --out /tmp/preds

Without --address it starts a local cluster that declares --gpus GPUs (CPU torch runs the model
where there is no real GPU; on a GPU machine each actor gets one and runs the model there). The
model is the slow stage: the actors stay busy (stats() prints the pool's idle fraction).
"""

import argparse
import os
import tempfile
import time

import numpy as np

import airt
import airt.data as rd


def generate_images(folder, count, size):
    """count size x size RGB images as PNG files (a class's stripes, noise on top)."""
    from PIL import Image
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(count):
        image = rng.integers(0, 64, size=(size, size, 3), dtype=np.uint8)
        image[:, (i % 4)::4, i % 3] = 255
        Image.fromarray(image).save(os.path.join(folder, f"{i:06d}.png"))


class Classifier:
    """A small CNN, built once per actor; __call__ classifies a batch of images."""

    def __init__(self, num_classes):
        import torch
        torch.manual_seed(0)
        self.torch = torch
        self.device = "cuda" if torch.cuda.is_available() and airt.get_gpu_ids() else "cpu"
        self.model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
            torch.nn.Linear(32, num_classes)).to(self.device).eval()

    def __call__(self, batch):
        torch = self.torch
        images = torch.as_tensor(np.array(batch["image"]), device=self.device)  # writable
        images = images.permute(0, 3, 1, 2).float() / 255.0
        with torch.no_grad():
            logits = self.model(images)
        return {"path": batch["path"], "label": logits.argmax(1).cpu().numpy(),
                "score": logits.max(1).values.cpu().numpy()}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", default=None)
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--gpus", type=int, default=2, help="GPUs the local cluster declares")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", default=None, help="the predictions' folder")
    args = parser.parse_args()

    if args.address:
        airt.init(address=args.address)
    else:
        airt.init(num_cpus=max(2, os.cpu_count() or 2), num_gpus=args.gpus)
    work = tempfile.mkdtemp(prefix="airt-batch-inference-")
    images = os.path.join(work, "images")
    generate_images(images, args.images, args.size)
    out = args.out or os.path.join(work, "predictions")

    start = time.monotonic()
    ds = rd.read_images(images, include_paths=True, override_num_blocks=4 * args.actors)
    ds = ds.map_batches(Classifier, fn_constructor_args=(4,), batch_size=args.batch_size,
                        num_gpus=1, compute=rd.ActorPoolStrategy(size=args.actors))
    ds.write_parquet(out)
    elapsed = time.monotonic() - start
    written = rd.read_parquet(out)
    print(f"{written.count()} predictions in {elapsed:.2f}s -> {out}")
    print(ds.stats())
    airt.shutdown()


if __name__ == "__main__":
    main()
