"""airt.train inside Tune trials, as Ray 2.x's: Tuner(TorchTrainer) with a gang of 2 gloo ranks
per trial (in the trial's own placement group), a trainer's fit() called by a function
trainable, and airt.train.report called by a function trainable itself."""

import json
import os
import tempfile

import pytest

import airt
from airt import train, tune
from airt.train import ScalingConfig
from airt.train.trainer import DataParallelTrainer

torch = pytest.importorskip("torch")


def ddp_loop(config):
    import torch.distributed as dist
    from airt.train.torch import prepare_model
    torch.manual_seed(0)
    x = torch.randn(64, 3)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]])
    model = prepare_model(torch.nn.Linear(3, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    start = 0
    if train.get_checkpoint():
        with open(os.path.join(train.get_checkpoint().path, "epoch")) as f:
            start = int(f.read())
    context = train.get_context()
    for epoch in range(start, config["epochs"]):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        with tempfile.TemporaryDirectory() as d:
            if context.get_world_rank() == 0:
                with open(os.path.join(d, "epoch"), "w") as f:
                    f.write(str(epoch + 1))
            train.report({"loss": loss.item(), "epoch": epoch + 1,
                          "world_size": dist.get_world_size(),
                          "group": airt.get_runtime_context().get_placement_group_id()},
                         checkpoint=train.Checkpoint.from_directory(d))


def test_a_torch_trainer_runs_as_a_tune_trial_with_two_gloo_ranks(cluster, tmp_path):
    from airt.train.torch import TorchConfig, TorchTrainer
    from airt.util.placement_group import placement_group_table
    trainer = TorchTrainer(ddp_loop, train_loop_config={"epochs": 6, "lr": 0.0},
                           torch_config=TorchConfig(backend="gloo"),
                           scaling_config=ScalingConfig(num_workers=2,
                                                        resources_per_worker={"CPU": 0.25}))
    grid = tune.Tuner(
        trainer, param_space={"train_loop_config": {"lr": tune.grid_search([0.01, 0.1])}},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="trainer", verbose=0,
                                  stop={"training_iteration": 4})).fit()
    assert len(grid) == 2 and grid.num_errors == 0, grid.errors
    assert sorted(r.config["train_loop_config"]["lr"] for r in grid) == [0.01, 0.1]
    groups = set()
    for r in grid:
        assert os.path.basename(r.path).startswith("TorchTrainer_")
        # Rank 0's metrics, one Tune result per train report, stopped by the tuner at 4.
        assert r.metrics["world_size"] == 2 and r.metrics["training_iteration"] == 4
        assert r.metrics["epoch"] == 4
        rows = [json.loads(line) for line in open(os.path.join(r.path, "result.json"))]
        assert [row["epoch"] for row in rows] == [1, 2, 3, 4]
        assert r.checkpoint is not None and r.checkpoint.path.startswith(r.path)
        assert open(os.path.join(r.checkpoint.path, "epoch")).read() == "4"
        groups.add(r.metrics["group"])
    assert len(groups) == 2 and None not in groups    # the ranks ran in each trial's group
    table = placement_group_table()
    assert all(table[g]["state"] == "REMOVED" for g in groups if g in table)
    better = grid.get_best_result()
    assert better.config["train_loop_config"]["lr"] == 0.1


def plain_loop(config):
    for step in range(config["steps"]):
        with tempfile.TemporaryDirectory() as d:
            rank = train.get_context().get_world_rank()
            with open(os.path.join(d, f"rank{rank}"), "w") as f:
                f.write(str(step + 1))
            train.report({"step": step + 1, "score": config["x"] * (step + 1)},
                         checkpoint=train.Checkpoint.from_directory(d))


def runs_a_trainer(config):
    trainer = DataParallelTrainer(plain_loop, train_loop_config={"steps": 3, "x": config["x"]},
                                  scaling_config=ScalingConfig(
                                      num_workers=2, resources_per_worker={"CPU": 0.1}))
    trainer.fit()
    tune.report({"after_fit": 1, "score": -1.0})


def reports_through_train(config):
    start = 0
    if train.get_checkpoint():
        start = int(open(os.path.join(train.get_checkpoint().path, "n")).read())
    for n in range(start + 1, 4):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "n"), "w") as f:
                f.write(str(n))
            if n == 2 and not start and config["fail"]:
                raise RuntimeError("fails once after its first checkpoint")
            train.report({"n": n, "start": start}, checkpoint=train.Checkpoint.from_directory(d))


def test_fit_inside_a_function_trainable_and_train_report_forward_to_the_trial(cluster,
                                                                                tmp_path):
    grid = tune.Tuner(
        tune.with_resources(runs_a_trainer, {"CPU": 0.1}),
        param_space={"x": tune.grid_search([1.0, 2.0])},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="inside", verbose=0)).fit()
    assert grid.num_errors == 0, grid.errors
    for r in grid:
        rows = [json.loads(line) for line in open(os.path.join(r.path, "result.json"))]
        assert [row.get("step") for row in rows] == [1, 2, 3, None]
        assert [row["score"] for row in rows[:3]] == [r.config["x"] * k for k in (1, 2, 3)]
        assert rows[-1]["after_fit"] == 1
        # The trial's checkpoint is the train run's last one: every rank's part, merged.
        assert sorted(os.listdir(r.checkpoint.path)) == ["rank0", "rank1"]
        assert open(os.path.join(r.checkpoint.path, "rank1")).read() == "3"
        assert os.path.isdir(os.path.join(r.path, "train"))   # the run's folder, in the trial's

    grid = tune.Tuner(
        tune.with_resources(reports_through_train, {"CPU": 0.1}),
        param_space={"fail": tune.grid_search([False, True])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="report", verbose=0,
                                  failure_config=tune.FailureConfig(max_failures=1))).fit()
    assert grid.num_errors == 0, grid.errors
    by_fail = {r.config["fail"]: r for r in grid}
    assert by_fail[False].metrics["n"] == 3 and by_fail[False].metrics["start"] == 0
    # The failed trial was retried from the checkpoint train.report gave the trial.
    assert by_fail[True].metrics["n"] == 3 and by_fail[True].metrics["start"] == 1


def test_tuner_of_a_trainer_checks_its_param_space():
    trainer = DataParallelTrainer(plain_loop, scaling_config=ScalingConfig(num_workers=2))
    with pytest.raises(airt.exceptions.UnimplementedError, match="train_loop_config"):
        tune.Tuner(trainer, param_space={"scaling_config": {"num_workers": 4}})
    with pytest.raises(ValueError, match="first of several"):
        tune.PlacementGroupFactory([{"CPU": 1}, {}])
    factory = tune.Tuner(trainer, param_space={})._trainable._airt_resources
    assert factory.bundles == [{}, {"CPU": 1.0}, {"CPU": 1.0}]
    assert factory.reserved_bundles == [{"CPU": 1.0}, {"CPU": 1.0}]
