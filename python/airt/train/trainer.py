"""DataParallelTrainer, as Ray Train 2.60's (V2): runs train_loop_per_worker on a gang of ranks,
restarts the gang from the latest complete checkpoint when a rank fails, and returns a Result.

fit() runs on the driver: it makes the run's folder, checks that every rank's node reaches it,
starts the coordinator (an actor on the driver's node holding report()'s barrier) and then, per
attempt: reserve the gang, give each rank its environment, run the loop on every rank, and wait
for all of them or the first failure (a rank's exception, or its process or node dying). After a
failure the whole gang is killed and its bundles given back; a new gang resumes from the latest
checkpoint whose every part was copied, until FailureConfig.max_failures is spent."""

import datetime
import inspect
import os
import uuid

from airt.train import _gang, _preemption
from airt.train.config import RunConfig, ScalingConfig
from airt.train.result import Result, TrainingFailedError, WorkerGroupError
from airt.tune.trainable import Checkpoint


def _run_loop(loop, config, info, coordinator, checkpoint_path, shards, torch_backend):
    """On a rank: runs the user's loop inside a training session; its return value."""
    from airt.train import session as session_module
    session = session_module.Session(info, coordinator,
                                     Checkpoint(checkpoint_path) if checkpoint_path else None,
                                     shards)
    session_module._session = session
    try:
        takes_config = len(inspect.signature(loop).parameters) > 0
        value = loop(config) if takes_config else loop()
        session.finish()
        return value
    finally:
        session_module._session = None
        if torch_backend:
            import torch.distributed as dist
            if dist.is_initialized():
                dist.destroy_process_group()


class DataParallelTrainer:
    """Runs train_loop_per_worker(train_loop_config) (or with no argument) on
    scaling_config.num_workers ranks; with no framework set up (TorchTrainer initialises
    torch.distributed). datasets: {name: a dataset, or a function making one}; each needs
    streaming_split(n, equal=True), whose i-th iterator rank i gets from get_dataset_shard.
    resume_from_checkpoint: the checkpoint the first attempt starts from when the run has none."""

    _torch_backend = None  # TorchTrainer: "auto", "gloo" or "nccl"

    def __init__(self, train_loop_per_worker, *, train_loop_config=None, backend_config=None,
                 scaling_config=None, run_config=None, datasets=None, dataset_config=None,
                 resume_from_checkpoint=None, metadata=None):
        if not callable(train_loop_per_worker):
            raise TypeError("train_loop_per_worker must be a function")
        if len(inspect.signature(train_loop_per_worker).parameters) > 1:
            raise ValueError("train_loop_per_worker takes no argument or one (the config)")
        self._loop = train_loop_per_worker
        self._config = train_loop_config if train_loop_config is not None else {}
        self._scaling = scaling_config or ScalingConfig()
        self._run = run_config or RunConfig()
        if not isinstance(self._scaling, ScalingConfig):
            raise TypeError("scaling_config must be an airt.train.ScalingConfig")
        if not isinstance(self._run, RunConfig):
            raise TypeError("run_config must be an airt.train.RunConfig")
        self._datasets = dict(datasets or {})
        for name, ds in self._datasets.items():
            if not callable(ds) and not hasattr(ds, "streaming_split"):
                raise TypeError(f"datasets[{name!r}] has no streaming_split(n, equal=True)")
        if dataset_config is not None:
            from airt import exceptions
            raise exceptions.UnimplementedError("dataset_config= is not built: every dataset "
                                                "is split evenly among the ranks")
        self._resume_from = resume_from_checkpoint
        self._metadata = dict(metadata or {})
        self.bundle = self._scaling.bundle()  # checks the resources now, not in fit()

    def fit(self):
        """Trains to the end; the Result. Raises TrainingFailedError when storage_path is not
        reachable from a rank's node, or when the ranks failed more than max_failures times."""
        import airt
        from airt.tune import _train_bridge
        run = self._run
        trial = _train_bridge.current_trial()  # inside a Tune trial: reports go to it
        resume_from = self._resume_from
        if trial is not None:
            run_dir = _train_bridge.prepare_run_dir(trial, run.name)
            name = os.path.basename(run_dir)
            resume_from = trial.checkpoint or resume_from
        else:
            name = run.name or datetime.datetime.now().strftime("airt_train_%Y-%m-%d_%H-%M-%S")
            storage = os.path.abspath(os.path.expanduser(os.fspath(
                run.storage_path or "~/airt_results")))
            run_dir = os.path.join(storage, name)
            os.makedirs(run_dir, exist_ok=True)
        keep = run.checkpoint_config
        coordinator = _start_coordinator(
            run_dir, self._scaling.num_workers,
            (keep.num_to_keep, keep.checkpoint_score_attribute, keep.checkpoint_score_order),
            trial is not None)
        failures, preemptions, attempt, error, value = 0, 0, 0, None, None
        try:
            while True:
                outcome = self._attempt(attempt, coordinator, run_dir, name, trial, resume_from)
                if not isinstance(outcome, _gang.GangFailure):
                    value = outcome
                    break
                if getattr(outcome, "preempted", False):
                    preemptions += 1
                    limit = run.failure_config.max_preemption_failures
                    if limit != -1 and preemptions > limit:
                        message = (f"{outcome} (a node drain, after {preemptions - 1} restarts "
                                   f"after drains; FailureConfig(max_preemption_failures="
                                   f"{limit}))")
                        error = WorkerGroupError(message, {outcome.rank: outcome.cause})
                        break
                    _preemption.wait_for_drained_nodes(outcome.gang_nodes, outcome.preemption)
                    attempt += 1
                    continue
                failures += 1
                limit = run.failure_config.max_failures
                if limit != -1 and failures > limit:
                    message = (f"{outcome} (after {failures - 1} restarts; "
                               f"FailureConfig(max_failures={limit}))")
                    error = WorkerGroupError(message, {outcome.rank: outcome.cause})
                    break
                attempt += 1
            state = airt.get(coordinator.snapshot.remote())
        finally:
            airt.kill(coordinator)
        kept = [(Checkpoint(os.path.join(run_dir, c["name"])), c["metrics"])
                for c in state["checkpoints"]]
        frame = None
        if kept:
            try:
                import pandas
                frame = pandas.DataFrame([m for _, m in kept])
            except ImportError:
                frame = None
        result = Result(metrics=state["metrics"], checkpoint=kept[-1][0] if kept else None,
                        error=error, path=run_dir, metrics_dataframe=frame,
                        best_checkpoints=kept, return_value=value)
        if error is not None:
            raise error
        return result

    def _attempt(self, attempt, coordinator, run_dir, name, trial, resume_from):
        """One gang's run: rank 0's return value, or the GangFailure that ended it. In a Tune
        trial (`trial`, its session) the reports go to it as they come."""
        import airt
        from airt import exceptions
        from airt.tune import _train_bridge
        group = _train_bridge.group_for_gang(self._scaling.num_workers, self.bundle) \
            if trial is not None else None
        gang = _gang.Gang(self._scaling.num_workers, self.bundle,
                          self._scaling.placement_strategy, self._run.worker_runtime_env,
                          self._scaling.label_selectors(), group=group)
        try:
            try:
                gang.start()
            except _gang.GangFailure as failure:
                return failure
            except exceptions.InfeasibleError as error:
                raise TrainingFailedError(f"the gang cannot be reserved: {error}") from None
            self._check_storage(gang, run_dir)
            latest = airt.get(coordinator.begin_attempt.remote(attempt))
            ranks_of = _preemption.gang_nodes(gang.ranks)
            airt.get(coordinator.watch_nodes.remote(attempt, ranks_of))
            checkpoint = os.path.join(run_dir, latest) if latest else (
                resume_from.path if resume_from is not None else None)
            try:
                gang.setup(self._torch_backend, getattr(self, "_timeout_s", 1800))
                shards = self._shards(len(gang.ranks))
                args = []
                for r in gang.ranks:
                    info = dict(world_rank=r["world_rank"], world_size=len(gang.ranks),
                                local_rank=r["local_rank"],
                                local_world_size=r["local_world_size"],
                                node_rank=r["node_rank"], experiment_name=name, run_dir=run_dir,
                                attempt=attempt, metadata=self._metadata)
                    args.append((self._loop, self._config, info, coordinator, checkpoint,
                                 {k: v[r["world_rank"]] for k, v in shards.items()},
                                 self._torch_backend))
                forwarder = _train_bridge.Forwarder(trial, coordinator, attempt) \
                    if trial is not None else None
                return gang.run(_run_loop, args, beside=forwarder)[0]
            except _gang.GangFailure as failure:
                return _preemption.classify(failure, coordinator, attempt, ranks_of)
        finally:
            gang.shutdown()

    def _shards(self, n):
        shards = {}
        for key, ds in self._datasets.items():
            if callable(ds) and not hasattr(ds, "streaming_split"):
                ds = ds()
            shards[key] = ds.streaming_split(n, equal=True)
        return shards

    @staticmethod
    def _check_storage(gang, run_dir):
        import airt
        token_name = f".airt_storage_check_{uuid.uuid4().hex[:12]}"
        token = uuid.uuid4().hex
        path = os.path.join(run_dir, token_name)
        with open(path, "w") as f:
            f.write(token)
        try:
            answers = airt.get([a.check_storage.remote(run_dir, token_name, token)
                                for a in gang.actors])
        finally:
            os.remove(path)
        for r, answer in zip(gang.ranks, answers):
            if answer:
                raise TrainingFailedError(
                    f"storage_path {os.path.dirname(run_dir)} is not reachable from node "
                    f"{r['node_id']} ({r['ip']}) of rank {r['world_rank']}: {answer}; use a "
                    f"folder every node mounts")


_coordinator = None


def _coordinator_actor():
    global _coordinator
    if _coordinator is None:
        import airt
        from airt.train._coordinator import Coordinator
        _coordinator = airt.remote(num_cpus=0, max_restarts=0)(Coordinator)
    return _coordinator


def _start_coordinator(*args, tries=3):
    """The run's coordinator, once it answers; one whose process died while starting (nothing
    of the run is in it yet) is started again, up to `tries` times."""
    import airt
    from airt import exceptions
    for attempt in range(tries):
        coordinator = _coordinator_actor().options(**_on_this_node()).remote(*args)
        try:
            airt.get(coordinator.snapshot.remote())
            return coordinator
        except exceptions.RayActorError:
            if attempt == tries - 1:
                raise


def _on_this_node():
    import airt
    from airt.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    node = airt.get_runtime_context().get_node_id()
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=True)} if node \
        else {}
