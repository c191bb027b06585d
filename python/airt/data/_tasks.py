"""What runs on workers for airt.data: the streaming data task and the map actor.

Both are streaming generators (airt.generator) whose items alternate a block (a pyarrow Table,
encoded by airt.data.block.encode so readers see it in place) and its metadata (a small dict):
the executor takes each block's ref as soon as it is made. The block a task works on comes as a
top-level task argument (its ref, which the core resolves to the value on the worker), never
inside another value (refs nested in values would travel with their bytes until borrowing
lands). `skip` blocks are made but not emitted: a task rerun after its worker died gives only
what its first run did not.
"""

import pickle

import cloudpickle

from airt import _airt
from airt.data import _transforms
from airt.data import block as B


def _emit(tables, skip):
    emitter = _airt.current_generator()
    for index, table in enumerate(tables):
        if index < skip:
            continue
        if emitter is None:  # not streaming (cannot happen for a data task's call)
            raise RuntimeError("a data task must run as a streaming generator")
        emitter.emit(B.encode(table))
        emitter.emit(pickle.dumps(B.metadata(table), protocol=5))


def data_task(kind, chain, source, skip, target_max_block_size):
    """kind "read": source is a read task (a callable giving tables); "block": a table. Applies
    `chain` (a list of transforms) and emits the output blocks. A generator function, so it
    streams; its items go out through the emitter as encoded blocks."""
    chain = cloudpickle.loads(chain)
    tables = cloudpickle.loads(source)() if kind == "read" else iter([source])
    _emit(_transforms.coalesce(_transforms.apply(chain, tables), target_max_block_size), skip)
    return
    yield  # a generator function: its call streams


_REMOTE = {}


def remote(fn):
    """airt.remote(fn), made once per process."""
    if fn not in _REMOTE:
        import airt
        _REMOTE[fn] = airt.remote(fn)
    return _REMOTE[fn]


class MapWorker:
    """An actor of a map_batches actor pool: it builds the user's callable class once
    (fn_constructor_args) and runs each block it is given through it."""

    def __init__(self, blob):
        fn_class, ctor_args, ctor_kwargs, transform, after = cloudpickle.loads(blob)
        self.transform = transform.bind(fn_class(*ctor_args, **ctor_kwargs))
        self.after = after or []

    def ready(self):
        """The id of this actor's node (the pool sends it the blocks that lie there first), or
        None where there are no nodes (local mode)."""
        import airt
        try:
            return airt.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - local mode has no node list
            return None

    def process(self, block, skip, target_max_block_size):
        tables = _transforms.apply([self.transform] + self.after, iter([block]))
        _emit(_transforms.coalesce(tables, target_max_block_size), skip)
        return
        yield  # a generator method: its call streams


def one_result(fn_blob, *blocks):
    """A plain task: fn(list of tables) -> a small value (aggregates' partials)."""
    return cloudpickle.loads(fn_blob)(list(blocks))


def blocks_task(fn_blob, *blocks):
    """An all-to-all op's task: fn(list of tables) -> tables, emitted as blocks. A generator
    function: its call streams."""
    _emit(cloudpickle.loads(fn_blob)(list(blocks)), 0)
    return
    yield  # a generator function: its call streams
