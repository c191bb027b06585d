"""airt: Ray's Python core API on airt's runtime (issue 4's first slice).

What works now: init / shutdown / is_initialized, put / get / wait of Python values (pickle
protocol 5) on a local or joined cluster, ObjectRefs counted by the owner (an object goes when
its last ObjectRef does), Python functions run by Python workers (@remote), and C++ functions
registered with AIRT_REMOTE called from Python (cpp_function, msgpack arguments). Python actors
are not built yet: `remote` on a class raises UnimplementedError naming that.

    import airt as ray
    ray.init(code_search_path=["build/examples"])
    ref = ray.put({"a": 1})
    assert ray.get(ref) == {"a": 1}
    add = ray.cpp_function("Add")
    assert ray.get(add.remote(2, 3)) == 5
"""

import os
import pickle
import sys

__version__ = "0.1.0"

from airt import _airt
from airt import exceptions
from airt import cross_language
from airt.cross_language import cpp_function
from airt.object_ref import ObjectRef
from airt.remote_function import RemoteFunction
from airt.actor import ActorClass, ActorHandle, get_actor, kill

__all__ = [
    "init", "shutdown", "is_initialized", "put", "get", "wait", "remote", "cpp_function",
    "get_actor", "kill", "get_gpu_ids", "ActorHandle", "nodes", "cluster_resources",
    "available_resources", "get_runtime_context", "cancel",
    "cross_language", "exceptions", "ObjectRef",
]


# ray.init() arguments that change nothing here (no dashboard; airt's own logging).
_ACCEPTED_AND_IGNORED = {"include_dashboard", "logging_level", "log_to_driver",
                         "configure_logging", "_temp_dir"}


def init(address=None, *, num_cpus=None, num_gpus=None, resources=None, namespace=None,
         runtime_env=None, code_search_path=None, ignore_reinit_error=False,
         object_store_memory=None, **ignored):
    """Joins a cluster, or starts a local one, as ray.init() does.

    address: "host:port" of a head; None: AIRT_ADDRESS, else a local head and node that
    shutdown() (or the process's exit) stops. num_cpus, num_gpus, resources: the local node's.
    object_store_memory: the local node's store, bytes.
    code_search_path: folders of C++ libraries (AIRT_REMOTE) this job's workers load, for
    cpp_function. namespace and runtime_env are not supported yet.
    """
    unknown = set(ignored) - _ACCEPTED_AND_IGNORED
    if unknown:
        raise TypeError(f"init() got unexpected arguments {sorted(unknown)}")
    if runtime_env:
        raise exceptions.UnimplementedError(
            "runtime_env: it applies to Python workers, which are not built yet")
    if namespace is not None:
        raise exceptions.UnimplementedError(
            "namespace: it names Python actors, which are not built yet")
    if address == "auto":
        address = os.environ.get("AIRT_ADDRESS", "")
        if not address:
            raise exceptions.UnavailableError(
                "address='auto': no cluster address in AIRT_ADDRESS (start one with `airt start "
                "--head` and set it)")
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
                   None if object_store_memory is None else int(object_store_memory))
    except _airt.Error as error:
        raise exceptions.translate(error) from None


def shutdown():
    """Disconnects (and stops the local cluster init() started)."""
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
        datas = _airt.get([r.binary() for r in refs_list], timeout)
    except _airt.Error as error:
        raise exceptions.translate(error) from None
    values = [r._decode(d) for r, d in zip(refs_list, datas)]
    return values[0] if single else values


def wait(refs, *, num_returns=1, timeout=None, fetch_local=True):
    """(ready, not_ready) once num_returns of `refs` are ready or `timeout` seconds passed."""
    refs = list(refs)
    if num_returns < 0 or num_returns > len(refs):
        raise ValueError(f"num_returns is {num_returns} for {len(refs)} refs")
    ready_flags = _airt.wait([r.binary() for r in refs], num_returns, timeout)
    ready, not_ready = [], []
    for r, flag in zip(refs, ready_flags):
        (ready if flag and len(ready) < num_returns else not_ready).append(r)
    return ready, not_ready


def cancel(ref, *, force=False, recursive=True):
    """Cancels the task that makes `ref`, as ray.cancel: get() of its returns raises
    TaskCancelledError from now on. A task not started is dropped; a running one gets a
    KeyboardInterrupt (blocking calls such as time.sleep end too), or with force its worker
    process is killed; a cancelled task is never retried. recursive: the tasks it submitted are
    cancelled too. A finished task is left alone. Only the process that submitted the task can
    cancel it; actor method calls cannot be cancelled yet (UnimplementedError)."""
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


class RuntimeContext:
    """get_runtime_context(): the job and node this process runs in."""

    def __init__(self):
        self._job_id = _airt.job_id()
        local = [n for n in _airt.nodes() if n["Local"]]
        self._node_id = local[0]["NodeID"] if local else None

    def get_job_id(self):
        return self._job_id

    def get_node_id(self):
        return self._node_id

    def get_task_id(self):
        raise exceptions.UnimplementedError("get_task_id: task ids in workers are not exposed yet")

    def get_actor_id(self):
        raise exceptions.UnimplementedError("get_actor_id: actor ids in workers are not exposed yet")

    @property
    def job_id(self):
        return self._job_id

    @property
    def node_id(self):
        return self._node_id


def get_runtime_context():
    return RuntimeContext()


def get_gpu_ids():
    """The GPU ids this worker was given (its CUDA_VISIBLE_DEVICES), as Ray's get_gpu_ids."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return [int(g) for g in visible.split(",") if g.strip().isdigit()]


def remote(*args, **kwargs):
    """@airt.remote or @airt.remote(num_cpus=..., num_gpus=..., resources=..., max_retries=...)
    on a function: a RemoteFunction whose .remote(...) runs it on a Python worker. Classes
    (actors) are not built yet."""
    def make(target):
        if isinstance(target, type):
            return ActorClass(target, **kwargs)
        return RemoteFunction(target, **kwargs)
    if len(args) == 1 and not kwargs and callable(args[0]):
        return make(args[0])
    if args:
        raise TypeError("airt.remote takes a function or keyword options")
    return make
