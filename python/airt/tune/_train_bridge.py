"""airt.train inside a Tune trial, as Ray 2.x's: `Tuner(trainer, param_space={"train_loop_config":
{...}})` runs one trainer per trial, and a trainer's fit() called inside a trial (or
airt.train.report called by a function trainable itself) hands rank 0's reports and the
committed checkpoints to that trial, as tune.report would.

Inside a trial, fit() keeps its run's folder in the trial's (`<trial>/<RunConfig.name or
"train">`, made afresh each time the trial starts), starts from the trial's checkpoint (after a
retry, a restore or a PBT exploit), and runs its ranks in the trial's placement group when that
group has a bundle for each of them (Tuner(trainer) gives it one: Ray's empty head bundle, then
the ranks' bundles), else reserves a group of its own beside the trial's resources."""

import copy
import os
import shutil
import threading

from airt.tune import session as _tune_session
from airt.tune.trainable import Checkpoint, PlacementGroupFactory


def current_trial():
    """The Tune session whose trainable runs on this thread, else None."""
    session = _tune_session._session
    if session is not None and session.thread is threading.current_thread():
        return session
    return None


def prepare_run_dir(trial, name):
    """The train run's folder inside the trial's; what an earlier start of the trial left there
    is removed (the trial's own checkpoint_NNNNNN folders keep what it reported)."""
    run_dir = os.path.join(trial.trial_dir, name or "train")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir, exist_ok=True)
    return run_dir


def group_for_gang(num_workers, bundle):
    """(the trial's placement group, the index of the ranks' first bundle) when the group's
    last num_workers bundles each hold a rank's bundle; else None."""
    from airt.util.placement_group import get_current_placement_group
    group = get_current_placement_group()
    if group is None:
        return None
    specs = group.bundle_specs
    if len(specs) < num_workers:
        return None
    first = len(specs) - num_workers
    for spec in specs[first:]:
        if any(spec.get(k, 0) + 1e-9 < v for k, v in bundle.items()):
            return None
    return group, first


class Forwarder:
    """Waited on beside the ranks (Gang.call_each): takes each report of the attempt from the
    coordinator and hands it to the trial (tune.report blocks until the tuner wants the next;
    a stopped trial's report raises, which ends fit() and its gang)."""

    def __init__(self, trial, coordinator, attempt):
        self._trial, self._coordinator, self._attempt = trial, coordinator, attempt
        self._index = 1
        self.ref = coordinator.next_report.remote(attempt, 1)

    def ready(self):
        import airt
        ref, self.ref = self.ref, None
        item = airt.get(ref)
        if item is None:
            return  # every rank returned: nothing more to take
        metrics, folder = item
        self._trial.report(metrics, Checkpoint(folder) if folder else None)
        self._index += 1
        self.ref = self._coordinator.next_report.remote(self._attempt, self._index)

    def drain(self):
        """The ranks returned: the reports not yet taken go to the trial."""
        while self.ref is not None:
            self.ready()


def trainer_trainable(trainer, param_space):
    """The function trainable of Tuner(trainer): each trial runs a copy of the trainer whose
    train_loop_config is the trainer's updated with the trial's config["train_loop_config"],
    in a placement group of Ray's shape (an empty head bundle for the trial's actor, then each
    rank's bundle, trainer_resources added to rank 0's)."""
    unknown = sorted(set(param_space) - {"train_loop_config"})
    if unknown:
        from airt import exceptions
        raise exceptions.UnimplementedError(
            f"Tuner(trainer, param_space=): only 'train_loop_config' is tuned, not {unknown}")
    if not isinstance(param_space.get("train_loop_config", {}), dict):
        raise TypeError("param_space['train_loop_config'] must be a dict")

    def train_loop_trial(config):
        run = copy.copy(trainer)
        run._config = {**trainer._config, **config.get("train_loop_config", {})}
        run.fit()

    train_loop_trial.__name__ = type(trainer).__name__
    train_loop_trial._airt_inner = trainer._loop  # its module travels by value (pickle_trainable)
    scaling = trainer._scaling
    ranks = [dict(trainer.bundle) for _ in range(scaling.num_workers)]
    for key, value in (scaling.trainer_resources or {}).items():
        ranks[0][key] = ranks[0].get(key, 0) + value
    train_loop_trial._airt_resources = PlacementGroupFactory(
        [{}] + ranks, strategy=scaling.placement_strategy)
    return train_loop_trial
