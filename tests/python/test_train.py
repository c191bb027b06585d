"""airt.train on the session's local cluster: the torchrun environment of every rank, report's
barrier and rank 0's metrics, checkpoints (SYNC, ASYNC, NO_UPLOAD, num_to_keep), the errors of
a bad loop, restarts after a rank's process is killed and after a rank hung in a collective
(tests/python/test_train_examples.py has the deterministic torch run)."""

import json
import os
import signal
import tempfile
import threading
import sys
import time

import cloudpickle
import pytest

from airt import train
from airt.train import (Checkpoint, CheckpointConfig, CheckpointUploadMode, DataParallelTrainer,
                        FailureConfig, RunConfig, ScalingConfig, TrainingFailedError)

ENV_KEYS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
            "NODE_RANK", "CUDA_VISIBLE_DEVICES")

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the ranks cannot import this file


def run_config(tmp_path, name="run", **kwargs):
    return RunConfig(name=name, storage_path=str(tmp_path / "storage"), **kwargs)


def write_part(step, payload=None):
    """A checkpoint folder holding this rank's file for `step`."""
    rank = train.get_context().get_world_rank()
    folder = tempfile.mkdtemp(prefix="ckpt-")
    with open(os.path.join(folder, f"rank{rank}.json"), "w") as f:
        json.dump({"step": step, "rank": rank, "payload": payload}, f)
    return Checkpoint.from_directory(folder)


def test_every_rank_gets_the_torchrun_environment_and_its_context(cluster, tmp_path):
    def loop(config):
        ctx = train.get_context()
        seen = {k: os.environ.get(k) for k in ENV_KEYS}
        seen.update(world_rank=ctx.get_world_rank(), world_size=ctx.get_world_size(),
                    local_rank=ctx.get_local_rank(), local_world_size=ctx.get_local_world_size(),
                    node_rank=ctx.get_node_rank(), name=ctx.get_experiment_name(),
                    pid=os.getpid())
        with open(os.path.join(config["out"], f"rank{ctx.get_world_rank()}.json"), "w") as f:
            json.dump(seen, f)
        return ctx.get_world_rank()

    result = DataParallelTrainer(loop, train_loop_config={"out": str(tmp_path)},
                                 scaling_config=ScalingConfig(num_workers=2),
                                 run_config=run_config(tmp_path, "env")).fit()
    assert result.return_value == 0
    ranks = [json.load(open(tmp_path / f"rank{r}.json")) for r in range(2)]
    assert ranks[0]["MASTER_PORT"] == ranks[1]["MASTER_PORT"] and ranks[0]["MASTER_PORT"]
    assert ranks[0]["pid"] != ranks[1]["pid"]
    for r, seen in enumerate(ranks):
        assert seen["MASTER_ADDR"] == "127.0.0.1"
        assert (seen["RANK"], seen["WORLD_SIZE"], seen["NODE_RANK"]) == (str(r), "2", "0")
        assert (seen["LOCAL_RANK"], seen["LOCAL_WORLD_SIZE"]) == (str(r), "2")
        assert seen["CUDA_VISIBLE_DEVICES"] == ""
        assert (seen["world_rank"], seen["world_size"], seen["local_rank"]) == (r, 2, r)
        assert (seen["local_world_size"], seen["node_rank"], seen["name"]) == (2, 0, "env")


def test_report_keeps_rank_zeros_metrics_and_merges_every_ranks_part(cluster, tmp_path):
    def loop():
        rank = train.get_context().get_world_rank()
        for step in range(3):
            train.report({"step": step, "rank": rank}, checkpoint=write_part(step))
        return "done"

    result = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                                 run_config=run_config(tmp_path)).fit()
    assert result.metrics == {"step": 2, "rank": 0}
    assert result.return_value == "done" and result.error is None
    assert result.path == str(tmp_path / "storage" / "run")
    assert [m["step"] for _, m in result.best_checkpoints] == [0, 1, 2]
    assert list(result.metrics_dataframe["step"]) == [0, 1, 2]
    with result.checkpoint.as_directory() as d:
        assert sorted(os.listdir(d)) == ["rank0.json", "rank1.json"]
        assert all(json.load(open(os.path.join(d, f)))["step"] == 2 for f in os.listdir(d))


def test_async_report_snapshots_the_folder_so_the_loop_may_reuse_it(cluster, tmp_path):
    def loop():
        rank = train.get_context().get_world_rank()
        folder = tempfile.mkdtemp(prefix="reused-")
        for step in range(4):
            with open(os.path.join(folder, f"rank{rank}.bin"), "wb") as f:
                f.write(bytes([step]) * (1 << 20))  # the same file, rewritten every step
            train.report({"step": step}, checkpoint=Checkpoint.from_directory(folder),
                         checkpoint_upload_mode=CheckpointUploadMode.ASYNC,
                         delete_local_checkpoint_after_upload=False)

    result = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                                 run_config=run_config(tmp_path)).fit()
    assert result.checkpoint.path.endswith("checkpoint_000003")  # fit waits for the last copy
    assert [m["step"] for _, m in result.best_checkpoints] == [0, 1, 2, 3]
    for checkpoint, metrics in result.best_checkpoints:
        for rank in range(2):
            data = open(os.path.join(checkpoint.path, f"rank{rank}.bin"), "rb").read()
            assert data == bytes([metrics["step"]]) * (1 << 20)


def test_async_report_takes_the_folder_by_default(cluster, tmp_path):
    def loop():
        checkpoint = write_part(0)
        train.report({"step": 0}, checkpoint=checkpoint,
                     checkpoint_upload_mode=CheckpointUploadMode.ASYNC)
        return checkpoint.path, os.path.exists(checkpoint.path)

    result = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                                 run_config=run_config(tmp_path)).fit()
    folder, still_there = result.return_value
    assert not still_there  # moved away, as Ray deletes it after the upload
    assert sorted(os.listdir(result.checkpoint.path)) == ["rank0.json", "rank1.json"]
    parent, name = os.path.split(folder)
    assert not [n for n in os.listdir(parent) if n.startswith(name)]  # the snapshot is gone


def test_num_to_keep_keeps_the_best_by_score_and_the_latest(cluster, tmp_path):
    losses = [5.0, 1.0, 4.0, 2.0, 3.0]

    def loop():
        for step, loss in enumerate(losses):
            train.report({"loss": loss, "step": step}, checkpoint=write_part(step))

    config = CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="loss",
                              checkpoint_score_order="min")
    result = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                                 run_config=run_config(tmp_path, checkpoint_config=config)).fit()
    assert [m["loss"] for _, m in result.best_checkpoints] == [1.0, 2.0, 3.0]
    assert result.checkpoint.path.endswith("checkpoint_000004")
    assert result.get_best_checkpoint("loss", "min").path.endswith("checkpoint_000001")
    folders = sorted(n for n in os.listdir(result.path) if n.startswith("checkpoint_"))
    assert folders == ["checkpoint_000001", "checkpoint_000003", "checkpoint_000004"]


def test_no_upload_records_a_checkpoint_where_it_lies(cluster, tmp_path):
    def loop():
        run_dir = train.get_context().get_trial_dir()
        folder = os.path.join(run_dir, "mine")
        os.makedirs(folder, exist_ok=True)
        train.report({"step": 0}, checkpoint=Checkpoint.from_directory(folder),
                     checkpoint_upload_mode=CheckpointUploadMode.NO_UPLOAD)
        outside = tempfile.mkdtemp()
        try:
            train.report({"step": 1}, checkpoint=Checkpoint.from_directory(outside),
                         checkpoint_upload_mode=CheckpointUploadMode.NO_UPLOAD)
        except ValueError as error:
            return str(error)

    result = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=1),
                                 run_config=run_config(tmp_path)).fit()
    assert result.checkpoint.path == os.path.join(result.path, "mine")
    assert "outside the run's folder" in result.return_value


def test_a_rank_that_raises_fails_fit_with_its_rank_node_and_traceback(cluster, tmp_path):
    def loop():
        if train.get_context().get_world_rank() == 1:
            raise ZeroDivisionError("rank one's bug")
        train.report({"step": 0})

    with pytest.raises(TrainingFailedError) as info:
        DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                            run_config=run_config(tmp_path)).fit()
    text = str(info.value)
    assert "rank 1 (node " in text and "raised" in text
    assert "ZeroDivisionError: rank one's bug" in text and "line " in text
    assert list(info.value.worker_failures) == [1]


def test_report_called_unequally_often_is_an_error_not_a_hang(cluster, tmp_path):
    def loop():
        steps = 1 if train.get_context().get_world_rank() == 0 else 2
        for step in range(steps):
            train.report({"step": step})

    with pytest.raises(TrainingFailedError, match="equally often"):
        DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                            run_config=run_config(tmp_path)).fit()


def test_bad_configuration_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="num_workers"):
        ScalingConfig(num_workers=0)
    with pytest.raises(ValueError, match="placement_strategy"):
        ScalingConfig(placement_strategy="CLOSE")
    with pytest.raises(ValueError, match="use_gpu"):
        DataParallelTrainer(lambda: None,
                            scaling_config=ScalingConfig(resources_per_worker={"GPU": 1}))
    with pytest.raises(ValueError, match="max_failures"):
        FailureConfig(max_failures=-2)
    with pytest.raises(ValueError, match="num_to_keep"):
        CheckpointConfig(num_to_keep=0)
    with pytest.raises(TypeError, match="streaming_split"):
        DataParallelTrainer(lambda: None, datasets={"train": [1, 2, 3]})
    with pytest.raises(RuntimeError, match="outside a training loop"):
        train.report({"x": 1})
    with pytest.raises(ValueError, match="label_selector"):
        ScalingConfig(num_workers=2, label_selector=[{"zone": "a"}])  # one per rank
    with pytest.raises(ValueError, match="label_selector"):
        ScalingConfig(label_selector={"zone": 1})
    assert ScalingConfig(num_workers=2, label_selector={"zone": "a"}).label_selectors() == [
        {"zone": "a"}, {"zone": "a"}]
    assert ScalingConfig(num_workers=2, use_gpu=True, accelerator_type="H100").bundle() == {
        "CPU": 1.0, "GPU": 1.0, "accelerator_type:H100": 0.001}


def kill_when_paused(pid_file, killed_marker, deadline_s=120):
    """A thread that waits for the paused rank's pid file, marks the kill and SIGKILLs it."""
    def run():
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            if os.path.exists(pid_file):
                pid = int(open(pid_file).read())
                open(killed_marker, "w").close()
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.02)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def pause_to_be_killed(config):
    """On the first attempt's rank config["victim"], at step config["kill_at"]: writes the pid
    and waits to be killed."""
    if os.path.exists(config["killed"]):
        return
    with open(config["pid_file"] + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(config["pid_file"] + ".tmp", config["pid_file"])
    time.sleep(120)
    raise RuntimeError("the test never killed this rank")


def counting_loop(config):
    """Sums steps into a state resumed from the checkpoint; the victim rank is killed once."""
    rank = train.get_context().get_world_rank()
    start, total = 0, 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d:
            state = json.load(open(os.path.join(d, f"rank{rank}.json")))["payload"]
        start, total = state["next"], state["total"]
    for step in range(start, config["steps"]):
        if step == config["kill_at"] and rank == config["victim"]:
            pause_to_be_killed(config)
        total += step * (rank + 1)
        train.report({"step": step, "total": total, "resumed_from": start},
                     checkpoint=write_part(step, {"next": step + 1, "total": total}),
                     checkpoint_upload_mode=config["mode"])
    return {"total": total, "resumed_from": start}


@pytest.mark.parametrize("mode", ["SYNC", "ASYNC"])
def test_a_killed_rank_restarts_the_gang_from_the_latest_checkpoint(cluster, tmp_path, mode):
    config = dict(steps=6, kill_at=3, victim=1, mode=CheckpointUploadMode(mode),
                  pid_file=str(tmp_path / "pid"), killed=str(tmp_path / "killed"))
    killer = kill_when_paused(config["pid_file"], config["killed"])
    result = DataParallelTrainer(
        counting_loop, train_loop_config=config, scaling_config=ScalingConfig(num_workers=2),
        run_config=run_config(tmp_path, failure_config=FailureConfig(max_failures=1))).fit()
    killer.join()
    assert os.path.exists(config["killed"])
    # Step 2's checkpoint is whole unless the gang was stopped while rank 0 (SYNC) or either
    # rank (ASYNC) was still copying its part: then the run resumes from step 1's.
    resumed = result.return_value["resumed_from"]
    assert resumed in (2, 3)
    assert result.return_value == {"total": sum(range(6)), "resumed_from": resumed}
    assert result.metrics == {"step": 5, "total": sum(range(6)), "resumed_from": resumed}
    assert [m["step"] for _, m in result.best_checkpoints] == list(range(6))
    for checkpoint, metrics in result.best_checkpoints:  # every part of every listed one
        for rank in range(2):
            part = json.load(open(os.path.join(checkpoint.path, f"rank{rank}.json")))
            assert part["step"] == metrics["step"]


def test_failures_past_max_failures_raise_naming_rank_node_and_death(cluster, tmp_path):
    config = dict(steps=3, kill_at=1, victim=1, mode=CheckpointUploadMode.SYNC,
                  pid_file=str(tmp_path / "pid"), killed=str(tmp_path / "killed"))
    killer = kill_when_paused(config["pid_file"], config["killed"])
    with pytest.raises(TrainingFailedError) as info:
        DataParallelTrainer(counting_loop, train_loop_config=config,
                            scaling_config=ScalingConfig(num_workers=2),
                            run_config=run_config(tmp_path)).fit()
    killer.join()
    pid = open(config["pid_file"]).read()
    text = str(info.value)
    assert f"rank 1 (node " in text and f"pid {pid}) died" in text, text
    assert "max_failures=0" in text


def test_a_rank_killed_mid_copy_never_leaves_a_torn_latest_checkpoint(cluster, tmp_path):
    """Rank 1 dies right after an ASYNC report of a large part, while its copy may still run:
    the run resumes from a checkpoint whose every part is whole."""
    def loop(config):
        rank = train.get_context().get_world_rank()
        checkpoint = train.get_checkpoint()
        start = 0
        if checkpoint is not None:
            names = sorted(os.listdir(checkpoint.path))
            assert names == ["rank0.json", "rank1.json"], names
            parts = [json.load(open(os.path.join(checkpoint.path, n))) for n in names]
            assert parts[0]["step"] == parts[1]["step"]
            assert len(parts[1]["payload"]) == (1 << 22 if parts[1]["step"] == 2 else 1)
            start = parts[0]["step"] + 1
        for step in range(start, 4):
            payload = "x" * (1 << 22) if rank == 1 and step == 2 else "x"
            train.report({"step": step, "start": start}, checkpoint=write_part(step, payload),
                         checkpoint_upload_mode=CheckpointUploadMode.ASYNC)
            if step == 2 and rank == 1 and not os.path.exists(config["killed"]):
                open(config["killed"], "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
        return start

    result = DataParallelTrainer(
        loop, train_loop_config={"killed": str(tmp_path / "killed")},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=run_config(tmp_path, failure_config=FailureConfig(max_failures=1))).fit()
    assert result.return_value in (2, 3)  # from step 1's checkpoint, or step 2's if it was whole
    steps = [m["step"] for _, m in result.best_checkpoints]
    assert steps == sorted(set(steps)) and steps[-1] == 3
    listed = {os.path.basename(c.path) for c, _ in result.best_checkpoints}
    on_disk = {n for n in os.listdir(result.path) if n.startswith("checkpoint_")}
    assert on_disk == listed  # a torn folder was removed when the gang restarted


def test_each_rank_reads_its_own_shard_of_a_dataset(cluster, tmp_path):
    from airt import data

    def loop():
        shard = train.get_dataset_shard("train")
        assert train.get_dataset_shard("missing") is None
        ids = [row["id"] for row in shard.iter_rows()]
        train.report({"n": len(ids)})
        return ids

    out = tmp_path / "ids"
    out.mkdir()

    def recording_loop():
        ids = loop()
        with open(out / f"rank{train.get_context().get_world_rank()}.json", "w") as f:
            json.dump(ids, f)

    # Half a CPU per rank: the dataset's read tasks need the rest of the 2-CPU cluster.
    DataParallelTrainer(recording_loop, datasets={"train": data.range(40)},
                        scaling_config=ScalingConfig(num_workers=2,
                                                     resources_per_worker={"CPU": 0.5}),
                        run_config=run_config(tmp_path)).fit()
    ids = [json.load(open(out / f"rank{r}.json")) for r in range(2)]
    assert len(ids[0]) == len(ids[1]) == 20  # equal=True
    assert sorted(ids[0] + ids[1]) == list(range(40))


def collective_loop(config):
    """Sums every rank's step * (rank + 1) with an allreduce each step into a state resumed
    from the checkpoint; on the first attempt, rank 1 sleeps inside step config["hang_at"] (the
    marker file tells the attempts apart) so rank 0's allreduce passes the group's deadline."""
    import numpy as np
    from airt.util import collective as col
    rank = train.get_context().get_world_rank()
    col.init_collective_group(2, rank, "gloo", "grads", gloo_timeout=config["timeout_ms"])
    start, total = 0, 0.0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        state = json.load(open(os.path.join(checkpoint.path, f"rank{rank}.json")))["payload"]
        start, total = state["next"], state["total"]
    for step in range(start, 4):
        if step == config["hang_at"] and rank == 1 and not os.path.exists(config["marker"]):
            with open(config["marker"] + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.replace(config["marker"] + ".tmp", config["marker"])
            time.sleep(600)  # hung: the gang's teardown kills this process
        grad = np.array([step * (rank + 1)], dtype=np.float64)
        col.allreduce(grad, "grads")
        total += float(grad[0])
        train.report({"step": step, "total": total, "resumed_from": start},
                     checkpoint=write_part(step, {"next": step + 1, "total": total}))
    col.destroy_collective_group("grads")
    return {"total": total, "resumed_from": start}


def test_a_rank_hung_in_a_collective_restarts_the_gang_from_the_latest_checkpoint(cluster,
                                                                                  tmp_path):
    config = dict(hang_at=2, marker=str(tmp_path / "hung"), timeout_ms=10000)
    result = DataParallelTrainer(
        collective_loop, train_loop_config=config, scaling_config=ScalingConfig(num_workers=2),
        run_config=run_config(tmp_path, failure_config=FailureConfig(max_failures=1))).fit()
    assert os.path.exists(config["marker"])  # the first attempt hung
    # Each step's allreduce sums step * 1 + step * 2. Step 1's checkpoint was committed before
    # either rank left its SYNC report, so the second attempt resumes at step 2.
    assert result.return_value == {"total": 3 * sum(range(4)), "resumed_from": 2}
    assert result.metrics["step"] == 3 and result.metrics["total"] == 3 * sum(range(4))


def test_a_hung_collective_past_max_failures_names_the_hung_rank_and_the_operation(cluster,
                                                                                   tmp_path):
    config = dict(hang_at=1, marker=str(tmp_path / "hung"), timeout_ms=10000)
    with pytest.raises(TrainingFailedError) as info:
        DataParallelTrainer(collective_loop, train_loop_config=config,
                            scaling_config=ScalingConfig(num_workers=2),
                            run_config=run_config(tmp_path)).fit()
    pid = open(config["marker"]).read()
    text = str(info.value)
    assert f"rank 1 (node " in text and f"pid {pid}) hung: it never reached allreduce #2 of " \
        f"collective group 'grads', on which rank 0 passed the group's deadline" in text, text
    assert "max_failures=0" in text
    assert list(info.value.worker_failures) == [1]
    from airt.util.collective import CollectiveTimeoutError
    assert isinstance(info.value.worker_failures[1].cause, CollectiveTimeoutError)


def torch_hang_loop(config):
    """A torch.distributed allreduce per step; rank 1 sleeps inside step 1 instead."""
    import torch
    import torch.distributed as dist
    rank = train.get_context().get_world_rank()
    for step in range(3):
        if step == 1 and rank == 1:
            with open(config["marker"], "w") as f:
                f.write(str(os.getpid()))
            time.sleep(600)  # hung: the gang's teardown kills this process
        value = torch.tensor([float(step)])
        dist.all_reduce(value)


def test_a_rank_hung_in_a_torch_collective_is_named_not_the_rank_that_timed_out(cluster,
                                                                               tmp_path):
    pytest.importorskip("torch")
    from airt.train.torch import TorchConfig, TorchTrainer
    marker = str(tmp_path / "hung")
    with pytest.raises(TrainingFailedError) as info:
        TorchTrainer(torch_hang_loop, train_loop_config={"marker": marker},
                     torch_config=TorchConfig(backend="gloo", timeout_s=5),
                     scaling_config=ScalingConfig(num_workers=2),
                     run_config=run_config(tmp_path)).fit()
    text = str(info.value)
    pid = open(marker).read()
    assert f"rank 1 (node " in text and f"pid {pid}) hung: it never reached a torch.distributed " \
        "collective, on which rank 0 passed the group's deadline" in text, text
    assert list(info.value.worker_failures) == [1]
