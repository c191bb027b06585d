"""A trial's state and its folder (params.json, result.json as one JSON line per report,
progress.csv, error.txt, checkpoint_NNNNNN/), and the experiment's state for Tuner.restore."""

import csv
import json
import math
import os
import shutil

from airt.tune.trainable import Checkpoint

PENDING, RUNNING, PAUSED, TERMINATED, ERROR = "PENDING", "RUNNING", "PAUSED", "TERMINATED", \
    "ERROR"
STATE_FILE = "experiment_state.json"
TUNER_FILE = "tuner.pkl"
SEARCHER_FILE = "searcher-state.pkl"
SCHEDULER_FILE = "scheduler-state.pkl"


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if hasattr(value, "item"):  # numpy scalars
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    return repr(value)


def flatten(d, prefix=""):
    out = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "/"))
        else:
            out[name] = value
    return out


def atomic_write(path, data, mode="w"):
    tmp = path + ".tmp"
    with open(tmp, mode) as f:
        f.write(data)
    os.replace(tmp, path)


class Trial:
    """One configuration's run: status, results, checkpoints, failures."""

    def __init__(self, trial_id, trainable_name, config, experiment_path, index, dirname=None):
        self.trial_id = trial_id
        self.trainable_name = trainable_name
        self.config = config
        self.placement_group = None  # a PlacementGroupFactory trial's group while it runs
        self.index = index
        self.experiment_tag = str(index)
        self.status = PENDING
        self.local_path = os.path.join(experiment_path,
                                       dirname or f"{trainable_name}_{trial_id}")
        self.results = []
        self.last_result = {}
        self.checkpoint = None
        self.checkpoints = []        # [(path, result)] kept, oldest first
        self.checkpoint_index = 0
        self.checkpoint_iteration = 0  # training_iteration / time at the latest checkpoint
        self.checkpoint_time = 0.0
        self.num_failures = 0
        self.error_msg = None
        self.stopped_early = False   # stopped by the scheduler or a stopper before its end
        self.runner = None
        self.inflight = None
        self.stop_requested = False
        self.start_time = None
        self._files = None
        self._csv_fields = None

    def __repr__(self):
        return f"{self.trainable_name}_{self.trial_id}"

    @property
    def name(self):
        return str(self)

    # ---- the folder --------------------------------------------------------------------------
    def open(self):
        os.makedirs(self.local_path, exist_ok=True)
        atomic_write(os.path.join(self.local_path, "params.json"),
                     json.dumps(_jsonable(self.config), indent=2, sort_keys=True))
        result_json = open(os.path.join(self.local_path, "result.json"), "a")
        csv_path = os.path.join(self.local_path, "progress.csv")
        if os.path.exists(csv_path) and os.path.getsize(csv_path) > 0:
            with open(csv_path) as f:
                self._csv_fields = next(csv.reader(f), None)
        progress = open(csv_path, "a", newline="")
        self._files = (result_json, progress)

    def write_result(self, result):
        if self._files is None:
            self.open()
        result_json, progress = self._files
        result_json.write(json.dumps(_jsonable(result)) + "\n")
        row = {k: v for k, v in flatten(result).items() if not k.startswith("config/")}
        if self._csv_fields is None:
            self._csv_fields = list(row)
            csv.writer(progress).writerow(self._csv_fields)
        csv.writer(progress).writerow([_jsonable(row.get(k, "")) for k in self._csv_fields])
        result_json.flush()
        progress.flush()

    def close(self):
        if self._files:
            for f in self._files:
                f.close()
            self._files = None

    def write_error(self, text):
        os.makedirs(self.local_path, exist_ok=True)
        with open(os.path.join(self.local_path, "error.txt"), "a") as f:
            f.write(text + "\n")

    # ---- checkpoints -------------------------------------------------------------------------
    def add_checkpoint(self, path, result, checkpoint_config):
        self.checkpoint = Checkpoint(path)
        self.checkpoint_iteration = result.get("training_iteration", 0)
        self.checkpoint_time = result.get("time_total_s", 0.0)
        self.checkpoints.append((path, result))
        keep = checkpoint_config.num_to_keep if checkpoint_config else None
        if keep is None or len(self.checkpoints) <= keep:
            return
        attr = checkpoint_config.checkpoint_score_attribute
        candidates = self.checkpoints[:-1]  # never the latest: a retry resumes from it
        if attr:
            sign = 1 if checkpoint_config.checkpoint_score_order == "max" else -1
            worst = min(candidates, key=lambda c: sign * float(c[1].get(attr, -math.inf * sign)))
        else:
            worst = candidates[0]
        self.checkpoints.remove(worst)
        shutil.rmtree(worst[0], ignore_errors=True)

    # ---- state for restore -------------------------------------------------------------------
    def state(self):
        return {
            "trial_id": self.trial_id, "trainable_name": self.trainable_name,
            "config": self.config, "index": self.index, "status": self.status,
            "local_path": self.local_path, "last_result": _jsonable(self.last_result),
            "checkpoint": self.checkpoint.path if self.checkpoint else None,
            "checkpoints": [p for p, _ in self.checkpoints],
            "checkpoint_index": self.checkpoint_index,
            "checkpoint_iteration": self.checkpoint_iteration,
            "checkpoint_time": self.checkpoint_time,
            "num_failures": self.num_failures, "error_msg": self.error_msg,
            "stopped_early": self.stopped_early,
        }

    @classmethod
    def from_state(cls, s, experiment_path):
        t = cls(s["trial_id"], s["trainable_name"], s["config"], experiment_path, s["index"],
                dirname=os.path.basename(s["local_path"]))
        t.status = s["status"]
        t.last_result = s["last_result"]
        t.checkpoint = Checkpoint(s["checkpoint"]) if s["checkpoint"] else None
        t.checkpoints = [(p, {}) for p in s.get("checkpoints", [])]
        t.checkpoint_index = s["checkpoint_index"]
        t.checkpoint_iteration = s["checkpoint_iteration"]
        t.checkpoint_time = s["checkpoint_time"]
        t.num_failures = s["num_failures"]
        t.error_msg = s["error_msg"]
        t.stopped_early = s.get("stopped_early", False)
        path = os.path.join(t.local_path, "result.json")
        if os.path.exists(path):
            with open(path) as f:
                t.results = [json.loads(line) for line in f if line.strip()]
        return t


def rewind(trial):
    """Drops the results after the trial's checkpoint (a run resumed from it reports them
    again), in memory and in its result.json and progress.csv."""
    keep = [r for r in trial.results
            if r.get("training_iteration", 0) <= trial.checkpoint_iteration]
    trial.close()
    trial.results = []
    for name in ("result.json", "progress.csv"):
        path = os.path.join(trial.local_path, name)
        if os.path.exists(path):
            os.remove(path)
    trial._csv_fields = None
    for r in keep:
        trial.write_result(r)
        trial.results.append(r)
    trial.last_result = keep[-1] if keep else {}
