"""get_runtime_context(): Ray's RuntimeContext, the job, node, worker, task and actor the calling
code runs in. Every answer is read when asked (a context kept from earlier still answers for the
task running now), as Ray's does."""

import json
import os
import threading
import warnings

from airt import _airt
from airt import runtime_env as _runtime_env

# Set by airt._private.worker in a worker process (Ray's WORKER_MODE); a driver leaves it False.
_worker_mode = [False]
# The actor this worker hosts, recorded while its creation task runs (its methods' tasks carry
# none of this): {"name", "resources", "restarts"}.
_actor = {}

# Resource names that are not resources a task holds: Ray's "node:<address>" constraints.
_CONSTRAINT_PREFIX = "node:"
# Whether the task running on this thread was started with placement_group_capture_child_tasks
# (airt._private.worker sets it from the call's settings).
_task_capture = threading.local()


def enter_worker_mode():
    _worker_mode[0] = True


def record_actor_creation(capture=False):
    """Called by the worker inside an actor's creation task: what the actor is, for its life."""
    name, resources, restarts = _airt.current_task_info()
    _actor.update(name=name, resources=_held(resources), restarts=int(restarts),
                  id=_running()[1].hex(), capture=bool(capture))


def set_task_capture(capture):
    """The running task's placement_group_capture_child_tasks (airt._private.worker)."""
    _task_capture.value = bool(capture)


def captures_child_tasks():
    """Whether work started here without a strategy of its own runs in the running task's (or
    actor's) placement group, as Ray's placement_group_capture_child_tasks."""
    if not _worker_mode[0]:
        return False
    if _actor:
        return bool(_actor.get("capture", False))
    return bool(getattr(_task_capture, "value", False))


def _held(resources):
    return {k: float(v) for k, v in resources.items() if not k.startswith(_CONSTRAINT_PREFIX)}


def _running():
    """(task id, actor id) binary of the running call; empty bytes outside one."""
    from airt.actor import running_call
    # An async actor's coroutine runs on the actor's loop thread: its ids travel with it.
    return running_call.get() or _airt.current_task()


def _deprecated(name, instead):
    warnings.warn(f"RuntimeContext.{name} is deprecated: use {instead}() instead",
                  DeprecationWarning, stacklevel=3)


def _check_initialized(what):
    if not _airt.is_initialized():
        raise RuntimeError(f"{what} is not available because airt has not been initialized.")


class RuntimeContext:
    """What get_runtime_context() returns; ids are hex strings."""

    def get_job_id(self):
        _check_initialized("Job ID")
        return _airt.job_id()

    def get_node_id(self):
        """The node this process runs on."""
        _check_initialized("Node ID")
        local = [n for n in _airt.nodes() if n["Local"]]
        return local[0]["NodeID"] if local else None

    def get_worker_id(self):
        """This process's worker id (a driver has one too)."""
        _check_initialized("Worker ID")
        return _airt.worker_id()

    def get_task_id(self):
        """The running task's id; None in a driver."""
        if not _worker_mode[0]:
            return None
        task = _running()[0]
        return task.hex() or None

    def get_task_name(self):
        """The running task's name (its function's name unless .options(name=) gave one);
        None in a driver."""
        if not _worker_mode[0]:
            return None
        return _airt.current_task_info()[0] or None

    def get_actor_id(self):
        """The actor this process hosts (from any of its threads, as Ray: a Tune trial's thread
        too); None outside an actor."""
        if not _worker_mode[0]:
            return None
        actor = _running()[1]
        return actor.hex() or _actor.get("id") or None

    def get_actor_name(self):
        """The actor's name: "" for an unnamed actor, None outside an actor."""
        if self.get_actor_id() is None:
            return None
        return _actor.get("name", "")

    @property
    def namespace(self):
        """The job's namespace: its driver's init(namespace=...), else the job's anonymous one
        (in the driver and in every task and actor of the job)."""
        return _airt.namespace()

    @property
    def was_current_actor_reconstructed(self):
        """Whether this actor was restarted (its process died, or kill(no_restart=False))."""
        assert self.get_actor_id() is not None, "This method shouldn't be called inside tasks."
        return _actor.get("restarts", 0) != 0

    def get_placement_group_id(self):
        """The hex id of the placement group the running task or actor was scheduled into, or
        None (outside one, and in a driver)."""
        from airt.util.scheduling_strategies import _group_of_resources
        if not _worker_mode[0]:
            return None
        return _group_of_resources(self.get_assigned_resources())

    @property
    def current_placement_group_id(self):
        _deprecated("current_placement_group_id", "get_placement_group_id")
        return self.get_placement_group_id()

    @property
    def should_capture_child_tasks_in_placement_group(self):
        return captures_child_tasks()

    def get_assigned_resources(self):
        """What the running task holds ({"CPU": 1.0} for a default task); in an actor, what the
        actor holds for its life ({} by default, as Ray)."""
        assert _worker_mode[0], ("This method is only available when the process is a worker. "
                                 "Current mode: a driver")
        if self.get_actor_id() is not None:
            return dict(_actor.get("resources", {}))
        return _held(_airt.current_task_info()[1])

    def get_accelerator_ids(self):
        """The accelerator ids this worker may use, by resource: {"GPU": ["0"]} from the
        CUDA_VISIBLE_DEVICES its node set; empty lists in a driver or a task holding no GPU."""
        gpus = []
        if _worker_mode[0] and self.get_assigned_resources().get("GPU", 0) > 0:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
            gpus = [g.strip() for g in visible.split(",") if g.strip()]
        return {"GPU": gpus}

    def get_resource_ids(self):
        _deprecated("get_resource_ids", "get_accelerator_ids")
        return self.get_accelerator_ids()

    def get_runtime_env_string(self):
        """The runtime_env of the running call (or of the driver's job) as JSON; '{}' for none."""
        return json.dumps(_runtime_env.parent()[0], sort_keys=True)

    @property
    def runtime_env(self):
        """The runtime_env as a dict (Ray gives a RuntimeEnv, a dict subclass)."""
        return json.loads(self.get_runtime_env_string())

    @property
    def current_actor(self):
        """A handle to the actor this code runs in."""
        from airt.actor import ActorHandle
        actor = self.get_actor_id()
        if actor is None:
            raise RuntimeError("This method is only available in an actor.")
        return ActorHandle(bytes.fromhex(actor))

    @property
    def gcs_address(self):
        """The head's address, host:port (Ray's GCS is airt's head)."""
        _check_initialized("The head's address")
        return _airt.head_address()

    def get_node_labels(self):
        """{}: airt's nodes carry no labels yet (accelerator_type aside)."""
        return {}

    # Ray's deprecated properties, still there.
    @property
    def job_id(self):
        _deprecated("job_id", "get_job_id")
        return self.get_job_id()

    @property
    def node_id(self):
        _deprecated("node_id", "get_node_id")
        return self.get_node_id()

    @property
    def task_id(self):
        _deprecated("task_id", "get_task_id")
        return self.get_task_id()

    @property
    def actor_id(self):
        _deprecated("actor_id", "get_actor_id")
        return self.get_actor_id()

    def get(self):
        """{job_id, node_id, namespace}, plus task_id and actor_id in a worker (deprecated)."""
        context = {"job_id": self.get_job_id(), "node_id": self.get_node_id(),
                   "namespace": self.namespace}
        if _worker_mode[0]:
            if self.get_task_id() is not None:
                context["task_id"] = self.get_task_id()
            if self.get_actor_id() is not None:
                context["actor_id"] = self.get_actor_id()
        return context


_context = RuntimeContext()


def get_runtime_context():
    return _context
