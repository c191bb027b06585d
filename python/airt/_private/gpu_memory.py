"""A fractional GPU's memory share in a worker: the node sets AIRT_GPU_MEMORY_LIMIT_BYTES (the
share of the device's memory) and AIRT_GPU_MEMORY_FRACTION for a worker granted part of a GPU.
For PyTorch, the fraction becomes the per-process memory fraction of the caching allocator, set
by an import hook when user code first imports torch: no worker imports torch eagerly.

The node enforces the share whatever the framework (it stops a worker whose GPU memory exceeds it
by more than a margin); this hook makes PyTorch stay inside it by itself (an allocation beyond it
raises torch's OutOfMemoryError in the task instead)."""

import importlib.abc
import importlib.machinery
import os
import sys

# What the hook did, for the worker's log and for tests: None until torch is imported.
applied = None


def fraction():
    """The worker's GPU memory fraction, or None when it holds no fractional GPU."""
    text = os.environ.get("AIRT_GPU_MEMORY_FRACTION", "")
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value < 1 else None


def _apply(torch):
    global applied
    share = fraction()
    try:
        if not torch.cuda.is_available():
            applied = "skipped: no CUDA device"
            return
        for device in range(torch.cuda.device_count()):
            torch.cuda.set_per_process_memory_fraction(share, device)
        applied = f"set_per_process_memory_fraction({share}) on {torch.cuda.device_count()} device(s)"
    except Exception as error:  # a torch without CUDA support, or an old one
        applied = f"failed: {error!r}"


class _Loader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _apply(module)


class _TorchFinder(importlib.abc.MetaPathFinder):
    """Finds `torch` through the other finders and runs _apply once its module has executed."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)  # once: later finds go straight to the real finders
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


def install():
    """Installs the hook when the worker holds a fractional GPU and torch is not imported yet."""
    if fraction() is None:
        return False
    if "torch" in sys.modules:
        _apply(sys.modules["torch"])
        return True
    sys.meta_path.insert(0, _TorchFinder())
    return True
