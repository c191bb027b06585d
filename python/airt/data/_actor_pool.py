"""The actor pool of a map_batches stage with a callable class (compute=ActorPoolStrategy).

Actors (airt.data._tasks.MapWorker) are started up to initial_size; a block goes to the ready
actor with the fewest calls in flight (among those on the block's node first, when the executor
knows it), each actor taking at most max_tasks_in_flight_per_actor.
The pool grows by one actor while blocks wait and every actor is full (up to max_size), and an
actor beyond min_size that has had nothing to do for DataContext.actor_pool_idle_timeout_s is
killed. Each actor's idle time (alive with no call in flight) is counted for stats().
"""

import logging
import time

import cloudpickle

import airt
from airt.data import _tasks

logger = logging.getLogger(__name__)


class _Member:
    def __init__(self, handle, ready_ref):
        self.handle = handle
        self.ready_ref = ready_ref
        self.ready = False
        self.node = None  # the id of the node it runs on, once ready
        self.in_flight = 0
        self.born = time.monotonic()
        self.idle_since = self.born
        self.idle_total = 0.0
        self.dead = False

    def busy(self, now):
        if self.in_flight == 0 and self.ready:
            self.idle_total += now - self.idle_since

    def free(self, now):
        if self.in_flight == 0:
            self.idle_since = now


class ActorPool:
    def __init__(self, op, ctx, reservation):
        strategy = op.compute
        self.min_size = strategy.min_size
        self.max_size = strategy.max_size
        if self.max_size is None:  # as many as the cluster's CPUs (or GPUs) hold
            shape = [("CPU", op.options.get("num_cpus", 1)), ("GPU", op.options.get("num_gpus", 0))]
            total = airt.cluster_resources()
            fits = [int(total.get(k, 0) / v) for k, v in shape if v]
            self.max_size = max(self.min_size, min(fits) if fits else self.min_size)
        self.per_actor = strategy.max_tasks_in_flight_per_actor
        self.idle_timeout = ctx.actor_pool_idle_timeout_s
        self.stats = op.stats
        self.members = []
        self.gone = []
        options = {"num_cpus": op.options.get("num_cpus", 1),
                   "num_gpus": op.options.get("num_gpus", 0)}
        for key in ("resources", "memory", "accelerator_type", "scheduling_strategy"):
            if op.options.get(key) is not None:
                options[key] = op.options[key]
        self.actor_class = airt.remote(_tasks.MapWorker).options(**options)
        self.blob = cloudpickle.dumps((op.transform.fn, op.ctor_args, op.ctor_kwargs,
                                       op.transform, op.chain))
        self.reservation = reservation
        if reservation.enabled:  # the pool leaves the other operators their CPUs
            reservation.check(op, self.min_size)
            initial = reservation.cap(op, strategy.initial_size)
        else:
            initial = strategy.initial_size
            cpus = float(options["num_cpus"] or 0) * self.max_size
            total = airt.cluster_resources().get("CPU", 0)
            if cpus and cpus >= total:
                logger.warning("%s: %d actors of %s CPU(s) hold all %s CPUs of the cluster, "
                               "so the tasks that feed them cannot run: give the actors fewer "
                               "CPUs (num_cpus=) or a smaller pool", op.name, self.max_size,
                               options["num_cpus"], total)
        for _ in range(initial):
            self._add()
        if ctx.wait_for_min_actors_s > 0:
            self._wait_for_min_actors(ctx.wait_for_min_actors_s)

    def _wait_for_min_actors(self, timeout):
        refs = [m.ready_ref for m in self.members]
        ready, _ = airt.wait(refs, num_returns=len(refs), timeout=timeout)
        if len(ready) < len(refs):
            from airt.exceptions import GetTimeoutError
            raise GetTimeoutError("Timed out while starting actors. This may mean that the "
                                  "cluster does not have enough resources for the requested "
                                  "actor pool.")
        self._poll_ready()

    def _add(self):
        handle = self.actor_class.remote(self.blob)
        self.members.append(_Member(handle, handle.ready.remote()))
        self.stats.max_actors = max(self.stats.max_actors, len(self.members))

    def _poll_ready(self):
        pending = [m for m in self.members if not m.ready]
        if not pending:
            return
        ready, _ = airt.wait([m.ready_ref for m in pending], num_returns=len(pending),
                             timeout=0)
        ready = set(ready)
        now = time.monotonic()
        for m in pending:
            if m.ready_ref in ready:
                m.node = airt.get(m.ready_ref)  # raises the constructor's error
                m.ready, m.idle_since = True, now

    def has_free(self):
        self._poll_ready()
        return any(m.ready and m.in_flight < self.per_actor for m in self.members)

    def submit(self, call, block_ref, skip, target, backpressure, node=None):
        """Sends the block to the free actor with the fewest calls in flight, one on `node`
        (where the block lies) first, as Ray's actor locality."""
        free = [m for m in self.members if m.ready and m.in_flight < self.per_actor]
        near = [m for m in free if m.node == node] if node is not None else []
        member = min(near or free, key=lambda m: m.in_flight)
        if node is not None:
            if near:
                self.stats.locality_hits += 1
            else:
                self.stats.locality_misses += 1
        member.busy(time.monotonic())
        member.in_flight += 1
        call.actor = member
        return member.handle.process.options(
            _generator_backpressure_num_objects=backpressure).remote(block_ref, skip, target)

    def finished(self, call, dead=False):
        """A call ended; `dead`: its actor died (it leaves the pool, and a new one replaces it)."""
        member = call.actor
        if member is None:
            return
        call.actor = None
        member.in_flight -= 1
        member.free(time.monotonic())
        if dead and member in self.members:
            self.members.remove(member)
            self.gone.append((member, time.monotonic()))
            if len(self.members) < max(self.min_size, 1):
                self._add()

    def autoscale(self, op):
        """Grows while inputs wait on full actors; shrinks actors idle past the timeout."""
        self._poll_ready()
        now = time.monotonic()
        starting = any(not m.ready for m in self.members)
        if op.inputs and not starting and len(self.members) < self.max_size and \
                not self.has_free() and self.reservation.may_grow(op, len(self.members)):
            self._add()
            self.stats.scale_ups += 1
            return
        if op.inputs:
            return
        for m in list(self.members):
            if len(self.members) <= self.min_size:
                break
            if m.ready and m.in_flight == 0 and now - m.idle_since > self.idle_timeout:
                self._remove(m, now)
                self.stats.scale_downs += 1

    def _remove(self, member, now):
        member.busy(now)
        self.members.remove(member)
        self.gone.append((member, now))
        airt.kill(member.handle)

    def idle_fraction(self):
        now = time.monotonic()
        alive = idle = 0.0
        for m in self.members:
            alive += now - m.born
            idle += m.idle_total + (now - m.idle_since if m.in_flight == 0 and m.ready else 0)
        for m, end in self.gone:
            alive += end - m.born
            idle += m.idle_total
        return idle / alive if alive > 0 else 0.0

    def shutdown(self):
        if not self.members and self.stats.idle_fraction is not None:
            return
        now = time.monotonic()
        self.stats.idle_fraction = self.idle_fraction()
        for m in list(self.members):
            self._remove(m, now)
