"""PyTorch DDP on CPUs through airt.train: 2 ranks over gloo train a small MLP on synthetic
blobs (4 classes in 2-D) to at least 90% held-out accuracy, checkpointing every epoch with
ASYNC uploads.

    PYTHONPATH=build/python python examples/train_torch_ddp.py [--address HOST:PORT]

The loop is deterministic (fixed seeds, torch's deterministic algorithms, one thread per rank,
the sampler's epoch and each rank's RNG state in the checkpoint): a run interrupted by a killed
rank and resumed from its checkpoint ends with the same model, bit for bit, as an uninterrupted
one (tests/python/test_train_examples.py checks it)."""

import argparse
import hashlib
import os
import tempfile

TARGET_ACCURACY = 0.9


def make_data(n, seed):
    """n points of 4 Gaussian blobs and their labels, the same for a seed on every rank."""
    import torch
    g = torch.Generator().manual_seed(seed)
    centers = torch.tensor([[2.0, 2.0], [-2.0, 2.0], [-2.0, -2.0], [2.0, -2.0]])
    labels = torch.randint(0, 4, (n,), generator=g)
    points = centers[labels] + torch.randn(n, 2, generator=g) * 0.9
    return points, labels


def make_model():
    import torch
    return torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.ReLU(), torch.nn.Dropout(0.1),
                               torch.nn.Linear(32, 4))


def model_digest(model):
    """SHA-256 of the parameters' bytes, in order."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def train_loop(config):
    """One rank's training. config: epochs, lr, batch_size; after_epoch(epoch, rank), when
    given, runs after each epoch's report (tests use it to stop a rank)."""
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, TensorDataset
    from airt import train
    from airt.train.torch import prepare_data_loader, prepare_model

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS on GPUs
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(0)  # the same initial weights on every rank
    rank = train.get_context().get_world_rank()
    points, labels = make_data(2048, seed=1)
    loader = prepare_data_loader(DataLoader(TensorDataset(points, labels),
                                            batch_size=config["batch_size"], shuffle=True))
    model = prepare_model(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
    torch.manual_seed(100 + rank)  # this rank's dropout stream
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            state = torch.load(os.path.join(d, "model.pt"))
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            torch.set_rng_state(torch.load(os.path.join(d, f"rng_rank{rank}.pt")))
            start = state["epoch"] + 1
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(start, config["epochs"]):
        if hasattr(loader, "sampler") and hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        model.train()
        total, count = 0.0, 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total, count = total + loss.item() * len(y), count + len(y)
        accuracy = evaluate(model)
        folder = tempfile.mkdtemp(prefix="ddp-checkpoint-")
        if rank == 0:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "epoch": epoch}, os.path.join(folder, "model.pt"))
        torch.save(torch.get_rng_state(), os.path.join(folder, f"rng_rank{rank}.pt"))
        train.report({"epoch": epoch, "loss": total / count, "accuracy": accuracy},
                     checkpoint=train.Checkpoint.from_directory(folder),
                     checkpoint_upload_mode=train.CheckpointUploadMode.ASYNC)
        if config.get("after_epoch"):
            config["after_epoch"](epoch, rank)
    module = model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) \
        else model
    dist.barrier()
    return {"digest": model_digest(module), "accuracy": evaluate(model), "resumed_at": start}


def evaluate(model):
    import torch
    points, labels = make_data(1024, seed=2)
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        predicted = model(points.to(device)).argmax(dim=1).cpu()
        accuracy = (predicted == labels).float().mean().item()
    model.train()
    return accuracy


def make_trainer(storage_path, name, config=None, max_failures=0, num_workers=2,
                 use_gpu=False):
    from airt import train
    from airt.train.torch import TorchTrainer
    return TorchTrainer(
        train_loop,
        train_loop_config=dict({"epochs": 6, "lr": 0.05, "batch_size": 64}, **(config or {})),
        scaling_config=train.ScalingConfig(num_workers=num_workers, use_gpu=use_gpu),
        run_config=train.RunConfig(name=name, storage_path=storage_path,
                                   failure_config=train.FailureConfig(max_failures)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=None)
    parser.add_argument("--storage-path", default=None)
    args = parser.parse_args()
    import airt
    airt.init(address=args.address, num_cpus=None if args.address else 2)
    storage = args.storage_path or tempfile.mkdtemp(prefix="airt-ddp-")
    result = make_trainer(storage, "ddp").fit()
    print(f"epochs {result.metrics['epoch'] + 1}, loss {result.metrics['loss']:.4f}, "
          f"held-out accuracy {result.return_value['accuracy']:.3f} "
          f"(target {TARGET_ACCURACY}); checkpoint {result.checkpoint.path}")
    print(f"model digest {result.return_value['digest']}")
    assert result.return_value["accuracy"] >= TARGET_ACCURACY, result.metrics
    airt.shutdown()


if __name__ == "__main__":
    main()
