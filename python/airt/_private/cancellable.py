"""Interrupting a Python worker's running task when it is cancelled.

The worker runs its tasks on its main thread (airt._airt.run_worker given an interrupt hook runs
its event loop on a thread of its own). Cancelling a running task (airt.cancel without force)
makes the loop call interrupt(task_id): if that task still runs, the main thread gets a SIGINT,
and the handler installed here raises KeyboardInterrupt in the task, as Ctrl-C would, so
blocking calls that honour Ctrl-C (time.sleep, waits on locks, sockets) end too. Only the main
thread can be interrupted that way: Python runs signal handlers there, and
PyThreadState_SetAsyncExc does not wake a thread blocked in a system call. A stale signal (the
task ended before it arrived) is ignored.

Actor methods: a sync method on the main thread (max_concurrency 1) is interrupted as a task is
(Ray leaves a running sync actor method alone; here the KeyboardInterrupt ends it, the call
fails, the actor lives on). An async method's call registers its coroutine's future (cancelling):
interrupting that call cancels the future, which raises asyncio.CancelledError inside the
coroutine, as Ray does. A sync method on another thread (max_concurrency > 1) is never
interrupted: it runs to its end and its result is dropped by the caller.
"""

import contextlib
import signal
import threading

from airt import _airt


class Interrupter:
    """Knows which task the main thread runs, and interrupts it on request."""

    def __init__(self):
        self._main = threading.main_thread().ident
        # Written by the main thread (running) and interrupt() (cancelled) under _lock; read
        # without it by the SIGINT handler, which runs on the main thread between bytecodes.
        self._lock = threading.Lock()
        self._running = None
        self._cancelled = None
        self._cancels = {}  # task id -> how to cancel it off the main thread; under _lock

    def install(self):
        """On the main thread: the SIGINT handler that raises KeyboardInterrupt in a cancelled
        task (and ignores every other SIGINT)."""
        signal.signal(signal.SIGINT, self._on_sigint)

    def wrap(self, call):
        """`call` (the worker's fallback), recording the task it runs on the main thread."""
        def fallback(kind, name, actor, args):
            if threading.get_ident() != self._main:
                return call(kind, name, actor, args)
            task = _airt.current_task()[0] or None
            with self._lock:
                self._running = task
            try:
                return call(kind, name, actor, args)
            except KeyboardInterrupt:
                # Raised outside the call's own handler: the task was cancelled, and its owner
                # has recorded that already.
                return False, "KeyboardInterrupt: the task was cancelled"
            finally:
                with self._lock:
                    self._running = None
                    self._cancelled = None
        return fallback

    @contextlib.contextmanager
    def cancelling(self, task_id, cancel):
        """While inside, interrupting task `task_id` calls `cancel()` (thread-safe, not raising)
        instead of signalling the main thread: an async actor call's future.cancel."""
        with self._lock:
            self._cancels[task_id] = cancel
        try:
            yield
        finally:
            with self._lock:
                self._cancels.pop(task_id, None)

    def interrupt(self, task_id):
        """Cancels task `task_id` as registered by cancelling(), or raises KeyboardInterrupt in
        it if the main thread still runs it."""
        with self._lock:
            cancel = self._cancels.get(task_id)
            if cancel is None:
                if task_id is None or self._running != task_id:
                    return
                self._cancelled = task_id
        if cancel is not None:
            cancel()
            return
        signal.pthread_kill(self._main, signal.SIGINT)

    def _on_sigint(self, signum, frame):
        running = self._running
        if running is not None and self._cancelled == running:
            raise KeyboardInterrupt(f"task {running.hex()} was cancelled")


def run_worker(argv, interrupter, call):
    """On the main thread: airt-worker's loop over `call` (the worker's fallback, as
    _airt.run_worker takes it), its tasks interruptible through `interrupter`; the loop's exit
    code."""
    interrupter.install()
    return _airt.run_worker(argv, interrupter.wrap(call), interrupter.interrupt)
