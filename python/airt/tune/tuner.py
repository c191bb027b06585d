"""Tuner: Ray Tune's entry point. Tuner(trainable, param_space=, tune_config=, run_config=)
.fit() runs the sweep on the cluster airt.init() joined (or starts) and returns a ResultGrid;
Tuner.restore(path, trainable) resumes an interrupted one."""

import copy
import datetime
import json
import os
import pickle

import airt
from airt.tune import experiment as ex
from airt.tune.config import RunConfig, TuneConfig
from airt.tune.controller import TuneController, trainable_name
from airt.tune.experiment import ERROR, PAUSED, PENDING, RUNNING, Trial
from airt.tune.schedulers import FIFOScheduler
from airt.tune.search import BasicVariantGenerator, Searcher, flatten_space, _is_grid
from airt.tune.trainable import Trainable


def _check_trainable(trainable):
    if _is_trainer(trainable):
        return
    if isinstance(trainable, type):
        if not issubclass(trainable, Trainable):
            raise TypeError(f"{trainable.__name__} is not a tune.Trainable subclass")
    elif not callable(trainable):
        raise TypeError("the trainable must be a function or a tune.Trainable subclass")


def _is_trainer(trainable):
    from airt.train.trainer import DataParallelTrainer
    return isinstance(trainable, DataParallelTrainer)


def _as_trainable(trainable, param_space):
    """A trainer (airt.train's DataParallelTrainer / TorchTrainer) becomes the function trainable
    that runs it per trial; anything else is the trainable."""
    if _is_trainer(trainable):
        from airt.tune._train_bridge import trainer_trainable
        return trainer_trainable(trainable, param_space)
    return trainable


class Tuner:
    """trainable: a function, a tune.Trainable subclass, or a trainer of airt.train (each
    trial runs the trainer with param_space["train_loop_config"] over its own)."""

    def __init__(self, trainable=None, *, param_space=None, tune_config=None, run_config=None,
                 _restored=None):
        _check_trainable(trainable)
        self._param_space = param_space or {}
        if not isinstance(self._param_space, dict):
            raise TypeError("param_space must be a dict")
        trainable = _as_trainable(trainable, self._param_space)
        self._trainable = trainable
        self._tune_config = tune_config or TuneConfig()
        self._run_config = run_config or RunConfig()
        if not isinstance(self._tune_config, TuneConfig):
            raise TypeError("tune_config must be a tune.TuneConfig")
        self._restored = _restored
        if _restored is None:
            name = self._run_config.name or \
                f"{trainable_name(trainable)}_{datetime.datetime.now():%Y-%m-%d_%H-%M-%S}"
            storage = self._run_config.storage_path or os.path.join("~", "airt_results")
            self._path = os.path.abspath(os.path.join(os.path.expanduser(storage), name))
        else:
            self._path = _restored["path"]

    @property
    def experiment_path(self):
        return self._path

    def fit(self):
        """Runs the sweep; a trial's error ends that trial (Result.error), not fit()."""
        if not airt.is_initialized():
            airt.init()
        tc, rc = self._tune_config, self._run_config
        if self._restored is None:
            searcher = tc.search_alg or BasicVariantGenerator()
            if not isinstance(searcher, Searcher):
                raise TypeError("TuneConfig(search_alg=) must be a tune.search.Searcher")
            if not isinstance(searcher, BasicVariantGenerator) and any(
                    _is_grid(leaf) for _, leaf in flatten_space(self._param_space)):
                raise ValueError("grid_search works with the basic variant generator only")
            searcher.set_search_properties(tc.metric, tc.mode, self._param_space,
                                           num_samples=tc.num_samples)
            trials = []
            os.makedirs(self._path, exist_ok=True)
            self._save_tuner()
        else:
            searcher, trials = self._restored["searcher"], self._restored["trials"]
        scheduler = (self._restored or {}).get("scheduler") or tc.scheduler or FIFOScheduler()
        if not scheduler.set_search_properties(tc.metric, tc.mode):
            raise ValueError("the scheduler's metric differs from TuneConfig's")
        controller = TuneController(self._trainable, self._param_space, tc, rc, self._path,
                                    searcher, scheduler, trials)
        if self._restored is not None:
            controller.created = self._restored["created"]
            controller.searcher_finished = self._restored["searcher_finished"]
        return controller.run()

    def _save_tuner(self):
        import cloudpickle
        state = {"param_space": self._param_space, "tune_config": self._tune_config,
                 "run_config": self._run_config,
                 "trainable_name": trainable_name(self._trainable)}
        ex.atomic_write(os.path.join(self._path, ex.TUNER_FILE), cloudpickle.dumps(state),
                        mode="wb")

    def get_results(self):
        """The ResultGrid of the experiment as its folder has it (after fit, or restore)."""
        from airt.tune.result import ResultGrid
        trials, _, _ = _load_trials(self._path)
        return ResultGrid(trials, self._path, self._tune_config.metric, self._tune_config.mode)

    @classmethod
    def can_restore(cls, path):
        path = os.path.expanduser(os.fspath(path))
        return os.path.exists(os.path.join(path, ex.STATE_FILE)) and \
            os.path.exists(os.path.join(path, ex.TUNER_FILE))

    @classmethod
    def restore(cls, path, trainable, resume_unfinished=True, resume_errored=False,
                restart_errored=False, param_space=None):
        """Resumes the experiment at `path`: finished trials are kept, unfinished ones resume
        from their latest checkpoints (from the start without one); errored trials stay errored
        unless resume_errored (from their checkpoint) or restart_errored (from the start). The
        search algorithm and the scheduler continue from their saved states (paused trials stay
        paused until the scheduler resumes them)."""
        _check_trainable(trainable)
        path = os.path.abspath(os.path.expanduser(os.fspath(path)))
        if not cls.can_restore(path):
            raise ValueError(f"{path} holds no airt.tune experiment to restore "
                             f"({ex.STATE_FILE} and {ex.TUNER_FILE} are missing)")
        with open(os.path.join(path, ex.TUNER_FILE), "rb") as f:
            state = pickle.load(f)
        trials, created, finished = _load_trials(path)
        scheduler = _load_part(path, ex.SCHEDULER_FILE)
        for t in trials:
            if t.status == PAUSED and scheduler is not None and resume_unfinished:
                continue  # its restored scheduler resumes it (from its checkpoint)
            if t.status in (RUNNING, PAUSED, PENDING):
                if not resume_unfinished:
                    t.status = ex.TERMINATED
                    continue
                t.status = PENDING
                ex.rewind(t) if t.checkpoint else _restart(t)
            elif t.status == ERROR and (resume_errored or restart_errored):
                t.status, t.error_msg = PENDING, None
                if restart_errored or not t.checkpoint:
                    _restart(t)
                else:
                    ex.rewind(t)
        searcher = _load_part(path, ex.SEARCHER_FILE)
        if searcher is None:
            raise ValueError(f"{path}: the search algorithm's state is missing or unreadable")
        tuner = cls(trainable, param_space=param_space or state["param_space"],
                    tune_config=copy.copy(state["tune_config"]),
                    run_config=state["run_config"],
                    _restored={"path": path, "trials": trials, "searcher": searcher,
                               "scheduler": scheduler, "created": created,
                               "searcher_finished": finished})
        return tuner


def _load_trials(path):
    with open(os.path.join(path, ex.STATE_FILE)) as f:
        state = json.load(f)
    trials = [Trial.from_state(s, path) for s in state["trials"]]
    return trials, state.get("created", len(trials)), state.get("searcher_finished", False)


def _load_part(path, name):
    """The searcher or scheduler pickled in the experiment folder, or None without one."""
    part = os.path.join(path, name)
    if not os.path.exists(part):
        return None
    with open(part, "rb") as f:
        return pickle.load(f)


def _restart(t):
    t.checkpoint = None
    t.checkpoints = []
    t.checkpoint_iteration = 0
    t.checkpoint_time = 0.0
    ex.rewind(t)
