"""The streaming executor: a dataset's operators run as a pipeline over the object store.

Each operator (a fused read/map task, a map_batches actor pool, a limit) takes its input blocks
in order and starts a streaming-generator call per input; a thread per call takes the blocks as
the call makes them (airt.data._tasks). One executor thread owns all the state: it hands each
operator's outputs on in input order (so a dataset keeps its order), starts calls while the
bytes of blocks made and not yet consumed stay within the budget (DataContext.budget_bytes),
grows and shrinks actor pools with the backlog, and retries a call whose worker died, skipping
the blocks its first run gave. A call on a block runs near it (airt.data._locality): a task on
the block's node while that node has room, an actor call on an actor there when one is free.
Block refs go to calls as top-level arguments only.
"""

import collections
import queue
import threading
import time

import cloudpickle

import airt
from airt import exceptions
from airt.data import _tasks
from airt.data._progress import ProgressBars
from airt.data._reservation import Reservation
from airt.data._stats import OperatorStats

_GIVEN_UP = object()  # the gen of a call stopped by a limit
_SYSTEM_ERRORS = (exceptions.WorkerCrashedError, exceptions.RayActorError,
                  exceptions.ObjectLostError)


def _cost(meta):
    """What a block counts against the budget: its bytes, or 0 for a block that was in the
    store before the execution (a materialized dataset's, which it holds anyway)."""
    return meta.get("budget_bytes", meta["size_bytes"])


class _Call:
    """One streaming call of an operator: its input, its blocks not yet handed on."""

    def __init__(self, index, item):
        self.index = index
        self.item = item          # what it works on: ("read", fn) or ("block", ref, meta)
        self.gen = None
        self.actor = None
        self.ready = collections.deque()  # (ref, meta) received, not yet handed on
        self.received = 0         # blocks received over every run (the skip of a rerun)
        self.done = False
        self.attempts = 0
        self.started = time.monotonic()


class Operator:
    """A physical operator. kind: "task" (data_task over reads or blocks), "actor" (a pool of
    MapWorker actors), "limit", "input" (blocks given as they are)."""

    def __init__(self, kind, name, chain=None, transform=None, compute=None, options=None,
                 limit=None):
        self.kind = kind
        self.name = name
        self.chain = chain or []
        self.transform = transform
        self.compute = compute
        self.options = dict(options or {})
        self.limit = limit
        self.inputs = collections.deque()
        self.calls = collections.deque()   # in input order
        self.retry = collections.deque()   # calls whose worker died, to submit again
        self.upstream_done = False
        self.done = False
        self.next_index = 0
        self.rows_seen = 0                 # limit: rows handed on
        self.stats = OperatorStats(name)
        self.pool = None

    def running(self):
        return sum(1 for c in self.calls if not c.done)


class Executor:
    """Runs `operators` (the first one's inputs given) and yields their output blocks, as
    (ref, metadata), in order. Stop early with close()."""

    def __init__(self, operators, context):
        self.ops = operators
        operators[0].upstream_done = True  # its inputs are all given
        self.ctx = context
        spare = getattr(context, "_spare_cpus", None)
        for op in operators:  # a split's data tasks that cannot get CPUs use their consumers'
            op.borrow = op.kind == "task" and spare is not None and \
                float(op.options.get("num_cpus", 1) or 0) > spare
        self.budget = context.budget_bytes()
        self.target = context.target_max_block_size
        self.events = queue.Queue()
        self.out = queue.Queue()
        self.lock = threading.Condition()
        self.in_flight = 0             # bytes of blocks made and not consumed (under lock)
        self.peak_in_flight = 0
        self.waiting_downstream = [0] * len(operators)  # blocks handed on, not yet taken
        self.heads = [None] * len(operators)
        self.stopping = False
        self.error = None
        self.bars = ProgressBars([op.name for op in operators], context.enable_progress_bars)
        try:
            cluster_cpus = float(airt.cluster_resources().get("CPU", 0))
        except Exception:  # no cluster view (local mode)
            cluster_cpus = None
        self.total_cpus = max(1, int(cluster_cpus or 1))
        self.reservation = Reservation(operators, context, cluster_cpus)
        self.thread = threading.Thread(target=self._run, name="airt-data-executor", daemon=True)
        self.thread.start()

    # ---- the consumer's side
    def blocks(self):
        """The output blocks, in order, as (ref, metadata); raises the pipeline's error."""
        try:
            while True:
                item = self.out.get()
                if item is None:
                    return
                if item[0] == "error":
                    raise item[1]
                _, ref, meta = item
                self._consumed(len(self.ops), meta)
                yield ref, meta
        finally:
            self.close()

    def close(self):
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        self.events.put(("wake",))
        self.thread.join(timeout=30)

    def _consumed(self, position, meta):
        with self.lock:
            self.in_flight -= _cost(meta)
            self.waiting_downstream[position - 1] -= 1
            self.lock.notify_all()
        self.events.put(("wake",))

    # ---- the drain threads
    def _may_pull(self, position, call):
        with self.lock:
            self.lock.wait_for(lambda: self.stopping or self.in_flight < self.budget or (
                self.heads[position] is call and self.waiting_downstream[position] == 0),
                timeout=None)
            return not self.stopping

    def _drain(self, position, call, gen):
        try:
            while self._may_pull(position, call):
                try:
                    ref = next(gen)
                except StopIteration:
                    break
                try:
                    meta_ref = next(gen)
                except StopIteration:
                    airt.get(ref)  # a stream ending on one item ends on its error
                    raise RuntimeError("a data task's stream ended inside a block") from None
                meta = airt.get(meta_ref)
                with self.lock:
                    self.in_flight += meta["size_bytes"]
                    self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                self.events.put(("block", position, call, gen, ref, meta))
            self.events.put(("done", position, call, gen, None))
        except Exception as error:  # the call failed: the executor retries or gives up
            self.events.put(("done", position, call, gen, error))

    # ---- the executor thread
    def _run(self):
        try:
            from airt.data._locality import Locality
            self.locality = Locality()
            for op in self.ops:
                if op.kind == "task":
                    op.chain_ref = airt.put(cloudpickle.dumps(op.chain))
                if op.kind == "actor":
                    from airt.data._actor_pool import ActorPool
                    op.pool = ActorPool(op, self.ctx, self.reservation)
                op.stats.start()
            while True:
                with self.lock:
                    if self.stopping:
                        break
                self._handle_events()
                self._hand_on()
                if self.ops[-1].done:
                    break
                self._launch()
                for op in self.ops:
                    if op.pool is not None:
                        op.pool.autoscale(op)
                self._show()
            self.out.put(None)
        except BaseException as error:  # noqa: BLE001 - handed to the consumer
            self.error = error
            self.out.put(("error", error))
        finally:
            self._shutdown()

    def _handle_events(self):
        try:
            event = self.events.get(timeout=0.05)
        except queue.Empty:
            return
        while True:
            self._handle(event)
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return

    def _handle(self, event):
        if event[0] == "wake":
            return
        kind, position, call, gen = event[:4]
        op = self.ops[position]
        if gen is not call.gen:  # from a run given up (a retried or cancelled call)
            if kind == "block":
                self._release_bytes(event[5])
            return
        if kind == "block":
            call.received += 1
            call.ready.append((event[4], event[5]))
            return
        error = event[4]
        system = isinstance(error, _SYSTEM_ERRORS)
        if op.pool is not None:
            op.pool.finished(call, dead=system)
        if error is None:
            call.done = True
            if call.item is not None and call.item[0] == "block":
                self._release_bytes(call.item[2])  # its input block is no longer needed
            call.item = None
            op.stats.task_done(time.monotonic() - call.started)
            return
        if system and call.attempts <= self.ctx.max_task_retries:
            op.stats.retries += 1
            op.retry.append(call)  # submitted again, skipping the blocks it gave
            return
        raise error

    def _release_bytes(self, meta):
        with self.lock:
            self.in_flight -= _cost(meta)
            self.lock.notify_all()

    def _hand_on(self):
        """Moves each operator's outputs, in input order, to the next one (or the consumer)."""
        for position, op in enumerate(self.ops):
            while op.calls:
                head = op.calls[0]
                while head.ready:
                    ref, meta = head.ready.popleft()
                    self._emit(position, op, ref, meta)
                if not op.calls or op.calls[0] is not head:
                    break
                if head.done and not head.ready:
                    op.calls.popleft()
                    continue
                break
            with self.lock:
                self.heads[position] = op.calls[0] if op.calls else None
                self.lock.notify_all()
            if op.kind == "input":
                while op.inputs:
                    _, ref, meta = op.inputs.popleft()
                    self._emit(position, op, ref, dict(meta, budget_bytes=0))
            if not op.done and op.upstream_done and not op.inputs and not op.calls:
                self._finish(position, op)

    def _emit(self, position, op, ref, meta):
        if op.kind == "limit":
            left = op.limit - op.rows_seen
            if left <= 0:
                self._release_bytes(meta)
                return
            if meta["num_rows"] > left:
                table = airt.get(ref).slice(0, left)
                self._release_bytes(meta)
                meta = {"num_rows": table.num_rows, "size_bytes": table.nbytes}
                ref = airt.put(table)
                with self.lock:
                    self.in_flight += meta["size_bytes"]
            op.rows_seen += meta["num_rows"]
            if op.rows_seen >= op.limit:
                self._stop_upstream(position)
        op.stats.block_out(meta)
        self.bars.update(position, op.stats.rows, len(op.inputs))
        with self.lock:
            self.waiting_downstream[position] += 1
        if position + 1 < len(self.ops):
            self.ops[position + 1].inputs.append(("block", ref, meta))
            # a block handed to the next operator is waiting there until a call takes it
        else:
            self.out.put(("block", ref, meta))

    def _stop_upstream(self, position):
        """A limit has its rows: the operators before it stop (their calls are cancelled)."""
        for upstream in range(position):
            op = self.ops[upstream]
            for _, *rest in list(op.inputs):
                if rest and isinstance(rest[-1], dict):
                    self._release_bytes(rest[-1])
            op.inputs.clear()
            op.upstream_done = True
            for call in op.calls:
                for _, meta in call.ready:
                    self._release_bytes(meta)
                call.ready.clear()
                if not call.done and call.gen is not None:
                    try:
                        airt.cancel(call.gen)
                    except Exception:
                        pass
                if not call.done and call.item and call.item[0] == "block":
                    self._release_bytes(call.item[2])
                call.gen, call.done = _GIVEN_UP, True
            op.calls.clear()

    def _finish(self, position, op):
        op.done = True
        op.stats.stop()
        if op.pool is not None:
            op.pool.shutdown()
        if position + 1 < len(self.ops):
            self.ops[position + 1].upstream_done = True

    def _launch(self):
        """Starts calls, the operators nearest the consumer first, within the budget."""
        for position in reversed(range(len(self.ops))):
            op = self.ops[position]
            if op.kind in ("input", "limit"):
                while op.kind == "limit" and op.inputs:
                    _, ref, meta = op.inputs.popleft()
                    self._taken(position)
                    call = _Call(op.next_index, None)
                    op.next_index += 1
                    call.ready.append((ref, meta))
                    call.done = True
                    op.calls.append(call)
                continue
            while op.retry and (op.pool is None or op.pool.has_free()):
                self._submit(position, op, op.retry.popleft())
            while op.inputs and self._may_start(op):
                if op.pool is not None and not op.pool.has_free():
                    break
                item = op.inputs.popleft()
                if item[0] == "block":
                    self._taken(position)
                call = _Call(op.next_index, item)
                op.next_index += 1
                op.calls.append(call)
                self._submit(position, op, call)

    def _taken(self, position):
        """A block handed on to operator `position` was taken by one of its calls."""
        if position == 0:
            return
        with self.lock:
            self.waiting_downstream[position - 1] -= 1
            self.lock.notify_all()

    def _may_start(self, op):
        cap = op.compute.size if getattr(op.compute, "size", None) else None
        if op.pool is None:
            per_call = max(float(op.options.get("num_cpus", 1) or 0), 1e-3)
            cap = cap or max(1, int(self.total_cpus / per_call))
            if op.borrow:
                cap = min(cap, max(1, self.ctx._borrow_slots))
            if op.running() >= cap:
                return False
        estimate = op.stats.mean_block_bytes()
        with self.lock:
            room = self.in_flight + estimate * (op.running() + 1) <= self.budget
        # Each operator past the first may always run one call (it consumes blocks in flight);
        # the first one only when nothing is in flight (the consumer took everything).
        return room or (op.running() == 0 and (op is not self.ops[0] or self.in_flight <= 0))

    def _submit(self, position, op, call):
        call.attempts += 1
        call.started = time.monotonic()
        item = call.item
        if op.kind == "actor":
            gen = op.pool.submit(call, item[1], call.received, self.target,
                                 self.ctx.generator_backpressure_num_objects,
                                 self.locality.node_of(item[1])
                                 if self.ctx.execution_options.actor_locality_enabled else None)
        else:
            options = dict(op.options)
            options.setdefault("num_cpus", 1)
            if op.borrow:
                options["num_cpus"] = 0
            options["max_retries"] = 0
            options["_generator_backpressure_num_objects"] = \
                self.ctx.generator_backpressure_num_objects
            if item[0] == "block" and options.get("scheduling_strategy") is None:
                near = self.locality.strategy(item[1])  # run on the block's node if it has room
                if near is not None:
                    options["scheduling_strategy"] = near
                    op.stats.locality_hits += 1
            fn = _tasks.remote(_tasks.data_task).options(**options)
            source = item[1]
            gen = fn.remote(item[0], op.chain_ref, source, call.received, self.target)
        call.gen = gen
        op.stats.tasks += 1
        threading.Thread(target=self._drain, args=(position, call, gen), daemon=True).start()

    def _show(self):
        for position, op in enumerate(self.ops):
            self.bars.update(position, op.stats.rows, len(op.inputs))
        self.bars.render()

    def _shutdown(self):
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        for op in self.ops:
            for call in op.calls:
                if not call.done and call.gen not in (None, _GIVEN_UP):
                    try:
                        airt.cancel(call.gen)
                    except Exception:
                        pass
            if op.pool is not None:
                op.pool.shutdown()
            op.stats.stop()
        self.bars.close()
