"""airt.cancel (ray.cancel) against the session's local cluster (2 CPUs): queued tasks are
dropped, running ones interrupted (KeyboardInterrupt, also out of time.sleep) or, with force,
their worker process killed; their gets raise TaskCancelledError. Tasks leave marker files so
the tests see what started, what was interrupted and what never ran. Actor calls: a queued one
is dropped, a running async one's coroutine cancelled, a running sync one interrupted; the actor
lives on; force raises ValueError."""

import os
import time

import pytest

import airt
from airt import exceptions


def wait_for(condition, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


# The remote functions below are pickled by value (the workers cannot import this file), so each
# defines what it uses itself.


@airt.remote(max_retries=0)
def sleeper(started, interrupted, seconds):
    """Marks `started` with its pid, sleeps; marks `interrupted` if a KeyboardInterrupt ends it."""
    import os
    import time

    def write(path, text):
        with open(path + ".partial", "w") as f:
            f.write(text)
        os.rename(path + ".partial", path)

    write(started, str(os.getpid()))
    try:
        time.sleep(seconds)
    except KeyboardInterrupt:
        write(interrupted, "interrupted")
        raise
    return seconds


@airt.remote
def mark(path):
    with open(path, "w") as f:
        f.write("ran")
    return "ran"


@airt.remote(max_retries=0)
def parent(started, child_started, child_interrupted):
    """Submits a long sleeper and waits for it: cancelling this task must reach the child."""
    import airt
    with open(started, "w") as f:
        f.write("parent")
    return airt.get(sleeper.remote(child_started, child_interrupted, 60))


def test_queued_tasks_are_dropped_and_never_run(cluster, tmp_path):
    started = str(tmp_path / "started")
    busy = sleeper.remote(started, str(tmp_path / "interrupted"), 60)
    assert wait_for(lambda: os.path.exists(started)), "the sleeper never started"
    # More work than the 2 CPUs take: one task queued behind the sleeper on its worker (tasks are
    # pipelined to a leased worker), one waiting for a lease of 2 CPUs.
    behind, waiting = str(tmp_path / "behind"), str(tmp_path / "waiting")
    queued = [mark.remote(behind), mark.options(num_cpus=2).remote(waiting)]
    begin = time.monotonic()
    for ref in queued:
        airt.cancel(ref)
    for ref in queued:
        with pytest.raises(exceptions.TaskCancelledError):
            airt.get(ref, timeout=10)
    assert time.monotonic() - begin < 2
    airt.cancel(busy)  # frees the CPU
    with pytest.raises(exceptions.TaskCancelledError):
        airt.get(busy, timeout=10)
    # Tasks of both shapes run again; the cancelled ones never did.
    assert airt.get(mark.remote(str(tmp_path / "after-1")), timeout=60) == "ran"
    assert airt.get(mark.options(num_cpus=2).remote(str(tmp_path / "after-2")), timeout=60) == "ran"
    assert not os.path.exists(behind)
    assert not os.path.exists(waiting)


def test_a_running_task_is_interrupted_out_of_time_sleep(cluster, tmp_path):
    started, interrupted = str(tmp_path / "started"), str(tmp_path / "interrupted")
    ref = sleeper.remote(started, interrupted, 60)
    assert wait_for(lambda: os.path.exists(started)), "the sleeper never started"
    begin = time.monotonic()
    airt.cancel(ref)
    with pytest.raises(exceptions.TaskCancelledError) as caught:
        airt.get(ref, timeout=10)
    assert time.monotonic() - begin < 2
    assert isinstance(caught.value, exceptions.RayError)
    # The task itself got the KeyboardInterrupt (its time.sleep(60) ended), so its worker is free.
    assert wait_for(lambda: os.path.exists(interrupted), timeout=10), "the task ran on"
    worker = int(open(started).read())
    os.kill(worker, 0)  # not killed: only interrupted
    assert airt.get([mark.remote(str(tmp_path / f"next-{i}")) for i in range(4)],
                    timeout=60) == ["ran"] * 4


def test_force_cancel_kills_the_worker(cluster, tmp_path):
    started, interrupted = str(tmp_path / "started"), str(tmp_path / "interrupted")
    ref = sleeper.remote(started, interrupted, 60)
    assert wait_for(lambda: os.path.exists(started)), "the sleeper never started"
    worker = int(open(started).read())
    begin = time.monotonic()
    airt.cancel(ref, force=True)
    with pytest.raises(exceptions.TaskCancelledError):
        airt.get(ref, timeout=10)
    assert time.monotonic() - begin < 5

    def gone():
        try:
            os.kill(worker, 0)
            return False
        except ProcessLookupError:
            return True

    assert wait_for(gone, timeout=10), f"worker {worker} still runs"
    assert not os.path.exists(interrupted)  # killed, not interrupted
    assert airt.get(mark.remote(str(tmp_path / "after")), timeout=60) == "ran"


def test_cancel_reaches_the_tasks_a_task_submitted(cluster, tmp_path):
    started = str(tmp_path / "parent")
    child_started, child_interrupted = str(tmp_path / "child"), str(tmp_path / "child-int")
    ref = parent.remote(started, child_started, child_interrupted)
    assert wait_for(lambda: os.path.exists(child_started)), "the child never started"
    airt.cancel(ref)  # recursive by default
    with pytest.raises(exceptions.TaskCancelledError):
        airt.get(ref, timeout=10)
    assert wait_for(lambda: os.path.exists(child_interrupted), timeout=10), "the child ran on"


def test_a_finished_task_is_left_alone(cluster, tmp_path):
    ref = mark.remote(str(tmp_path / "done"))
    assert airt.get(ref, timeout=60) == "ran"
    airt.cancel(ref)
    airt.cancel(ref, force=True)
    assert airt.get(ref) == "ran"


def test_cancel_takes_only_task_returns(cluster):
    with pytest.raises(TypeError):
        airt.cancel("not a ref")
    with pytest.raises(exceptions.RayError):
        airt.cancel(airt.put(1))


# Actor method calls: cancel never kills the actor. The actors record what their methods saw, and
# another call reads it back.


@airt.remote
class AsyncSleeper:
    """Its sleep() records that it started and how it ended: slept, or cancelled."""

    def __init__(self):
        self.events = []

    async def sleep(self, seconds):
        import asyncio
        self.events.append("started")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            self.events.append("cancelled")
            raise
        self.events.append("slept")
        return seconds

    async def seen(self):
        return list(self.events)


@airt.remote
class SyncLog:
    """One call at a time, on the actor's main thread; add() shows which calls ran, in order."""

    def __init__(self):
        self.entries = []

    def sleep(self, started, seconds):
        import time
        with open(started, "w") as f:
            f.write("started")
        try:
            time.sleep(seconds)
        except KeyboardInterrupt:
            self.entries.append("interrupted")
            raise
        self.entries.append("slept")
        return seconds

    def add(self, entry):
        self.entries.append(entry)
        return list(self.entries)


def test_an_async_actor_call_is_cancelled_in_its_coroutine(cluster):
    actor = AsyncSleeper.remote()
    ref = actor.sleep.remote(60)
    assert wait_for(lambda: "started" in airt.get(actor.seen.remote(), timeout=30)), \
        "the call never started"
    begin = time.monotonic()
    airt.cancel(ref)
    with pytest.raises(exceptions.TaskCancelledError):
        airt.get(ref, timeout=10)
    assert time.monotonic() - begin < 2
    # The coroutine itself got asyncio.CancelledError at its await; the actor lives on.
    assert wait_for(lambda: airt.get(actor.seen.remote(), timeout=30) == ["started", "cancelled"],
                    timeout=10), airt.get(actor.seen.remote(), timeout=30)
    assert airt.get(actor.sleep.remote(0), timeout=30) == 0
    airt.kill(actor)


def test_a_call_queued_on_a_sync_actor_is_cancelled_and_never_runs(cluster, tmp_path):
    actor = SyncLog.remote()
    started = str(tmp_path / "started")
    busy = actor.sleep.remote(started, 3)
    assert wait_for(lambda: os.path.exists(started)), "the sleeping call never started"
    queued = actor.add.remote("cancelled")  # behind the sleeping call
    # This driver sends an actor call as it takes it, before it runs anything later: once a task
    # submitted after it has come back, the call waits in the actor's worker, not here.
    assert airt.get(mark.remote(str(tmp_path / "sent")), timeout=60) == "ran"
    begin = time.monotonic()
    airt.cancel(queued)
    with pytest.raises(exceptions.TaskCancelledError):
        airt.get(queued, timeout=10)
    assert time.monotonic() - begin < 2, "the cancel waited for the sleeping call"
    assert airt.get(busy, timeout=30) == 3  # the running call is not the one cancelled
    assert airt.get(actor.add.remote("after"), timeout=30) == ["slept", "after"]
    airt.kill(actor)


def test_a_running_sync_actor_call_is_interrupted_and_the_actor_lives_on(cluster, tmp_path):
    actor = SyncLog.remote()
    started = str(tmp_path / "started")
    ref = actor.sleep.remote(started, 60)
    assert wait_for(lambda: os.path.exists(started)), "the call never started"
    begin = time.monotonic()
    airt.cancel(ref)
    with pytest.raises(exceptions.TaskCancelledError):
        airt.get(ref, timeout=10)
    # airt's choice (Ray leaves it running): the KeyboardInterrupt ended its time.sleep(60).
    assert airt.get(actor.add.remote("after"), timeout=30) == ["interrupted", "after"]
    assert time.monotonic() - begin < 10
    airt.kill(actor)


def test_force_cancel_of_an_actor_call_raises_value_error(cluster):
    actor = AsyncSleeper.remote()
    ref = actor.sleep.remote(0.2)
    with pytest.raises(ValueError, match="force=True is not supported for actor tasks"):
        airt.cancel(ref, force=True)
    assert airt.get(ref, timeout=30) == 0.2  # not cancelled
    airt.kill(actor)
