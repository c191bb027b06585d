"""A gang of ranks: one actor per rank, reserved together as a placement group, given the
torchrun environment, and stopped together. Used by the trainers and by @airt.distributed.

Ranks are numbered node by node (the nodes in the order of their first bundle), so each node's
ranks are contiguous: LOCAL_RANK is the place among them, NODE_RANK the node's place, and
CUDA_VISIBLE_DEVICES lists the GPUs of the node's ranks in local-rank order, so that LOCAL_RANK
indexes this rank's own device."""

import os
import socket
import time

import cloudpickle

# How long a gang no alive node can hold waits for such a node to join before start() gives up,
# when no autoscaler could add one (a task's lease waits as long: airt-node --infeasible-grace-ms).
INFEASIBLE_GRACE_S = 10.0


# How long the other ranks get to time out too, once one rank's torch collective has.
_TORCH_HANG_GRACE_S = 10.0


def _is_torch_collective_timeout(error):
    """Whether a rank's error is torch.distributed's own collective timeout (gloo's "Timed out
    waiting ...ms for recv/send", NCCL's watchdog), which does not say which rank hung."""
    text = str(error)
    return (("gloo" in text and "Timed out waiting" in text)
            or "Watchdog caught collective operation timeout" in text)


class GangFailure(Exception):
    """A rank failed. kind "raised": its loop raised; "died": its process or node died; "hung":
    it never reached a collective on which another rank passed the group's deadline (`cause` is
    that rank's error, a CollectiveTimeoutError inside; `reporter` that rank's number)."""

    def __init__(self, rank, node_id, pid, cause, died, hung_in=None, reporter=None):
        self.kind = "died" if died else ("hung" if hung_in else "raised")
        what = f"{self.kind}: {cause}"
        if hung_in:
            what = (f"hung: it never reached {hung_in}, on which rank {reporter} passed the "
                    f"group's deadline: {cause}")
        super().__init__(f"rank {rank} (node {node_id}, pid {pid}) {what}")
        self.rank, self.node_id, self.pid, self.cause, self.died = rank, node_id, pid, cause, died
        self.hung_in, self.reporter, self.what = hung_in, reporter, what


class RankWorker:
    """The actor of one rank."""

    def describe(self):
        import airt
        return {"pid": os.getpid(), "node_id": airt.get_runtime_context().get_node_id(),
                "ip": airt.util.get_node_ip_address(), "gpu_ids": airt.get_gpu_ids()}

    def free_port(self, host):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            return s.getsockname()[1]

    def check_storage(self, run_dir, token_name, token):
        """Empty when this node sees the driver's token file in run_dir and can write there;
        else why not."""
        try:
            with open(os.path.join(run_dir, token_name)) as f:
                if f.read() != token:
                    return f"{run_dir} holds another file {token_name}: not the same storage"
            probe = os.path.join(run_dir, f"{token_name}.{os.getpid()}")
            with open(probe, "w") as f:
                f.write("ok")
            os.remove(probe)
        except OSError as error:
            return f"{type(error).__name__}: {error}"
        return ""

    def setup(self, env, torch_backend, timeout_s):
        """Sets the rank's environment; with torch_backend ("auto", "gloo", "nccl") initialises
        torch.distributed (nccl where a CUDA device is visible for "auto"). The backend used."""
        os.environ.update(env)
        if not torch_backend:
            return None
        import datetime
        import torch
        import torch.distributed as dist
        backend = torch_backend
        if backend == "auto":
            backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(env["LOCAL_RANK"]) % max(1, torch.cuda.device_count()))
        dist.init_process_group(backend, init_method="env://",
                                timeout=datetime.timedelta(seconds=timeout_s))
        return backend

    def run(self, payload):
        fn, args, kwargs = cloudpickle.loads(payload)
        return fn(*args, **kwargs)


_remote_worker = None


def _worker_class():
    global _remote_worker
    if _remote_worker is None:
        import airt
        _remote_worker = airt.remote(RankWorker)
    return _remote_worker


class Gang:
    """num_workers ranks of `bundle` each with `strategy`; label_selectors: None, or one dict per
    rank's bundle (the nodes whose labels it matches: Ray's bundle_label_selector)."""

    def __init__(self, num_workers, bundle, strategy="PACK", runtime_env=None,
                 label_selectors=None, group=None):
        """group: (an already reserved placement group, the index of its first bundle for the
        ranks) to run in instead of reserving one (a Tune trial's group); it is not removed."""
        self.num_workers, self.bundle, self.strategy = num_workers, dict(bundle), strategy
        self.runtime_env = runtime_env
        self.label_selectors = label_selectors
        self.group = group
        self.pg = None
        self.actors = []   # in world-rank order once started
        self.ranks = []    # {"world_rank", "local_rank", "local_world_size", "node_rank", ...}

    def start(self, wait_s=None):
        """Reserves the bundles (waiting for them, at most wait_s seconds), starts one actor per
        bundle and numbers the ranks. Raises TimeoutError when the group is not reserved, and
        InfeasibleError when no alive node can hold it (its labels or totals) for
        INFEASIBLE_GRACE_S and no autoscaler is configured to add one."""
        from airt.util import placement_group
        from airt.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        first = 0
        if self.group is not None:
            self.pg, first = self.group
        else:
            self.pg = placement_group([self.bundle] * self.num_workers, strategy=self.strategy,
                                      bundle_label_selector=self.label_selectors)
        self._wait_reserved(wait_s)
        import airt
        resources = {k: v for k, v in self.bundle.items() if k not in ("CPU", "GPU")}
        options = dict(num_cpus=self.bundle.get("CPU", 0), num_gpus=self.bundle.get("GPU", 0),
                       resources=resources or None, max_restarts=0)
        if self.runtime_env:
            options["runtime_env"] = self.runtime_env
        actors = [_worker_class().options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(self.pg, first + i),
            **options).remote()
            for i in range(self.num_workers)]
        self.actors = actors
        self.ranks = [dict(pid=None, node_id=None) for _ in actors]
        described = self.call_each([(a.describe, ()) for a in actors])
        order = {}  # node id -> its bundles, nodes in the order of their first bundle
        for i, d in enumerate(described):
            order.setdefault(d["node_id"], []).append(i)
        self.actors, self.ranks = [], []
        for node_rank, (node_id, bundles) in enumerate(order.items()):
            for local_rank, i in enumerate(bundles):
                self.actors.append(actors[i])
                self.ranks.append(dict(described[i], world_rank=len(self.ranks),
                                       local_rank=local_rank, local_world_size=len(bundles),
                                       node_rank=node_rank))

    def _wait_reserved(self, wait_s):
        import importlib
        from airt import _airt, exceptions
        # The module (airt.util's attribute of that name is the function).
        pg_module = importlib.import_module("airt.util.placement_group")
        deadline = None if wait_s is None else time.monotonic() + wait_s
        infeasible_since = None
        while not _airt.wait_placement_group(self.pg.id.hex(), 1.0):
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise TimeoutError(f"the gang's {self.num_workers} bundles {self.bundle} "
                                   f"({self.strategy}) were not reserved in {wait_s} s")
            entry = pg_module._entry(self.pg.id.hex()) or {}
            if not entry.get("infeasible") or _airt.kv_get("autoscaler", "node_types"):
                infeasible_since = None
                continue
            infeasible_since = infeasible_since or now
            if now - infeasible_since >= INFEASIBLE_GRACE_S:
                selectors = (f", label_selector {self.label_selectors}"
                             if self.label_selectors else "")
                raise exceptions.InfeasibleError(
                    f"no alive node can hold the gang's {self.num_workers} bundles "
                    f"{self.bundle} ({self.strategy}{selectors}), and no autoscaler is "
                    f"configured to add one: {entry.get('pending_reason')}")

    def environments(self):
        """Each rank's torchrun environment and CUDA_VISIBLE_DEVICES."""
        import airt
        master = self.ranks[0]
        port = airt.get(self.actors[0].free_port.remote(master["ip"]))
        node_gpus = {}
        for r in self.ranks:
            node_gpus.setdefault(r["node_id"], []).extend(str(g) for g in r["gpu_ids"])
        return [{"MASTER_ADDR": master["ip"], "MASTER_PORT": str(port),
                 "RANK": str(r["world_rank"]), "LOCAL_RANK": str(r["local_rank"]),
                 "WORLD_SIZE": str(len(self.ranks)),
                 "LOCAL_WORLD_SIZE": str(r["local_world_size"]),
                 "NODE_RANK": str(r["node_rank"]),
                 "CUDA_VISIBLE_DEVICES": ",".join(node_gpus[r["node_id"]])}
                for r in self.ranks]

    def setup(self, torch_backend=None, timeout_s=1800):
        envs = self.environments()
        return self.call_each([(a.setup, (env, torch_backend, timeout_s))
                               for a, env in zip(self.actors, envs)]), envs

    def run(self, fn, args_per_rank, kwargs=None, beside=None):
        """Runs fn(*args_per_rank[rank], **kwargs) on every rank; the return values in rank
        order. Raises GangFailure for the first rank that raised or died. beside: see
        call_each."""
        return self.call_each([(a.run, (cloudpickle.dumps((fn, args, kwargs or {})),))
                               for a, args in zip(self.actors, args_per_rank)], beside)

    def call_each(self, calls, beside=None):
        """Calls calls[rank] = (method, args) on every rank at once; their results in rank
        order, or GangFailure for the first failure seen. beside: an object whose `ref` (an
        ObjectRef, or None) is waited on with the calls; when it is ready, beside.ready() runs
        on this thread (and sets the next ref); once every call returned, beside.drain()."""
        import airt
        from airt import exceptions
        refs = [method.remote(*args) for method, args in calls]
        index = {ref.binary(): i for i, ref in enumerate(refs)}
        results, pending = [None] * len(refs), list(refs)
        while pending:
            extra = beside.ref if beside is not None else None
            ready, _ = airt.wait(pending + ([extra] if extra is not None else []),
                                 num_returns=1)
            for ref in ready:
                if extra is not None and ref.binary() == extra.binary():
                    beside.ready()
                    continue
                pending = [p for p in pending if p.binary() != ref.binary()]
                i = index[ref.binary()]
                try:
                    results[i] = airt.get(ref)
                except (exceptions.RayActorError, exceptions.WorkerCrashedError) as error:
                    raise self._failure(i, error, True) from None
                except exceptions.RayError as error:
                    if self._hung_rank(error) is None and _is_torch_collective_timeout(error):
                        hung = self._still_running(pending, index)
                        if hung is not None:
                            raise self._torch_hang(hung, i, error) from None
                    raise self._failure(i, error, False) from None
        if beside is not None:
            beside.drain()
        return results

    def _failure(self, i, error, died):
        r = self.ranks[i] if i < len(self.ranks) else {}
        hung = None if died else self._hung_rank(error)
        if hung is not None:
            h, where = hung
            return GangFailure(h["world_rank"], h.get("node_id"), h.get("pid"), error, False,
                               hung_in=where, reporter=r.get("world_rank", i))
        return GangFailure(r.get("world_rank", i), r.get("node_id"), r.get("pid"), error, died)

    def _still_running(self, pending, index):
        """After a torch.distributed timeout on one rank, the others that waited in the same
        collective time out too, within moments: the first rank whose call still runs after
        that grace is the one that never reached the collective (None when every call ended)."""
        import airt
        _, running = airt.wait(pending, num_returns=len(pending), timeout=_TORCH_HANG_GRACE_S)
        return min((index[ref.binary()] for ref in running), default=None)

    def _torch_hang(self, hung, reporter, error):
        h = self.ranks[hung] if hung < len(self.ranks) else {}
        r = self.ranks[reporter] if reporter < len(self.ranks) else {}
        return GangFailure(h.get("world_rank", hung), h.get("node_id"), h.get("pid"), error,
                           False, hung_in="a torch.distributed collective",
                           reporter=r.get("world_rank", reporter))

    def _hung_rank(self, error):
        """For a rank's CollectiveTimeoutError: (the rank it names first as never having reached
        the operation, found by pid, and "allreduce #3 of collective group 'g'"); else None."""
        from airt.util.collective import CollectiveTimeoutError
        timeout = getattr(error, "cause", None)
        if not isinstance(timeout, CollectiveTimeoutError):
            return None
        by_pid = {r.get("pid"): r for r in self.ranks}
        for named in timeout.never_reached:
            if named["pid"] in by_pid:
                group = f"collective group '{timeout.group_name}'"
                if not timeout.sequence:  # a send/recv: the named rank is the peer
                    return by_pid[named["pid"]], f"its end of a {timeout.operation} of {group}"
                return by_pid[named["pid"]], f"{timeout.operation} #{timeout.sequence} of {group}"
        return None

    def shutdown(self):
        """Kills every rank's process and gives the bundles back."""
        import airt
        from airt.util import remove_placement_group
        for actor in self.actors:
            try:
                airt.kill(actor)
            except Exception:  # noqa: BLE001 (already dead)
                pass
        self.actors = []
        if self.pg is not None and self.group is None:
            try:
                remove_placement_group(self.pg)
            except Exception:  # noqa: BLE001 (already removed)
                pass
            self.pg = None
