"""Checkpoint files in the run's folder (storage_path/name), shared by the ranks, the
coordinator and fit():

    <run>/checkpoint_000003/...        the ranks' files, merged (each rank copies its part)
    <run>/.airt_train_state.json       the committed checkpoints with rank 0's metrics

A checkpoint is listed in the state file only once every rank's part is copied and flushed, and
the file is replaced atomically, so a crash mid-copy never leaves a torn checkpoint listed; a
folder not listed is left over from such a crash and is removed when the run resumes."""

import json
import os
import shutil
import threading
import uuid

STATE_FILE = ".airt_train_state.json"
_SNAPSHOT_MARK = ".airt-snapshot-"


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_durably(source, destination):
    """Copies the folder `source` into `destination` (merging with what other ranks put there),
    each file written to a temporary name, flushed to disk and renamed, so every file present is
    whole. Raises OSError."""
    os.makedirs(destination, exist_ok=True)
    for root, dirs, files in os.walk(source):
        relative = os.path.relpath(root, source)
        target_root = destination if relative == "." else os.path.join(destination, relative)
        for d in dirs:
            os.makedirs(os.path.join(target_root, d), exist_ok=True)
        for name in files:
            target = os.path.join(target_root, name)
            temporary = f"{target}.{uuid.uuid4().hex[:8]}.part"
            with open(os.path.join(root, name), "rb") as fin, open(temporary, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
                fout.flush()
                os.fsync(fout.fileno())
            os.replace(temporary, target)
        _fsync_dir(target_root)


def snapshot(source, move):
    """A private copy of the folder `source` on its own file system (beside it), for a
    background upload: `source` itself renamed there when `move` (the caller gives it up), else
    a copy. Its path; the uploader deletes it."""
    source = os.path.abspath(source).rstrip(os.sep)
    target = f"{source}{_SNAPSHOT_MARK}{uuid.uuid4().hex[:12]}"
    if move:
        try:
            os.rename(source, target)
            return target
        except OSError:
            pass  # another file system's mount point, or a busy folder: copy instead
    shutil.copytree(source, target)
    return target


def read_state(run_dir):
    """The run's committed checkpoints ({"checkpoints": [{"name", "metrics", "index"}], ...});
    an empty state when there is none yet."""
    path = os.path.join(run_dir, STATE_FILE)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"checkpoints": [], "next_index": 0}


def write_state(run_dir, state):
    """Replaces the state file atomically (temporary file, fsync, rename, fsync of the folder)."""
    path = os.path.join(run_dir, STATE_FILE)
    temporary = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    with open(temporary, "w") as f:
        json.dump(state, f, default=repr)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    _fsync_dir(run_dir)


def remove_unlisted(run_dir, state):
    """Removes checkpoint folders the state does not list (torn by a crash mid-copy)."""
    listed = {c["name"] for c in state["checkpoints"]}
    for name in os.listdir(run_dir):
        if name.startswith("checkpoint_") and name not in listed \
                and os.path.isdir(os.path.join(run_dir, name)):
            shutil.rmtree(os.path.join(run_dir, name), ignore_errors=True)


def checkpoints_to_keep(checkpoints, num_to_keep, attribute, order):
    """The names of the checkpoints num_to_keep keeps: the best `num_to_keep` by `attribute`
    (the most recent when None; a checkpoint without it counts as worst), and the latest."""
    if num_to_keep is None or len(checkpoints) <= num_to_keep:
        return {c["name"] for c in checkpoints}
    if attribute is None:
        ranked = list(reversed(checkpoints))
    else:
        sign = 1 if order == "max" else -1

        def score(c):
            value = c["metrics"].get(attribute)
            return (1, sign * value, c["index"]) if isinstance(value, (int, float)) \
                else (0, 0, c["index"])
        ranked = sorted(checkpoints, key=score, reverse=True)
    keep = {c["name"] for c in ranked[:num_to_keep]}
    keep.add(checkpoints[-1]["name"])
    return keep


class Uploader:
    """One rank's background copies: at most one in flight; start() waits for the previous one
    first. A failed copy is raised by the next start() or wait()."""

    def __init__(self):
        self._thread = None
        self._error = None

    def start(self, work):
        self.wait()

        def run():
            try:
                work()
            except BaseException as error:  # noqa: BLE001 (handed to the training thread)
                self._error = error
        self._thread = threading.Thread(target=run, name="airt-train-upload", daemon=True)
        self._thread.start()

    def wait(self):
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise RuntimeError(f"the background checkpoint upload failed: {error!r}") from error
