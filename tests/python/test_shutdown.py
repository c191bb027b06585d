"""Shutdown with threads still calling into airt._airt: a daemon thread inside a call when the
interpreter exits must not abort the process ("terminate called without an active exception"),
and calls after airt.shutdown() raise a clear UnavailableError. Each case is a driver process of
its own (a local cluster), so that its exit is what the test watches."""

import subprocess
import sys
import textwrap

import pytest

from conftest import Cluster

DRIVER = textwrap.dedent("""
    import sys, threading, time
    import airt
    from airt import _airt, exceptions

    airt.init(num_cpus=1, object_store_memory=64 << 20)
    calls, errors = [0], []

    def loop():
        while True:
            try:
                _airt.store_stats()
                calls[0] += 1
            except exceptions.RayError as error:
                if len(errors) < 10:
                    errors.append(error)
                time.sleep(0.001)

    for _ in range(4):
        threading.Thread(target=loop, daemon=True).start()
    deadline = time.monotonic() + 60
    while calls[0] < 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls[0] >= 200, "the threads made no calls"
    if sys.argv[1] == "shutdown":
        airt.shutdown()
        while not errors and time.monotonic() < deadline:
            time.sleep(0.01)
        assert errors, "no call failed after shutdown"
        print("after shutdown:", type(errors[0]).__name__, errors[0], flush=True)
    print("exiting with the threads in calls", flush=True)
""")


def _run(tmp_path, mode):
    env = Cluster(str(tmp_path)).env()
    env.pop("AIRT_ADDRESS", None)  # a local cluster of its own
    return subprocess.run([sys.executable, "-c", DRIVER, mode], env=env, capture_output=True,
                          text=True, timeout=180)


@pytest.mark.parametrize("round", range(3))
def test_the_interpreter_exits_cleanly_while_daemon_threads_call_into_airt(tmp_path, round):
    result = _run(tmp_path, "exit")
    output = result.stdout + result.stderr
    assert "terminate called" not in output, output
    assert result.returncode == 0, output
    assert "exiting with the threads in calls" in result.stdout, output


def test_calls_after_shutdown_raise_unavailable_and_the_process_exits_cleanly(tmp_path):
    result = _run(tmp_path, "shutdown")
    output = result.stdout + result.stderr
    assert "terminate called" not in output, output
    assert result.returncode == 0, output
    assert "after shutdown: UnavailableError" in result.stdout, output
    assert "shut down" in result.stdout and "airt.init()" in result.stdout, output
