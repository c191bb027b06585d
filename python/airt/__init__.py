"""airt: Ray's Python core API on airt's runtime. `import airt as ray` and go on.

    import airt as ray
    ray.init()                      # a local head and node, stopped at exit
    @ray.remote(num_cpus=1)
    def add(a, b):
        return a + b
    assert ray.get(add.remote(2, 3)) == 5

Tasks and actors run on Python workers (functions and classes cloudpickled into the head's
function table); values travel pickled with protocol 5, large ones and numpy arrays through the
node's shared-memory store, read back without a copy. C++ functions registered with AIRT_REMOTE
are called with cpp_function / cpp_actor_class. docs/python.md has the whole API.
"""

import os
import pickle
import sys

__version__ = "0.1.0"

from airt import _airt
from airt import exceptions
from airt import cross_language
from airt import runtime_context as _runtime_context
from airt import runtime_env as _runtime_env
from airt import util
from airt.cross_language import cpp_actor_class, cpp_function
from airt.object_ref import ObjectRef
from airt.generator import ObjectRefGenerator
from airt.remote_function import RemoteFunction
from airt.actor import ActorClass, ActorHandle, get_actor, kill, method
from airt.runtime_context import RuntimeContext, get_runtime_context
from airt import runtime
from airt.distributed import distributed

__all__ = [
    "init", "shutdown", "is_initialized", "put", "get", "wait", "remote", "method", "cancel",
    "cpp_function", "cpp_actor_class", "get_actor", "kill", "get_gpu_ids", "ActorHandle",
    "nodes", "cluster_resources", "available_resources", "get_runtime_context",
    "cross_language", "exceptions", "util", "ObjectRef", "ObjectRefGenerator", "distributed",
    "runtime",
]


# ray.init() arguments that change nothing here (no dashboard; airt's own logging).
_ACCEPTED_AND_IGNORED = {"include_dashboard", "logging_level", "log_to_driver",
                         "configure_logging", "_temp_dir"}


def init(address=None, *, num_cpus=None, num_gpus=None, resources=None, namespace=None,
         runtime_env=None, code_search_path=None, ignore_reinit_error=False,
         object_store_memory=None, _system_config=None, **ignored):
    """Joins a cluster, or starts a local one, as ray.init() does.

    address: "host:port" of a head; None: AIRT_ADDRESS, else a local head and node that
    shutdown() (or the process's exit) stops. num_cpus, num_gpus, resources: the local node's.
    object_store_memory: the local node's store, bytes.
    code_search_path: folders of C++ libraries (AIRT_REMOTE) this job's workers load, for
    cpp_function. namespace: where this job's named actors live and are looked up (default: an
    anonymous one of its own). runtime_env: the job's env_vars and working_dir (airt.runtime_env).
    """
    unknown = set(ignored) - _ACCEPTED_AND_IGNORED
    if unknown:
        raise TypeError(f"init() got unexpected arguments {sorted(unknown)}")
    _apply_system_config(_system_config)
    job_env = _runtime_env.validate(runtime_env)
    if namespace is not None and not isinstance(namespace, str):
        raise TypeError("namespace must be a str")
    if address == "auto":
        address = os.environ.get("AIRT_ADDRESS", "") or _address_of_local_session()
    if _airt.is_initialized():
        if ignore_reinit_error:
            return
        raise RuntimeError("airt.init() was called twice; call airt.shutdown() first")
    # A local cluster's node runs Python workers with this interpreter and this package.
    os.environ.setdefault("AIRT_PYTHON", sys.executable)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if package_root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in paths if p])
    try:
        _airt.init(address or "", list(code_search_path or []), num_cpus, num_gpus,
                   {k: float(v) for k, v in (resources or {}).items()},
                   None if object_store_memory is None else int(object_store_memory),
                   namespace or "")
    except _airt.Error as error:
        raise exceptions.translate(error) from None
    key = _runtime_env.store(job_env)
    _runtime_env.set_parent(_runtime_env.fetch(key) if key else {}, key)


def _apply_system_config(config):
    """init(_system_config=): the settings airt reads, as Ray's names. max_lineage_bytes: the
    lineage this driver keeps to rebuild lost objects (docs/fault_tolerance.md)."""
    if not config:
        return
    unknown = set(config) - {"max_lineage_bytes"}
    if unknown:
        raise ValueError(f"_system_config: airt does not read {sorted(unknown)} "
                         f"(it reads max_lineage_bytes)")
    if "max_lineage_bytes" in config:
        value = config["max_lineage_bytes"]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"_system_config max_lineage_bytes must be a byte count, got {value!r}")
        os.environ["AIRT_MAX_LINEAGE_BYTES"] = str(value)


def _address_of_local_session():
    """address="auto": the head `airt start --head` recorded on this machine (its session file
    under $AIRT_TEMP_DIR, default /tmp/airt)."""
    path = os.path.join(os.environ.get("AIRT_TEMP_DIR", "/tmp/airt"), "session", "head_address")
    try:
        with open(path) as f:
            address = f.read().strip()
    except OSError:
        address = ""
    if not address:
        raise exceptions.UnavailableError(
            f"address='auto': no cluster in AIRT_ADDRESS, and none started on this machine "
            f"({path} is missing): start one with `airt start --head`")
    return address


def shutdown():
    """Disconnects (and stops the local cluster init() started)."""
    _runtime_env.set_parent({}, None)
    _airt.shutdown()


def is_initialized():
    return _airt.is_initialized()


def put(value):
    """Stores `value` (pickled, protocol 5); its ObjectRef."""
    if isinstance(value, ObjectRef):
        raise TypeError("put() of an ObjectRef: pass the ref itself instead")
    buffers = []
    data = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    try:
        if buffers:  # large arrays: their bytes go once, straight into the store
            return ObjectRef(_airt.put_buffers(data, [b.raw() for b in buffers]), ObjectRef.PICKLE)
        return ObjectRef(_airt.put(data), ObjectRef.PICKLE)
    except _airt.Error as error:
        raise exceptions.translate(error) from None


def get(refs, *, timeout=None):
    """The value of a ref, or the values of a list of refs, waiting at most `timeout` seconds."""
    single = isinstance(refs, ObjectRef)
    refs_list = [refs] if single else list(refs)
    for r in refs_list:
        if not isinstance(r, ObjectRef):
            raise TypeError(f"get() takes ObjectRefs, got {type(r).__name__}")
    try:
        datas = _airt.get([r.binary() for r in refs_list], timeout) if refs_list else []
    except _airt.Error as error:
        raise exceptions.translate(error) from None
    values = [r._decode(data) for r, data in zip(refs_list, datas)]
    return values[0] if single else values


def wait(refs, *, num_returns=1, timeout=None, fetch_local=True):
    """(ready, not_ready) once num_returns of `refs` are ready or `timeout` seconds passed."""
    refs = list(refs)
    if num_returns < 0 or num_returns > len(refs):
        raise ValueError(f"num_returns is {num_returns} for {len(refs)} refs")
    flags = _airt.wait([r.binary() for r in refs], num_returns, timeout) if refs else []
    ready, not_ready = [], []
    for r, flag in zip(refs, flags):
        (ready if flag and len(ready) < num_returns else not_ready).append(r)
    return ready, not_ready


def cancel(ref, *, force=False, recursive=True):
    """Cancels the task that makes `ref`, as ray.cancel: get() of its returns raises
    TaskCancelledError from now on. A task not started is dropped; a running one gets a
    KeyboardInterrupt (blocking calls such as time.sleep end too), or with force its worker
    process is killed; a cancelled task is never retried. recursive: the tasks it submitted are
    cancelled too. A finished task is left alone. Only the process that submitted the task can
    cancel it. An actor method's call: one not yet sent is dropped, a sent one is dropped by
    the actor or interrupted (an async method's coroutine gets asyncio.CancelledError, a sync
    method on the actor's main thread a KeyboardInterrupt); the actor lives on. force=True on an
    actor call raises ValueError, as in Ray. An ObjectRefGenerator cancels its generator's call:
    the generator stops, and the next item's get raises TaskCancelledError."""
    if isinstance(ref, ObjectRefGenerator):
        ref = ref.completed()
    if not isinstance(ref, ObjectRef):
        raise TypeError(f"cancel() takes an ObjectRef, got {type(ref).__name__}")
    try:
        _airt.cancel(ref.binary(), bool(force), bool(recursive))
    except _airt.Error as error:
        raise exceptions.translate(error) from None


def nodes():
    """The cluster's nodes, as Ray's ray.nodes(): dicts with NodeID, Alive, NodeManagerAddress,
    Resources and Available."""
    return _airt.nodes()


def cluster_resources():
    """The total of each resource over the alive nodes."""
    return _sum_resources("Resources")


def available_resources():
    """What the alive nodes have free now (as of their last heartbeat)."""
    return _sum_resources("Available")


def _sum_resources(field):
    total = {}
    for node in _airt.nodes():
        if node["Alive"]:
            for name, amount in node[field].items():
                total[name] = total.get(name, 0.0) + amount
    return total


def get_gpu_ids():
    """The GPU ids this worker was given (its CUDA_VISIBLE_DEVICES), as Ray's get_gpu_ids."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return [int(g) for g in visible.split(",") if g.strip().isdigit()]


def remote(*args, **kwargs):
    """@airt.remote or @airt.remote(num_cpus=..., num_gpus=..., ...) on a function (a
    RemoteFunction: .remote(...) runs it on a Python worker) or a class (an ActorClass:
    .remote(...) creates an actor). The options are Ray's (airt._private.options lists them)."""
    def make(target):
        if isinstance(target, type):
            return ActorClass(target, **kwargs)
        return RemoteFunction(target, **kwargs)
    if len(args) == 1 and not kwargs and callable(args[0]):
        return make(args[0])
    if args:
        raise TypeError("airt.remote takes a function or keyword options")
    return make


# The layers load on first use, as Ray's do: `import airt` then `airt.data.range(...)` works
# without `import airt.data`, and a driver that uses none of them does not pay for importing them.
_LAZY_SUBMODULES = ("autoscaler", "data", "train", "tune")


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        import importlib
        return importlib.import_module(f"airt.{name}")
    raise AttributeError(f"module 'airt' has no attribute '{name}'")
