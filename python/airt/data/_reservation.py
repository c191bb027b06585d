"""CPUs kept for the task operators of a pipeline, so that actor pools never starve them (Ray
Data's ReservationOpResourceAllocator).

Actors hold their CPUs for their life. A pool allowed to take every CPU of the cluster leaves
none for the reads and task-pool maps that feed it (or that consume its output), and the
pipeline waits forever. So each task operator that is not done yet keeps a reservation:
DataContext.op_resource_reservation_ratio of the cluster's CPUs shared evenly among the
pipeline's operators that hold CPUs (the task operators and the actor pools), and never less
than one of its calls. The pools grow only into what is left (less what the other pools hold);
a pool whose min_size actors cannot fit even so fails at once with an error that names its needs
and the cluster's CPUs (Ray warns and waits). A finished operator's reservation is released,
so a pool may grow into it. Operators that run with no CPU of their own (a streaming_split's
data tasks borrowing their consumers' CPUs) reserve nothing.
"""


def _task_cpus(op):
    if op.borrow:
        return 0.0
    return float(op.options.get("num_cpus", 1) or 0)


def actor_cpus(op):
    """The CPUs one actor of pool operator `op` holds."""
    return float(op.options.get("num_cpus", 1) or 0)


class Reservation:
    """The CPU ledger of one execution: what the task operators keep, what the pools may hold."""

    def __init__(self, ops, ctx, total_cpus):
        """total_cpus: the cluster's, None when there is no cluster view (nothing is kept)."""
        self.ops = ops
        self.enabled = ctx.op_resource_reservation_enabled and total_cpus is not None
        total_cpus = total_cpus or 0
        self.ratio = ctx.op_resource_reservation_ratio
        spare = getattr(ctx, "_spare_cpus", None)
        self.total = float(total_cpus)
        # A streaming_split's consumers (training ranks) hold CPUs no pool can have.
        self.usable = self.total if spare is None else min(self.total, float(spare))
        holders = [op for op in ops if (op.kind == "task" and _task_cpus(op) > 0) or
                   (op.kind == "actor" and actor_cpus(op) > 0)]
        share = ctx.op_resource_reservation_ratio * self.total / max(1, len(holders))
        self.kept = {id(op): max(_task_cpus(op), share) for op in ops
                     if op.kind == "task" and _task_cpus(op) > 0}

    def reserved(self, done_too=False):
        """The CPUs the task operators keep (those not done yet, or all with done_too)."""
        return sum(self.kept[id(op)] for op in self.ops
                   if id(op) in self.kept and (done_too or not op.done))

    def check(self, op, min_size):
        """Raises ValueError when `min_size` actors of pool `op`, with the minimum of the other
        pools, do not fit in what the task operators leave."""
        per_actor = actor_cpus(op)
        if not self.enabled or per_actor <= 0:
            return
        others = sum(actor_cpus(o) * o.compute.min_size for o in self.ops
                     if o.kind == "actor" and o is not op)
        kept = self.reserved(done_too=True) + others
        left = self.usable - kept
        need = per_actor * min_size
        if need > left + 1e-9:
            names = [o.name for o in self.ops if id(o) in self.kept] + \
                [o.name for o in self.ops if o.kind == "actor" and o is not op]
            held = "" if self.usable == self.total else \
                f", {self.total - self.usable:g} of them held by the split's consumers,"
            raise ValueError(
                f"{op.name}: the actor pool needs {need:g} CPUs for its min_size={min_size} "
                f"actors of {per_actor:g} CPU(s), but the cluster has {self.total:g} CPUs"
                f"{held} and {kept:g} are kept for the other operators "
                f"({', '.join(names) or 'none'}; DataContext.op_resource_reservation_ratio="
                f"{self.ratio:g}), so the pool's actors would starve the tasks that feed them: "
                f"lower min_size or the actors' num_cpus, or give the cluster more CPUs")

    def may_grow(self, op, members):
        """Whether pool `op`, holding `members` actors, may start one more."""
        per_actor = actor_cpus(op)
        if not self.enabled or per_actor <= 0:
            return True
        held = sum(actor_cpus(o) * len(o.pool.members) for o in self.ops
                   if o.kind == "actor" and o is not op and o.pool is not None)
        held += sum(actor_cpus(o) * o.compute.min_size for o in self.ops
                    if o.kind == "actor" and o is not op and o.pool is None)
        return per_actor * (members + 1) <= self.usable - self.reserved() - held + 1e-9

    def cap(self, op, wanted):
        """How many of `wanted` actors pool `op` may start now (at least its min_size)."""
        size = op.compute.min_size
        while size < wanted and self.may_grow(op, size):
            size += 1
        return size
