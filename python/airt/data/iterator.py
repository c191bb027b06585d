"""Consuming datasets: DataIterator (iter_batches, iter_torch_batches, iter_rows), split and
streaming_split.

streaming_split(n) starts a coordinator actor that runs the dataset's executor and hands each
output block to exactly one of n split iterators (the least-fed one; with equal=True every
block is cut into n equal parts and the rows left over at the end are shared out, the last
< n dropped). Each epoch is a barrier: the coordinator starts the dataset anew once all n
iterators have asked for it. The split iterators pickle (an actor handle and an index), so a
training rank in another process consumes its shard; they are the hook that
airt.train.get_dataset_shard (the train issue) hands to its ranks.
"""

import queue
import threading

import cloudpickle
import numpy as np

import airt
from airt.data import block as B


def _rebatch(tables, batch_size, drop_last, shuffle_buffer, seed):
    """Tables of batch_size rows (None: as the blocks come) from `tables`, optionally drawn at
    random from a buffer of at least shuffle_buffer rows."""
    if shuffle_buffer:
        rng = np.random.default_rng(seed)
        buffer, rows = [], 0
        size = batch_size or 256

        def draw(final):
            nonlocal buffer, rows
            table = B.concat(buffer)
            table = table.take(rng.permutation(table.num_rows))
            out = []
            while table.num_rows >= size and (final or table.num_rows >= shuffle_buffer):
                out.append(table.slice(0, size))
                table = table.slice(size)
            buffer, rows = [table], table.num_rows
            return out

        for t in tables:
            buffer.append(t)
            rows += t.num_rows
            if rows >= shuffle_buffer + size:
                yield from draw(False)
        leftover = draw(True)
        yield from leftover
        if buffer and buffer[0].num_rows and not drop_last:
            yield buffer[0]
        return
    yield from B.rebatch(tables, batch_size, drop_last)


def _prefetched(tables, depth):
    """`tables` read ahead on a thread, `depth` at most (0: no thread)."""
    if depth <= 0:
        yield from tables
        return
    q = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def run():
        try:
            for t in tables:
                while not stop.is_set():
                    try:
                        q.put(t, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as error:  # noqa: BLE001 - raised in the consumer
            q.put(("error", error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, tuple) and item and item[0] == "error":
                raise item[1]
            yield item
    finally:
        stop.set()
        close = getattr(tables, "close", None)
        thread.join(timeout=10)
        if close is not None and not thread.is_alive():
            close()


def consume_batches(tables, batch_size, batch_format, drop_last=False,
                    local_shuffle_buffer_size=None, local_shuffle_seed=None,
                    prefetch_batches=1, collate_fn=None):
    if batch_format not in B.BATCH_FORMATS and batch_format is not None:
        raise ValueError(f"batch_format must be one of {B.BATCH_FORMATS}, got {batch_format!r}")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}")
    for table in _rebatch(_prefetched(tables, prefetch_batches), batch_size, drop_last,
                          local_shuffle_buffer_size, local_shuffle_seed):
        batch = B.to_batch(table, batch_format)
        yield collate_fn(batch) if collate_fn is not None else batch


def _to_torch(batch, dtypes, device):
    import warnings
    import torch
    if device == "auto" or device is None:
        device = "cuda" if torch.cuda.is_available() and airt.get_gpu_ids() else "cpu"
    out = {}
    for name, values in batch.items():
        dtype = dtypes.get(name) if isinstance(dtypes, dict) else dtypes
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # read-only arrays (views of the store)
            tensor = torch.as_tensor(values, dtype=dtype)
        out[name] = tensor.to(device) if str(device) != "cpu" else tensor
    return out


class DataIterator:
    """Iterates a dataset (or one split of it) in batches or rows, as Ray's DataIterator."""

    def __init__(self, dataset=None):
        self._dataset = dataset

    def _tables(self):
        for ref, _ in self._dataset._stream():
            yield airt.get(ref)

    def iter_batches(self, *, prefetch_batches=1, batch_size=256, batch_format="default",
                     drop_last=False, local_shuffle_buffer_size=None, local_shuffle_seed=None,
                     _collate_fn=None):
        return consume_batches(self._tables(), batch_size, batch_format, drop_last,
                               local_shuffle_buffer_size, local_shuffle_seed, prefetch_batches,
                               _collate_fn)

    def iter_torch_batches(self, *, prefetch_batches=1, batch_size=256, dtypes=None,
                           device="auto", collate_fn=None, drop_last=False,
                           local_shuffle_buffer_size=None, local_shuffle_seed=None):
        for batch in self.iter_batches(prefetch_batches=prefetch_batches, batch_size=batch_size,
                                       batch_format="numpy", drop_last=drop_last,
                                       local_shuffle_buffer_size=local_shuffle_buffer_size,
                                       local_shuffle_seed=local_shuffle_seed):
            yield collate_fn(batch) if collate_fn is not None else \
                _to_torch(batch, dtypes, device)

    def iter_rows(self):
        for table in self._tables():
            yield from B.rows(table)

    def materialize(self):
        from airt.data.dataset import MaterializedDataset
        return MaterializedDataset([(airt.put(t), B.metadata(t)) for t in self._tables()])


def split_blocks(blocks, n, equal):
    """n lists of blocks: contiguous runs of about equal rows; equal=True: exactly equal rows
    (the last total % n rows dropped, as Ray's)."""
    from airt.data import _all_to_all as A
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    total = sum(m["num_rows"] for _, m in blocks)
    if equal:
        each = total // n
        if total == 0:
            return [[] for _ in range(n)]
        pieces = A.reshape(blocks, [each] * n + ([total - each * n] if total % n else []))
        return [[p] for p in pieces[:n]]
    out, at, acc = [[] for _ in range(n)], 0, 0
    for ref, meta in blocks:
        index = min(n - 1, int(acc * n / total)) if total else at % n
        out[index].append((ref, meta))
        acc += meta["num_rows"]
        at += 1
    return out


class _SplitCoordinator:
    """The actor behind streaming_split: runs the dataset per epoch, feeds n queues."""

    def __init__(self, plan_blob, context_blob, n, equal):
        self.plan = cloudpickle.loads(plan_blob)
        self.context = cloudpickle.loads(context_blob)
        self.n, self.equal = n, equal
        self.lock = threading.Condition()
        self.epoch = -1
        self.arrived = {}  # epoch -> {split: the CPUs its consumer holds}
        self.queues = None
        self.error = None

    def start_epoch(self, split, epoch, held_cpus=0.0):
        """Blocks until all n splits asked for `epoch`; the last to arrive makes the coordinator
        start it (once the previous one is over). `held_cpus`: what the split's consumer holds
        (a training rank's CPUs), which the epoch's data tasks may use (_spare_cpus)."""
        with self.lock:
            self.arrived.setdefault(epoch, {})[split] = float(held_cpus or 0)
            if len(self.arrived[epoch]) == self.n and self.epoch < epoch:
                self.epoch = epoch
                self.queues = [queue.Queue(maxsize=2) for _ in range(self.n)]
                context = self._epoch_context(sum(self.arrived[epoch].values()))
                threading.Thread(target=self._feed, args=(self.queues, context),
                                 daemon=True).start()
                self.lock.notify_all()
            self.lock.wait_for(lambda: self.epoch >= epoch)
            return self.epoch

    def _epoch_context(self, held):
        """The context of an epoch's execution: the CPUs the cluster has to spare for its data
        tasks, those its consumers hold left out (the view of what is free may not show them
        yet), and one call per consumer that may run on a consumer's CPU."""
        context = self.context.copy()
        try:
            total = float(airt.cluster_resources().get("CPU", 0))
            free = float(airt.available_resources().get("CPU", 0))
        except Exception:  # no cluster view (local mode): nothing to share
            return context
        context._spare_cpus = max(0.0, min(free, total - held))
        context._borrow_slots = self.n
        return context

    def _feed(self, queues, context):
        from airt.data import _plan
        fed = [0] * self.n
        leftover = []
        try:
            for ref, meta in _plan.stream(self.plan, None, context):
                if not self.equal:
                    i = min(range(self.n), key=lambda k: (queues[k].qsize(), fed[k]))
                    queues[i].put([ref])
                    fed[i] += meta["num_rows"]
                    continue
                table = airt.get(ref)
                each = table.num_rows // self.n
                if each:
                    for i, part in enumerate(B.split_rows(table, [each] * self.n)):
                        queues[i].put([airt.put(part)])
                if table.num_rows - each * self.n:
                    leftover.append(table.slice(each * self.n))
            if self.equal and leftover:
                rest = B.concat(leftover)
                each = rest.num_rows // self.n
                if each:
                    for i, part in enumerate(B.split_rows(rest, [each] * self.n)):
                        queues[i].put([airt.put(part)])
            for q in queues:
                q.put(None)
        except BaseException as error:  # noqa: BLE001 - raised in every consumer
            for q in queues:
                q.put(("error", repr(error)))

    def next(self, split, epoch):
        """The next block of `split` in `epoch` ([ref]), or None at its end."""
        if epoch != self.epoch:
            raise RuntimeError(f"split {split} asked for epoch {epoch} during {self.epoch}")
        item = self.queues[split].get()
        if isinstance(item, tuple):
            raise RuntimeError(f"the dataset failed: {item[1]}")
        return item


def _cpus_held():
    """The CPUs this process holds: a training rank's (its actor's, for its life, or its
    placement group bundle's), a task's; 0 in a driver."""
    try:
        held = airt.get_runtime_context().get_assigned_resources()
    except Exception:  # noqa: BLE001 - a driver holds nothing
        return 0.0
    if "CPU" in held:
        return float(held["CPU"])
    groups = {k: v for k, v in held.items() if k.startswith("CPU_group_")}
    wildcard = [v for k, v in groups.items() if k.count("_") == 2]  # CPU_group_<group>
    return float(sum(wildcard) if wildcard else sum(groups.values()))


class SplitIterator(DataIterator):
    """One of streaming_split's n iterators: each iter_batches()/iter_rows() is an epoch."""

    def __init__(self, coordinator, index, n):
        super().__init__(None)
        self._coordinator = coordinator
        self._index = index
        self._n = n
        self._epoch = 0

    def _tables(self):
        epoch = self._epoch
        self._epoch += 1
        airt.get(self._coordinator.start_epoch.remote(self._index, epoch, _cpus_held()))
        while True:
            item = airt.get(self._coordinator.next.remote(self._index, epoch))
            if item is None:
                return
            yield airt.get(item[0])

    def __repr__(self):
        return f"SplitIterator({self._index} of {self._n})"


def streaming_split(dataset, n, equal=False, locality_hints=None):
    from airt.data.context import DataContext
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if locality_hints is not None and len(locality_hints) != n:
        raise ValueError(f"locality_hints must name {n} nodes, got {len(locality_hints)}")
    ctx = DataContext.get_current().copy()
    ctx.enable_progress_bars = False
    coordinator = airt.remote(_SplitCoordinator).options(
        num_cpus=0, max_concurrency=2 * n + 4).remote(
        cloudpickle.dumps(dataset._plan), cloudpickle.dumps(ctx), n, equal)
    return [SplitIterator(coordinator, i, n) for i in range(n)]
