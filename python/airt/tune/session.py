"""Inside a trial: `report(metrics, checkpoint=)` and `get_checkpoint()`, as Ray Tune's (a
function trainable runs on a thread of its trial actor; report hands the result to the actor and
waits until the tuner asks for the next one, as Ray's function runner does)."""

import os
import shutil
import threading
import traceback

_local = threading.local()
_session = None  # the trial running in this process (one at a time per trial actor)


class _Stop(BaseException):
    """Raised inside report() when the tuner stops the trial: unwinds the trainable."""


class TrialContext:
    """get_context(): the trial's name, id, folder and resources (Ray's TuneContext)."""

    def __init__(self, session):
        self._s = session

    def get_trial_name(self):
        return self._s.trial_name

    def get_trial_id(self):
        return self._s.trial_id

    def get_trial_dir(self):
        return self._s.trial_dir

    def get_experiment_name(self):
        return self._s.experiment_name

    def get_trial_resources(self):
        return dict(self._s.resources)


class Session:
    """One run of a function trainable: its thread, and the hand-over of results."""

    def __init__(self, trial_id, trial_name, trial_dir, experiment_name, checkpoint, resources,
                 checkpoint_index):
        self.trial_id, self.trial_name, self.trial_dir = trial_id, trial_name, trial_dir
        self.experiment_name = experiment_name
        self.checkpoint = checkpoint
        self.resources = resources
        self.checkpoint_index = checkpoint_index
        self._cond = threading.Condition()
        self._item = None       # ("result", metrics, path) | ("done",) | ("error", tb)
        self._resume = False
        self._stopped = False
        self.thread = None

    def start(self, fn, config):
        def run():
            global _session
            _session = self
            try:
                fn(config)
                self._put(("done",))
            except _Stop:
                self._put(("done",))
            except BaseException:  # noqa: BLE001 (the trial's error, with its traceback)
                self._put(("error", traceback.format_exc()))
        self.thread = threading.Thread(target=run, name=f"trial-{self.trial_id}", daemon=True)
        self._resume = True
        self.thread.start()

    def _put(self, item):
        with self._cond:
            self._item = item
            self._cond.notify_all()

    def next(self):
        """Lets the trainable run to its next report (or its end) and returns it. A report made
        before this call (the first one, when the trainable reached it before the tuner asked)
        is returned without letting the trainable go on: it never runs ahead of the tuner, so a
        trial the scheduler stops runs no step past the result it was stopped on."""
        with self._cond:
            if self._item is None:
                self._resume = True
                self._cond.notify_all()
            while self._item is None:
                self._cond.wait()
            item, self._item = self._item, None
            return item

    def report(self, metrics, checkpoint):
        if threading.current_thread() is not self.thread:
            raise RuntimeError("tune.report() must be called from the trainable's own thread")
        path = None
        if checkpoint is not None:
            self.checkpoint_index += 1
            path = os.path.join(self.trial_dir, f"checkpoint_{self.checkpoint_index:06d}")
            if os.path.abspath(checkpoint.path) != path:
                shutil.copytree(checkpoint.path, path, dirs_exist_ok=True)
            from airt.tune.trainable import Checkpoint
            self.checkpoint = Checkpoint(path)
        with self._cond:
            self._resume = False
            self._item = ("result", dict(metrics), path)
            self._cond.notify_all()
            while not self._resume and not self._stopped:
                self._cond.wait()
            if self._stopped:
                raise _Stop()

    def stop(self, timeout=10.0):
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self.thread is not None:
            self.thread.join(timeout)


def report(metrics, *, checkpoint=None):
    """Reports one result of the trial (and a checkpoint folder, copied into the trial's
    folder). Blocks until the tuner wants the next one; returns nothing."""
    if not isinstance(metrics, dict):
        raise TypeError(f"tune.report takes a dict of metrics, not {type(metrics).__name__}")
    if _session is None:
        raise RuntimeError("tune.report() is called outside a Tune trial")
    _session.report(metrics, checkpoint)


def get_checkpoint():
    """The checkpoint the trial resumes from (after a failure, a restore, or a PBT exploit),
    or its latest reported one; None at a fresh start."""
    return None if _session is None else _session.checkpoint


def get_context():
    if _session is None:
        raise RuntimeError("tune.get_context() is called outside a Tune trial")
    return TrialContext(_session)
