"""DataContext: the settings of airt.data's executor, as Ray's ray.data.DataContext.

    ctx = airt.data.DataContext.get_current()
    ctx.object_store_memory_fraction = 0.25   # back-pressure budget: a share of the node's store
    ctx.target_max_block_size = 16 << 20

The context is copied when a dataset starts executing: later changes apply to later executions.
"""

import copy
import threading


class ExecutionOptions:
    """Ray's ExecutionOptions, the parts that apply: preserve_order (airt keeps the order by
    default), resource_limits.object_store_memory, an absolute budget in bytes, and
    actor_locality_enabled (an actor pool sends a block to a free actor on the block's node
    first)."""

    def __init__(self):
        self.preserve_order = True
        self.actor_locality_enabled = True
        self.resource_limits = ResourceLimits()
        self.verbose_progress = False


class ResourceLimits:
    def __init__(self, object_store_memory=None):
        self.object_store_memory = object_store_memory


class DataContext:
    _current = None
    _lock = threading.Lock()

    def __init__(self):
        # Blocks larger than this are split by the task that makes them (Ray: 128 MiB).
        self.target_max_block_size = 128 << 20
        # Bytes of blocks made and not yet consumed, as a share of the local store's capacity
        # (execution_options.resource_limits.object_store_memory overrides it).
        self.object_store_memory_fraction = 0.25
        self.execution_options = ExecutionOptions()
        # One console line per operator while a dataset executes (stderr).
        self.enable_progress_bars = True
        # > 0: an actor pool waits this long for its first min_size actors before it takes any
        # block (Ray's; GetTimeoutError past it); -1: blocks go to actors as they get ready.
        self.wait_for_min_actors_s = -1
        # Ray's: each task operator not done yet keeps this share of the cluster's CPUs
        # (split evenly among the operators that hold CPUs, at least one call's), and actor
        # pools grow only into the rest; a pool whose min_size cannot fit is an error
        # (airt.data._reservation). Disabled: pools may take every CPU (a warning says so).
        self.op_resource_reservation_enabled = True
        self.op_resource_reservation_ratio = 0.5
        # How long an actor beyond an autoscaling pool's min_size may idle before it goes.
        self.actor_pool_idle_timeout_s = 1.0
        # Items a data task's streaming generator may run ahead of the executor (block and
        # metadata count as two).
        self.generator_backpressure_num_objects = 4
        # Times a data task is resubmitted after its worker died (the blocks it already gave
        # are skipped on the rerun, so none is lost or repeated).
        self.max_task_retries = 3
        # The default of read_* parallelism and from_* block counts when none is given.
        self.read_op_min_num_blocks = 16
        # Set by streaming_split's coordinator for each epoch, None elsewhere: the CPUs the
        # cluster has to spare for the epoch's data tasks beyond what its consumers (training
        # ranks) hold. A task operator whose calls ask for more runs them with no CPU of their
        # own, at most _borrow_slots (one per consumer) at once: a consumer waiting for input
        # lends its CPU in effect, so reads never wait for CPUs the ranks hold.
        self._spare_cpus = None
        self._borrow_slots = 0

    @classmethod
    def get_current(cls):
        with cls._lock:
            if cls._current is None:
                cls._current = DataContext()
            return cls._current

    @classmethod
    def _set_current(cls, context):
        with cls._lock:
            cls._current = context

    def copy(self):
        return copy.deepcopy(self)

    def budget_bytes(self):
        """The executor's budget for blocks in flight, in bytes."""
        limit = self.execution_options.resource_limits.object_store_memory
        if limit is not None:
            return int(limit)
        from airt import _airt
        try:
            capacity = _airt.store_stats()["capacity_bytes"]
        except Exception:  # local mode or no store: Ray's default store of 2 GiB
            capacity = 2 << 30
        return int(capacity * self.object_store_memory_fraction)
