"""Per-operator figures of an execution, as Dataset.stats() prints them."""

import time


class OperatorStats:
    def __init__(self, name):
        self.name = name
        self.rows = 0
        self.bytes = 0
        self.blocks = 0
        self.tasks = 0
        self.retries = 0
        self.task_seconds = 0.0
        self.started = None
        self.ended = None
        self.idle_fraction = None   # actor pools: share of actor time with nothing to do
        self.max_actors = 0
        self.scale_ups = 0
        self.scale_downs = 0
        # Calls on a block placed on the block's node (a task's soft affinity, an actor there),
        # and calls of an actor pool sent elsewhere (no free actor on that node).
        self.locality_hits = 0
        self.locality_misses = 0

    def start(self):
        if self.started is None:
            self.started = time.monotonic()

    def stop(self):
        if self.ended is None and self.started is not None:
            self.ended = time.monotonic()

    def block_out(self, meta):
        self.rows += meta["num_rows"]
        self.bytes += meta["size_bytes"]
        self.blocks += 1

    def task_done(self, seconds):
        self.task_seconds += seconds

    def mean_block_bytes(self):
        return self.bytes / self.blocks if self.blocks else 0

    def wall_seconds(self):
        if self.started is None:
            return 0.0
        return (self.ended or time.monotonic()) - self.started

    def as_dict(self):
        return {"name": self.name, "rows": self.rows, "bytes": self.bytes, "blocks": self.blocks,
                "tasks": self.tasks, "retries": self.retries, "wall_s": self.wall_seconds(),
                "task_s": self.task_seconds, "idle_fraction": self.idle_fraction,
                "max_actors": self.max_actors, "scale_ups": self.scale_ups,
                "scale_downs": self.scale_downs, "locality_hits": self.locality_hits,
                "locality_misses": self.locality_misses}

    def summary(self, index):
        wall = self.wall_seconds()
        lines = [f"Operator {index} {self.name}: {self.tasks} tasks executed, {self.blocks} blocks "
                 f"produced in {wall:.2f}s",
                 f"* Output rows: {self.rows} ({self.rows / wall if wall else 0:,.0f} rows/s)",
                 f"* Output bytes: {self.bytes} ({self.bytes / wall / 1e9 if wall else 0:.3f} GB/s)",
                 f"* Task time: {self.task_seconds:.2f}s total"]
        if self.retries:
            lines.append(f"* Tasks retried after a worker died: {self.retries}")
        if self.locality_hits or self.locality_misses:
            lines.append(f"* Locality: {self.locality_hits} calls placed on their block's node, "
                         f"{self.locality_misses} elsewhere")
        if self.idle_fraction is not None:
            lines.append(f"* Actor pool: up to {self.max_actors} actors ({self.scale_ups} added, "
                         f"{self.scale_downs} removed), idle fraction {self.idle_fraction:.1%}")
        return "\n".join(lines)


class DatasetStats:
    """The stats of a dataset's executions (stages before an all-to-all op included)."""

    def __init__(self):
        self.operators = []
        self.peak_bytes_in_flight = 0
        self.budget_bytes = 0

    def add(self, executor):
        self.operators.extend(op.stats for op in executor.ops)
        self.peak_bytes_in_flight = max(self.peak_bytes_in_flight, executor.peak_in_flight)
        self.budget_bytes = executor.budget

    def to_string(self):
        if not self.operators:
            return "(not executed yet)"
        parts = [s.summary(i) for i, s in enumerate(self.operators)]
        parts.append(f"Peak bytes in flight: {self.peak_bytes_in_flight} "
                     f"(budget {self.budget_bytes})")
        return "\n\n".join(parts)
