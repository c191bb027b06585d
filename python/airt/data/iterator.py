"""Consuming datasets: DataIterator (iter_batches, iter_torch_batches, iter_rows), split and
streaming_split.

streaming_split(n) starts a coordinator actor that runs the dataset's executor and hands each
output block to exactly one of n split iterators (airt.data._splitter, as Ray's OutputSplitter:
whole blocks, the least-fed iterator first, one on its locality hint's node when there is one;
with equal=True blocks wait until the buffer can equalize, and the end is cut so that each gets
total // n rows). Each epoch is a barrier: the coordinator starts the dataset anew once all n
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


class _Failed:
    def __init__(self, error):
        self.error = error


def _prefetched(items, depth):
    """`items` made ahead on a thread: at most `depth` ready beyond the one the caller holds
    (0: no thread, each made when asked for)."""
    if depth <= 0:
        yield from items
        return
    q = queue.Queue()
    done = object()
    stop = threading.Event()
    slots = threading.Semaphore(depth)  # one per item made and not yet taken by the caller

    def run():
        try:
            iterator = iter(items)
            while True:
                while not slots.acquire(timeout=0.1):
                    if stop.is_set():
                        return
                if stop.is_set():
                    return
                try:
                    item = next(iterator)
                except StopIteration:
                    break
                q.put(item)
            q.put(done)
        except BaseException as error:  # noqa: BLE001 - raised in the consumer
            q.put(_Failed(error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, _Failed):
                raise item.error
            slots.release()
            yield item
    finally:
        stop.set()
        close = getattr(items, "close", None)
        thread.join(timeout=10)
        if close is not None and not thread.is_alive():
            close()


def consume_batches(tables, batch_size, batch_format, drop_last=False,
                    local_shuffle_buffer_size=None, local_shuffle_seed=None,
                    prefetch_batches=1, collate_fn=None):
    """The batches of `tables`. As Ray's prefetch_batches: with n > 0, a thread fetches the
    blocks, cuts, shuffles, formats and collates up to n batches ahead of the one the caller
    holds; with 0, all of it runs in the caller's thread as it asks."""
    if batch_format not in B.BATCH_FORMATS and batch_format is not None:
        raise ValueError(f"batch_format must be one of {B.BATCH_FORMATS}, got {batch_format!r}")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive int or None, got {batch_size!r}")
    if not isinstance(prefetch_batches, int) or prefetch_batches < 0:
        raise ValueError(f"prefetch_batches must be an int >= 0, got {prefetch_batches!r}")

    def batches():
        for table in _rebatch(tables, batch_size, drop_last, local_shuffle_buffer_size,
                              local_shuffle_seed):
            batch = B.to_batch(table, batch_format)
            yield collate_fn(batch) if collate_fn is not None else batch

    return _prefetched(batches(), prefetch_batches)


def _to_torch(batch, dtypes, device):
    import warnings
    import torch
    out = {}
    for name, values in batch.items():
        dtype = dtypes.get(name) if isinstance(dtypes, dict) else dtypes
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # read-only arrays (views of the store)
            tensor = torch.as_tensor(values, dtype=dtype)
        out[name] = tensor.to(device) if str(device) != "cpu" else tensor
    return out


def _torch_device(device):
    """Ray's device="auto": CUDA when this worker holds a GPU (a training rank's), else CPU."""
    import torch
    if device == "auto" or device is None:
        return "cuda" if torch.cuda.is_available() and airt.get_gpu_ids() else "cpu"
    return torch.device(device)


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
        """Batches as dicts of torch tensors on `device` (the conversion and the copy to the
        device run in the prefetch thread); collate_fn (numpy batch -> what it returns)
        instead of the default conversion, with dtypes and device left to it, as Ray's."""
        if collate_fn is not None and (dtypes is not None or device != "auto"):
            raise ValueError("collate_fn cannot be used with dtypes and device. You should "
                             "manually move the output Torch tensors to the desired dtype "
                             "and device outside of collate_fn.")
        if collate_fn is None:
            target = _torch_device(device)
            collate_fn = lambda batch: _to_torch(batch, dtypes, target)  # noqa: E731
        return self.iter_batches(prefetch_batches=prefetch_batches, batch_size=batch_size,
                                 batch_format="numpy", drop_last=drop_last,
                                 local_shuffle_buffer_size=local_shuffle_buffer_size,
                                 local_shuffle_seed=local_shuffle_seed, _collate_fn=collate_fn)

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

    def __init__(self, plan_blob, context_blob, n, equal, hints=None):
        self.plan = cloudpickle.loads(plan_blob)
        self.context = cloudpickle.loads(context_blob)
        self.n, self.equal, self.hints = n, equal, hints
        self.hits = self.misses = 0
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
        from airt.data._locality import Locality
        from airt.data._splitter import OutputSplitter

        def cut(ref, start, rows):
            return airt.put(airt.get(ref).slice(start, rows))

        hints = self.hints if context.execution_options.actor_locality_enabled else None
        splitter = OutputSplitter(
            self.n, self.equal, hints, Locality().node_of if hints else None, cut,
            None if self.equal else (lambda k: queues[k].qsize()))
        try:
            for ref, meta in _plan.stream(self.plan, None, context):
                for i, out in splitter.add(ref, meta):
                    queues[i].put([out])
            for i, out in splitter.finish():
                queues[i].put([out])
            self.hits, self.misses = splitter.hits, splitter.misses
            for q in queues:
                q.put(None)
        except BaseException as error:  # noqa: BLE001 - raised in every consumer
            for q in queues:
                q.put(("error", repr(error)))

    def locality(self):
        """The blocks of the latest finished epoch given to a consumer on their node (hits)
        and to one elsewhere (misses), when locality_hints were given."""
        return {"hits": self.hits, "misses": self.misses}

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
    if locality_hints is not None:
        locality_hints = list(locality_hints)
        if len(locality_hints) != n:
            raise ValueError(f"locality_hints must name {n} nodes, got {len(locality_hints)}")
        if not all(isinstance(h, str) for h in locality_hints):
            raise ValueError(f"locality_hints must be node ids (hex strings), got "
                             f"{locality_hints!r}")
    ctx = DataContext.get_current().copy()
    ctx.enable_progress_bars = False
    coordinator = airt.remote(_SplitCoordinator).options(
        num_cpus=0, max_concurrency=2 * n + 4).remote(
        cloudpickle.dumps(dataset._plan), cloudpickle.dumps(ctx), n, equal, locality_hints)
    return [SplitIterator(coordinator, i, n) for i in range(n)]
