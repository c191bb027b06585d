"""max_retries=-1, max_restarts=-1 and max_task_retries=-1 mean "without limit", as in Ray; kill
with no_restart=False restarts an actor that has restarts left."""

import os
import sys

import cloudpickle
import pytest

import airt
from airt.exceptions import ActorDiedError

# More deaths than any default allows (max_retries defaults to 3).
DEATHS = 5

# Workers cannot import this test module: its functions and classes travel by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _died_times(path):
    return len(open(path).read()) if os.path.exists(path) else 0


def test_a_task_with_max_retries_minus_one_survives_any_number_of_worker_deaths(cluster,
                                                                                 tmp_path):
    counter = str(tmp_path / "deaths")

    @airt.remote(max_retries=-1)
    def dies_often(path, deaths):
        if _died_times(path) < deaths:
            with open(path, "a") as f:
                f.write("x")
            os._exit(1)
        return "survived"

    assert airt.get(dies_often.remote(counter, DEATHS), timeout=180) == "survived"
    assert _died_times(counter) == DEATHS


def test_retry_exceptions_with_max_retries_minus_one_runs_until_it_succeeds(cluster, tmp_path):
    counter = str(tmp_path / "raises")

    @airt.remote(max_retries=-1, retry_exceptions=True)
    def raises_often(path, times):
        with open(path, "a") as f:
            f.write("x")
        if _died_times(path) <= times:
            raise IOError("not yet")
        return "done"

    assert airt.get(raises_often.remote(counter, DEATHS), timeout=60) == "done"
    assert _died_times(counter) == DEATHS + 1


def test_counting_options_below_minus_one_are_refused(cluster):
    @airt.remote
    def f():
        return 1

    @airt.remote
    class A:
        pass

    for bad in (-2, 1.5, "3"):
        with pytest.raises(ValueError, match="max_retries"):
            f.options(max_retries=bad)
    with pytest.raises(ValueError, match="max_restarts"):
        A.options(max_restarts=-5)
    with pytest.raises(ValueError, match="max_task_retries"):
        A.options(max_task_retries=-2)


def test_an_actor_with_unlimited_restarts_and_retries_outlives_its_deaths(cluster, tmp_path):
    counter = str(tmp_path / "actor-deaths")

    @airt.remote(max_restarts=-1, max_task_retries=-1)
    class Phoenix:
        def work(self, path, deaths):
            if _died_times(path) < deaths:
                with open(path, "a") as f:
                    f.write("x")
                os._exit(1)
            return airt.get_runtime_context().was_current_actor_reconstructed

    phoenix = Phoenix.remote()
    # Each death restarts the actor and resends the call; the call survives them all.
    assert airt.get(phoenix.work.remote(counter, DEATHS), timeout=180) is True
    assert _died_times(counter) == DEATHS


def test_kill_without_no_restart_restarts_the_actor(cluster):
    # max_task_retries: a call sent while the killed process goes down is resent to the new one.
    @airt.remote(max_restarts=1, max_task_retries=-1)
    class Counter:
        def __init__(self):
            self.n = 0

        def add(self):
            self.n += 1
            return self.n, os.getpid(), airt.get_runtime_context().was_current_actor_reconstructed

    counter = Counter.remote()
    assert airt.get(counter.add.remote())[0] == 1
    n, first_pid, restarted = airt.get(counter.add.remote())
    assert (n, restarted) == (2, False)
    airt.kill(counter, no_restart=False)
    # The restarted actor ran its constructor again, in a new process.
    n, pid, restarted = airt.get(counter.add.remote(), timeout=120)
    assert (n, restarted) == (1, True) and pid != first_pid
    # Its one restart is spent: killed again, even without no_restart, it is dead.
    airt.kill(counter, no_restart=False)
    with pytest.raises(ActorDiedError):
        airt.get(counter.add.remote(), timeout=120)


def test_kill_with_no_restart_ends_an_actor_that_could_restart(cluster):
    @airt.remote(max_restarts=-1)
    class Immortal:
        def ping(self):
            return "pong"

    actor = Immortal.remote()
    assert airt.get(actor.ping.remote()) == "pong"
    airt.kill(actor)  # no_restart=True is the default
    with pytest.raises(ActorDiedError):
        airt.get(actor.ping.remote(), timeout=120)
    with pytest.raises(TypeError):
        airt.kill("not an actor")
