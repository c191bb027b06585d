"""What a trial runs: function trainables (report through airt.tune.report), class trainables
(`Trainable`: setup/step/save_checkpoint/load_checkpoint), and the wrappers with_resources and
with_parameters. Checkpoints are folders (`Checkpoint`, Ray's ray.tune.Checkpoint)."""

import contextlib
import os
import shutil
import tempfile


class Checkpoint:
    """A checkpoint: a folder on a file system every node of the cluster reaches (a local
    cluster's disk; shared storage across machines, as Ray needs without cloud storage)."""

    def __init__(self, path, filesystem=None):
        self.path = os.fspath(path)
        self.filesystem = filesystem

    @classmethod
    def from_directory(cls, path):
        return cls(os.path.abspath(os.fspath(path)))

    def to_directory(self, path=None):
        path = os.fspath(path) if path else tempfile.mkdtemp(prefix="airt-checkpoint-")
        shutil.copytree(self.path, path, dirs_exist_ok=True)
        return path

    @contextlib.contextmanager
    def as_directory(self):
        yield self.path

    def __repr__(self):
        return f"Checkpoint(filesystem=local, path={self.path})"

    def __eq__(self, other):
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self):
        return hash(self.path)


class Trainable:
    """A class trainable (Ray's tune.Trainable): `setup(config)`, `step()` returning a metrics
    dict (one report each), `save_checkpoint(checkpoint_dir)`, `load_checkpoint(checkpoint)`
    (the dict save_checkpoint returned, or the folder), `cleanup()`, `reset_config(new_config)`
    (True lets the actor be reused for another trial)."""

    def __init__(self, config=None, **kwargs):
        self.config = config or {}
        self._iteration = 0
        self.setup(dict(self.config), **kwargs)

    @property
    def iteration(self):
        return self._iteration

    @property
    def training_iteration(self):
        return self._iteration

    def setup(self, config, **kwargs):
        pass

    def step(self):
        raise NotImplementedError("a Trainable subclass must implement step()")

    def save_checkpoint(self, checkpoint_dir):
        return None

    def load_checkpoint(self, checkpoint):
        pass

    def cleanup(self):
        pass

    def reset_config(self, new_config):
        return False

    @classmethod
    def default_resource_request(cls, config):
        return None


class PlacementGroupFactory:
    """Bundles of resources for a trial (Ray's): each trial reserves a placement group of these
    bundles with `strategy`; the trial's actor runs in bundle 0, and the tasks and actors it
    starts run in the group (placement_group_capture_child_tasks), so they can use the other
    bundles. The group is removed when the trial ends. An empty first bundle ({}, as Ray's)
    is not reserved: the trial's actor then takes no resources and runs in the next one."""

    def __init__(self, bundles, strategy="PACK", *args, **kwargs):
        if not bundles or not all(isinstance(b, dict) for b in bundles):
            raise ValueError("PlacementGroupFactory needs a non-empty list of resource dicts")
        if len(bundles) < 2 and not bundles[0] or not all(bundles[1:]):
            raise ValueError(f"PlacementGroupFactory: only the first of several bundles may be "
                             f"empty, got {bundles}")
        self.bundles = [dict(b) for b in bundles]
        self.strategy = strategy

    @property
    def head_bundle_is_empty(self):
        return not self.bundles[0]

    @property
    def reserved_bundles(self):
        """The bundles the trial's group reserves (all but an empty first one)."""
        return self.bundles[1:] if self.head_bundle_is_empty else list(self.bundles)

    @property
    def required_resources(self):
        total = {}
        for bundle in self.bundles:
            for key, value in bundle.items():
                total[key] = total.get(key, 0) + value
        return total

    def __eq__(self, other):
        return isinstance(other, PlacementGroupFactory) and other.bundles == self.bundles \
            and other.strategy == self.strategy

    def __repr__(self):
        return f"PlacementGroupFactory({self.bundles}, strategy={self.strategy!r})"


def with_resources(trainable, resources):
    """The trainable, each of its trials asking for `resources`: a dict ({"CPU": 0.25,
    "GPU": 0.5}; fractions allowed), a PlacementGroupFactory, or a function of the config
    returning either."""
    if not (isinstance(resources, (dict, PlacementGroupFactory)) or callable(resources)):
        raise ValueError("with_resources takes a dict, a PlacementGroupFactory or a function")
    if isinstance(resources, dict):
        _check_shape(resources)
    if isinstance(trainable, type):
        wrapped = type(trainable.__name__, (trainable,), {})
    else:
        def wrapped(config, *args, **kwargs):
            return trainable(config, *args, **kwargs)
        wrapped.__name__ = getattr(trainable, "__name__", "trainable")
    wrapped._airt_resources = resources
    wrapped._airt_inner = trainable
    return wrapped


def with_parameters(trainable, **kwargs):
    """The trainable, called with these keyword arguments besides its config (large values,
    such as data sets, travel once with the trainable to each trial actor)."""
    if isinstance(trainable, type):
        base = trainable

        class _WithParameters(base):
            def setup(self, config, **more):
                return base.setup(self, config, **{**kwargs, **more})

        _WithParameters.__name__ = base.__name__
        _WithParameters._airt_inner = base
        _WithParameters._airt_resources = getattr(base, "_airt_resources", None)
        return _WithParameters

    def wrapped(config):
        return trainable(config, **kwargs)
    wrapped.__name__ = getattr(trainable, "__name__", "trainable")
    wrapped._airt_resources = getattr(trainable, "_airt_resources", None)
    wrapped._airt_inner = trainable
    return wrapped


def pickle_trainable(trainable):
    """The trainable cloudpickled for its trial actors. The user's module goes by value (as
    `__main__` does): a worker need not be able to import the driver's own files."""
    import sys
    import cloudpickle
    modules = set()
    inner = trainable
    while inner is not None:
        name = getattr(inner, "__module__", None)
        if name and name != "__main__" and not name.startswith("airt.") and name in sys.modules:
            modules.add(sys.modules[name])
        inner = getattr(inner, "_airt_inner", None)
    registered = []
    for module in modules:
        try:
            cloudpickle.register_pickle_by_value(module)
            registered.append(module)
        except (ValueError, AttributeError):
            pass  # a package's module a worker imports itself
    try:
        return cloudpickle.dumps(trainable)
    finally:
        for module in registered:
            cloudpickle.unregister_pickle_by_value(module)


def _check_shape(resources):
    for key, value in resources.items():
        if not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"resource {key!r} must be a non-negative number, not {value!r}")


def _spec_of(trainable, config):
    spec = getattr(trainable, "_airt_resources", None)
    if spec is None and isinstance(trainable, type) and issubclass(trainable, Trainable):
        spec = trainable.default_resource_request(config)
    if callable(spec) and not isinstance(spec, PlacementGroupFactory):
        spec = spec(config)
    return spec


def placement_group_factory_of(trainable, config):
    """The PlacementGroupFactory one trial asks for, or None when it asks for plain resources."""
    spec = _spec_of(trainable, config)
    return spec if isinstance(spec, PlacementGroupFactory) else None


def resources_of(trainable, config):
    """What one trial holds: num_cpus, num_gpus, memory, resources (all its bundles summed for a
    PlacementGroupFactory: what the sweep checks against the cluster's capacity)."""
    spec = _spec_of(trainable, config)
    if isinstance(spec, PlacementGroupFactory):
        spec = spec.required_resources
    return _actor_options(spec)


def _actor_options(spec):
    spec = dict(spec or {"CPU": 1})
    _check_shape(spec)
    options = {"num_cpus": spec.pop("CPU", 0 if spec else 1), "num_gpus": spec.pop("GPU", 0)}
    if "memory" in spec:
        options["memory"] = spec.pop("memory")
    if spec:
        options["resources"] = spec
    return options


def bundle_actor_options(factory):
    """The trial actor's own options in bundle 0 of its group (its resources come from there;
    none behind an empty head bundle)."""
    if factory.head_bundle_is_empty:
        return {"num_cpus": 0, "num_gpus": 0}
    return _actor_options(factory.bundles[0])
