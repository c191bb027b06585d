"""The trial actor: one per running trial (or reused across trials of one resource shape).
The tuner calls start(info), then next() once per result, and stop() to end a run early."""

import datetime
import os
import pickle
import socket
import time
import traceback

from airt.tune import session as _session_module
from airt.tune.trainable import Checkpoint, Trainable


class TrialRunner:
    def __init__(self, trainable_pickle):
        self._trainable = pickle.loads(trainable_pickle)  # cloudpickled by the tuner
        self._session = None
        self._instance = None
        self._info = None

    def start(self, info):
        """info: trial_id, trial_name, trial_dir, experiment_name, config, checkpoint (a folder
        or None), iteration and time_total to continue from, checkpoint_index,
        checkpoint_frequency, resources."""
        self.stop()
        self._info = info
        os.makedirs(info["trial_dir"], exist_ok=True)
        self._iteration = info.get("iteration", 0)
        self._time_base = info.get("time_total", 0.0)
        self._restored_iteration = self._iteration
        self._started = time.time()
        self._last = self._started
        self._done = False
        checkpoint = Checkpoint(info["checkpoint"]) if info.get("checkpoint") else None
        self._checkpoint_index = info.get("checkpoint_index", 0)
        if isinstance(self._trainable, type) and issubclass(self._trainable, Trainable):
            self._instance = None
            self._pending_checkpoint = checkpoint
        else:
            self._session = _session_module.Session(
                info["trial_id"], info["trial_name"], info["trial_dir"],
                info["experiment_name"], checkpoint, info.get("resources", {}),
                self._checkpoint_index)
            self._session.start(self._trainable, info["config"])
        return os.getpid()

    def next(self):
        """("result", metrics, checkpoint folder or None) | ("done",) | ("error", traceback)."""
        if self._done:
            return ("done",)
        if self._session is not None:
            item = self._session.next()
            if item[0] != "result":
                self._done = True
                return item
            return ("result", self._annotate(item[1], item[2]), item[2])
        try:
            return self._class_step()
        except BaseException:  # noqa: BLE001
            self._done = True
            return ("error", traceback.format_exc())

    def _class_step(self):
        info = self._info
        if self._instance is None:
            self._instance = self._trainable(dict(info["config"]))
            self._instance._iteration = self._iteration
            if self._pending_checkpoint is not None:
                path = self._pending_checkpoint.path
                state = os.path.join(path, "_dict_checkpoint.pkl")
                if os.path.exists(state):
                    with open(state, "rb") as f:
                        self._instance.load_checkpoint(pickle.load(f))
                else:
                    self._instance.load_checkpoint(path)
        metrics = self._instance.step()
        if not isinstance(metrics, dict):
            raise TypeError(f"{type(self._instance).__name__}.step() must return a dict")
        self._instance._iteration += 1
        path = None
        frequency = info.get("checkpoint_frequency") or 0
        if frequency and (self._iteration + 1) % frequency == 0:
            path = self.save()
        result = self._annotate(metrics, path)
        if metrics.get("done"):
            self._done = True  # the result goes out; the next call says done
        return ("result", result, path)

    def save(self):
        """A class trainable's checkpoint now, into the trial's folder; its path."""
        if self._instance is None:
            return None
        self._checkpoint_index += 1
        path = os.path.join(self._info["trial_dir"], f"checkpoint_{self._checkpoint_index:06d}")
        os.makedirs(path, exist_ok=True)
        state = self._instance.save_checkpoint(path)
        if isinstance(state, dict):
            with open(os.path.join(path, "_dict_checkpoint.pkl"), "wb") as f:
                pickle.dump(state, f)
        return path

    def _annotate(self, metrics, checkpoint_path):
        now = time.time()
        self._iteration += 1
        result = dict(metrics)
        result.update(
            training_iteration=self._iteration,
            time_this_iter_s=now - self._last,
            time_total_s=self._time_base + (now - self._started),
            time_since_restore=now - self._started,
            iterations_since_restore=self._iteration - self._restored_iteration,
            timestamp=int(now),
            date=datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S"),
            pid=os.getpid(),
            hostname=socket.gethostname(),
            trial_id=self._info["trial_id"],
            done=bool(metrics.get("done", False)),
        )
        if checkpoint_path:
            result["checkpoint_dir_name"] = os.path.basename(checkpoint_path)
        self._last = now
        return result

    def stop(self):
        """Ends the current run (a function trainable's report raises inside it)."""
        if self._session is not None:
            self._session.stop()
            self._session = None
        if self._instance is not None:
            try:
                self._instance.cleanup()
            finally:
                self._instance = None
        return True

    def reset(self, config):
        """Whether this actor may run another trial (a class trainable's reset_config)."""
        if isinstance(self._trainable, type):
            return False
        return True
