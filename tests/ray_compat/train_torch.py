"""Ray Train (2.60, V2) as its docs write it: a TorchTrainer on 2 CPU workers fitting a linear
model with DDP, prepare_model / prepare_data_loader, reports with checkpoints every epoch
(SYNC, then ASYNC), get_context, get_checkpoint, and the Result."""

import os
import tempfile

import ray
from ray import train
from ray.train import Checkpoint, CheckpointConfig, RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer, prepare_data_loader, prepare_model


def train_func(config):
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    x = torch.randn(512, 3)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.3
    loader = prepare_data_loader(DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True))
    model = prepare_model(torch.nn.Linear(3, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    context = train.get_context()
    assert context.get_world_size() == 2
    assert train.get_checkpoint() is None
    for epoch in range(config["epochs"]):
        if context.get_world_size() > 1:
            loader.sampler.set_epoch(epoch)
        total = 0.0
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += loss.item()
        # ASYNC uploads after report returns: the folder must outlive the call (Ray deletes
        # it once uploaded), so it is not a TemporaryDirectory.
        folder = tempfile.mkdtemp()
        if context.get_world_rank() == 0:
            torch.save(model.module.state_dict(), os.path.join(folder, "model.pt"))
        mode = (train.CheckpointUploadMode.SYNC if epoch < 2
                else train.CheckpointUploadMode.ASYNC)
        train.report({"epoch": epoch, "loss": total / len(loader),
                      "rank": context.get_world_rank()},
                     checkpoint=Checkpoint.from_directory(folder),
                     checkpoint_upload_mode=mode)
    return "finished"


def main():
    ray.init(num_cpus=3)
    storage = tempfile.mkdtemp(prefix="ray_compat_train_")
    trainer = TorchTrainer(
        train_func, train_loop_config={"lr": 0.1, "epochs": 4},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(name="linear", storage_path=storage,
                             checkpoint_config=CheckpointConfig(
                                 num_to_keep=2, checkpoint_score_attribute="loss",
                                 checkpoint_score_order="min")))
    result = trainer.fit()
    assert result.error is None
    assert result.metrics["epoch"] == 3 and result.metrics["rank"] == 0, result.metrics
    assert result.metrics["loss"] < 0.01, result.metrics
    assert result.path == os.path.join(storage, "linear"), result.path
    with result.checkpoint.as_directory() as folder:
        assert "model.pt" in os.listdir(folder)
    assert len(result.best_checkpoints) == 2, result.best_checkpoints
    assert result.return_value == "finished"
    assert list(result.metrics_dataframe["epoch"]) == [2, 3], result.metrics_dataframe
    ray.shutdown()
    print("train_torch: ok")


if __name__ == "__main__":
    main()
