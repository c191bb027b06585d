"""The run's coordinator: an async actor on the driver's node that holds report()'s barrier,
keeps rank 0's metrics, and commits a checkpoint once every rank's part of it is copied.

Each rank's report() calls arrive(); the last rank to arrive names the checkpoint (if any rank
has one) and releases them all. Ranks with a part copy it into that folder and call part_done();
when the last part is done the checkpoint is listed in the run's state file (the commit) and
num_to_keep prunes. Calls carry the attempt number: a restarted gang gets a new one, and calls
of an older attempt are refused. It also watches the gang's nodes for drains (_preemption.py):
each barrier's answer says whether one of them is draining.

Inside a Tune trial (`forward`), the trial's thread takes each completed report, once its
checkpoint is committed, with next_report() and hands it to tune.report; a rank's report number
n waits until the trial took number n - 1, so the ranks run at most one report ahead of the
tuner (a trial the scheduler stops runs no further)."""

import asyncio
import os
import shutil

from airt.train import _storage
from airt.train._preemption import NodeWatch


class StaleAttempt(RuntimeError):
    pass


class Coordinator:
    def __init__(self, run_dir, world_size, checkpoint_config, forward=False):
        self._run_dir = run_dir
        self._world_size = world_size
        self._keep = checkpoint_config  # (num_to_keep, score attribute, score order)
        self._state = _storage.read_state(run_dir)
        _storage.remove_unlisted(run_dir, self._state)
        self._attempt = -1
        self._barriers = {}     # report index -> {"arrived": {rank: info}, "event", "result"}
        self._pending = {}      # checkpoint name -> {"waiting": set of ranks, "entry"}
        self._finished = {}     # rank -> reports it made before its loop returned
        self._metrics = None
        self._reports = 0
        self._forward = forward
        self._log = []          # this attempt's completed reports, in order (forward mode)
        self._taken = 0         # how many of them the trial took
        self._changed = None    # set (and replaced) when the log, _taken or the attempt change
        self._watch = NodeWatch()
        self._commits = {}      # checkpoint name -> asyncio.Event set once it is committed

    async def begin_attempt(self, attempt):
        """Starts attempt `attempt`: forgets the barriers and uncommitted checkpoints of the
        previous one (their folders are removed) and returns the latest committed checkpoint's
        name (None at a fresh start)."""
        self._attempt = attempt
        for barrier in self._barriers.values():
            barrier["result"] = StaleAttempt(f"attempt {attempt} started")
            barrier["event"].set()
        for event in self._commits.values():
            event.set()  # their waiters see the attempt is over
        self._barriers, self._pending, self._finished, self._commits = {}, {}, {}, {}
        self._log, self._taken = [], 0
        self._notify()
        self._watch.watch({})
        _storage.remove_unlisted(self._run_dir, self._state)
        return self._state["checkpoints"][-1]["name"] if self._state["checkpoints"] else None

    async def arrive(self, attempt, rank, index, metrics, checkpoint):
        """Rank `rank`'s report number `index` (checkpoint: None, or ("upload",) or ("path", p)
        for NO_UPLOAD). Returns (the checkpoint's folder name or None, the drain of a gang node as
        PreemptionInfo fields or None) once every rank arrived, the same to every rank. Raises
        when the attempt is over or a rank's loop returned with fewer reports."""
        self._check(attempt)
        while self._forward and self._taken < index - 1:
            await self._wait_for_change()
            self._check(attempt)
        barrier = self._barriers.setdefault(index, {"arrived": {}, "event": asyncio.Event(),
                                                    "result": None})
        barrier["arrived"][rank] = (metrics, checkpoint)
        self._fail_if_a_rank_finished(index)
        if len(barrier["arrived"]) == self._world_size:
            barrier["result"] = self._complete(index, barrier["arrived"])
            barrier["preemption"] = self._watch.check()
            barrier["event"].set()
        await barrier["event"].wait()
        result = barrier["result"]
        if isinstance(result, BaseException):
            raise result
        return result, barrier.get("preemption")

    def _complete(self, index, arrived):
        self._reports += 1
        self._metrics = arrived[0][0]
        parts = {r: part for r, (_, part) in arrived.items() if part is not None}
        self._barriers.pop(index - 1, None)
        if not parts:
            self._log_report(None, None)
            return None
        number = self._state["next_index"]
        self._state["next_index"] = number + 1
        name = f"checkpoint_{number:06d}"
        given = [c[1] for r, c in sorted(parts.items()) if c[0] == "path"]
        entry = {"name": os.path.relpath(given[0], self._run_dir) if given else name,
                 "metrics": self._metrics, "index": number}
        waiting = {r for r, c in parts.items() if c[0] == "upload"}
        self._pending[name] = {"waiting": waiting, "entry": entry}
        self._log_report(name, entry["name"])
        if not waiting:
            self._commit(name)
        return name

    async def part_done(self, attempt, name, rank):
        """Rank `rank` copied its part of checkpoint `name`; the last part commits it."""
        self._check(attempt)
        pending = self._pending.get(name)
        if pending is None:
            raise ValueError(f"no checkpoint {name} is waiting for rank {rank}")
        pending["waiting"].discard(rank)
        if not pending["waiting"]:
            self._commit(name)
        return True

    async def watch_nodes(self, attempt, ranks_of):
        """Attempt `attempt`'s gang runs on these nodes ({node id: world ranks})."""
        self._check(attempt)
        self._watch.watch(ranks_of)
        return True

    async def preemption_info(self, attempt):
        """The drain of one of the gang's nodes (PreemptionInfo's fields), or None."""
        self._check(attempt)
        return self._watch.check()

    async def committed(self, attempt, name):
        """Returns once checkpoint `name` is committed (every rank's part copied)."""
        self._check(attempt)
        if any(c["name"] == name for c in self._state["checkpoints"]):
            return True
        if name not in self._pending:
            raise ValueError(f"no checkpoint {name} is waiting to be committed")
        await self._commits.setdefault(name, asyncio.Event()).wait()
        self._check(attempt)
        return True

    def _commit(self, name):
        self._commits.pop(name, asyncio.Event()).set()
        entry = self._pending.pop(name)["entry"]
        for item in self._log:
            if item["key"] == name:
                item["committed"] = True
                self._notify()
        checkpoints = self._state["checkpoints"] + [entry]
        keep = _storage.checkpoints_to_keep(checkpoints, *self._keep)
        self._state["checkpoints"] = [c for c in checkpoints if c["name"] in keep]
        _storage.write_state(self._run_dir, self._state)
        for c in checkpoints:
            if c["name"] not in keep:
                shutil.rmtree(os.path.join(self._run_dir, c["name"]), ignore_errors=True)

    async def finished(self, attempt, rank, reports):
        """Rank `rank`'s loop returned after `reports` reports: ranks waiting at a later report
        would wait forever, so they are failed."""
        self._check(attempt)
        self._finished[rank] = reports
        self._notify()
        for index in list(self._barriers):
            self._fail_if_a_rank_finished(index)
        return True

    def _fail_if_a_rank_finished(self, index):
        barrier = self._barriers.get(index)
        if barrier is None or barrier["event"].is_set():
            return
        for rank, reports in self._finished.items():
            if reports < index:
                barrier["result"] = RuntimeError(
                    f"report() is a barrier that every rank must call equally often: rank "
                    f"{rank}'s loop returned after {reports} reports while ranks "
                    f"{sorted(barrier['arrived'])} called report number {index}")
                barrier["event"].set()
                return

    def _log_report(self, key, folder):
        if self._forward:
            self._log.append({"metrics": self._metrics, "key": key, "folder": folder,
                              "committed": key is None})
            self._notify()

    async def next_report(self, attempt, index):
        """Forward mode: the trial took reports 1..index - 1; returns report number `index` of
        this attempt as (rank 0's metrics, its checkpoint folder or None) once it is complete
        and its checkpoint committed, or None once every rank's loop returned without it."""
        self._check(attempt)
        if index - 1 > self._taken:
            self._taken = index - 1
            self._notify()
        while True:
            if len(self._log) >= index:
                item = self._log[index - 1]
                if item["committed"]:
                    folder = item["folder"]
                    return item["metrics"], os.path.join(self._run_dir, folder) if folder \
                        else None
            elif len(self._finished) == self._world_size:
                return None
            await self._wait_for_change()
            self._check(attempt)

    async def _wait_for_change(self):
        if self._changed is None:
            self._changed = asyncio.Event()
        await self._changed.wait()

    def _notify(self):
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _check(self, attempt):
        if attempt != self._attempt:
            raise StaleAttempt(f"attempt {attempt} is over (now {self._attempt})")

    async def snapshot(self):
        """The run's metrics so far, report count, and committed checkpoints."""
        return {"metrics": self._metrics, "reports": self._reports,
                "checkpoints": list(self._state["checkpoints"])}
