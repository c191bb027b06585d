"""A hyperparameter sweep of a small PyTorch model with airt.tune (Ray Tune's API).

Sixteen configurations of a two-layer network classifying two noisy spirals; each trial asks for a
quarter CPU and half a GPU, so a node with 4 GPUs runs eight at once (the model trains on the
CPU: the GPUs here are declared, as in scripts/demo). ASHA stops the poor trials early. The live
table shows while it runs; at the end, the best config and the path of the plot.

    airt start --head --num-cpus=2 --num-gpus=4      # or let airt.init() start a local one
    python examples/tune_sweep.py [--samples 16] [--epochs 12] [--storage DIR]
"""

import argparse
import datetime
import math
import os
import tempfile

import airt
from airt import tune


def spirals(n, noise, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(n, generator=g) * 2 * math.pi  # one turn each
    label = torch.randint(0, 2, (n,), generator=g)
    r = 0.2 + t / (2 * math.pi)
    angle = t + label * math.pi
    x = torch.stack([r * torch.cos(angle), r * torch.sin(angle)], 1)
    return 3 * (x + noise * torch.randn(x.shape, generator=g)), label


def train_spirals(config):
    import torch
    from torch import nn
    torch.set_num_threads(1)  # eight trials share two cores
    torch.manual_seed(config["seed"])
    x, y = spirals(1024, 0.1, seed=0)
    xv, yv = spirals(512, 0.1, seed=1)
    model = nn.Sequential(nn.Linear(2, config["hidden"]), nn.ReLU(),
                          nn.Linear(config["hidden"], config["hidden"]), nn.ReLU(),
                          nn.Linear(config["hidden"], 2))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:  # a retried or restored trial resumes here
        state = torch.load(os.path.join(checkpoint.path, "model.pt"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["epoch"]
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(start, config["epochs"]):
        perm = torch.randperm(len(x))
        for i in range(0, len(x), config["batch_size"]):
            idx = perm[i:i + config["batch_size"]]
            opt.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()
        with torch.no_grad():
            logits = model(xv)
            val_loss = loss_fn(logits, yv).item()
            accuracy = (logits.argmax(1) == yv).float().mean().item()
        with tempfile.TemporaryDirectory() as d:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                        "epoch": epoch + 1}, os.path.join(d, "model.pt"))
            tune.report({"val_loss": val_loss, "accuracy": accuracy},
                        checkpoint=tune.Checkpoint.from_directory(d))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--storage", default=os.path.join(tempfile.gettempdir(), "airt_results"))
    args = parser.parse_args()
    airt.init()  # joins AIRT_ADDRESS (scripts/demo's cluster), else starts a local one

    trainable = tune.with_resources(train_spirals, {"CPU": 0.25, "GPU": 0.5})
    tuner = tune.Tuner(
        trainable,
        param_space={
            "lr": tune.loguniform(1e-3, 0.5),
            "momentum": tune.choice([0.0, 0.9]),
            "hidden": tune.choice([8, 32, 64]),
            "batch_size": tune.choice([32, 128]),
            "epochs": args.epochs, "seed": tune.randint(0, 1000),
        },
        tune_config=tune.TuneConfig(
            metric="val_loss", mode="min", num_samples=args.samples,
            search_alg=tune.BasicVariantGenerator(random_state=2026),
            scheduler=tune.ASHAScheduler(max_t=args.epochs, grace_period=2,
                                         reduction_factor=2)),
        run_config=tune.RunConfig(name=f"spirals_{datetime.datetime.now():%Y-%m-%d_%H-%M-%S}", storage_path=args.storage,
                                  failure_config=tune.FailureConfig(max_failures=1)))
    results = tuner.fit()
    best = results.get_best_result()
    print(f"\nbest config: {best.config}")
    print(f"best val_loss {best.metrics['val_loss']:.4f}, accuracy "
          f"{best.metrics['accuracy']:.3f} after {best.metrics['training_iteration']} epochs")
    print(f"{len(results)} trials, {results.num_errors} errors; experiment folder "
          f"{results.experiment_path}")
    airt.shutdown()


if __name__ == "__main__":
    main()
