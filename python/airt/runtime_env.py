"""runtime_env: env_vars and working_dir, as Ray's.

Driver side: init(runtime_env=...) gives the job's; .options(runtime_env=...) a task's or an
actor's, merged over the job's (env_vars key by key). A working_dir folder is zipped, stored in the
head's KV in chunks under its SHA-256 (once per content), and replaced by "airt://<sha>"; the whole
environment is stored under the SHA-256 of its pickle, and calls carry that key only.

Worker side: the first call with a key fetches the environment; a working_dir is unpacked once per
node under the node's folder (runtime_resources/working_dir/<sha>). A task runs with the env_vars
set, the unpacked folder as its current directory and first on sys.path, all restored after it (a
worker runs one task at a time); an actor keeps its environment for its life.
"""

import fnmatch
import hashlib
import io
import os
import pickle
import shutil
import sys
import zipfile

from airt import _airt
from airt import exceptions

KV_NAMESPACE = "airt.runtime_env"
URI_PREFIX = "airt://"
CHUNK_BYTES = 4 << 20
MAX_PACKAGE_BYTES = 512 << 20  # as Ray's GCS limit for a working_dir package
SUPPORTED = {"env_vars", "working_dir", "excludes"}
_ALWAYS_EXCLUDED = {".git", "__pycache__"}


def validate(runtime_env):
    """Ray's errors for a malformed runtime_env; UnimplementedError for keys airt lacks."""
    if runtime_env is None:
        return {}
    if not isinstance(runtime_env, dict):
        raise TypeError(f"runtime_env must be a dict, got {type(runtime_env).__name__}")
    for key in runtime_env:
        if key not in SUPPORTED:
            raise exceptions.UnimplementedError(
                f"runtime_env[{key!r}]: airt supports {sorted(SUPPORTED)} (no package installs "
                "or containers on the workers)")
    env_vars = runtime_env.get("env_vars") or {}
    if not isinstance(env_vars, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
        raise TypeError("runtime_env['env_vars'] must be a dict of str to str")
    working_dir = runtime_env.get("working_dir")
    if working_dir is not None:
        if not isinstance(working_dir, str):
            raise TypeError("runtime_env['working_dir'] must be a path (str)")
        if not working_dir.startswith(URI_PREFIX) and not os.path.isdir(working_dir):
            raise ValueError(f"runtime_env['working_dir']: {working_dir} is not a directory")
    return dict(runtime_env)


def merge(parent, child):
    """`child` over `parent`, env_vars merged key by key (Ray's inheritance)."""
    if not parent:
        return dict(child or {})
    if not child:
        return dict(parent)
    merged = {**parent, **child}
    if "env_vars" in parent or "env_vars" in child:
        merged["env_vars"] = {**(parent.get("env_vars") or {}), **(child.get("env_vars") or {})}
    return merged


def _zip_folder(folder, excludes):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in _ALWAYS_EXCLUDED)
            for name in sorted(files):
                path = os.path.join(root, name)
                relative = os.path.relpath(path, folder)
                if any(fnmatch.fnmatch(relative, pattern) for pattern in excludes):
                    continue
                archive.write(path, relative)
                if buffer.tell() > MAX_PACKAGE_BYTES:
                    raise ValueError(f"runtime_env['working_dir']: {folder} packs to more than "
                                     f"{MAX_PACKAGE_BYTES >> 20} MiB; exclude large files "
                                     "(runtime_env['excludes'])")
    return buffer.getvalue()


def _upload_working_dir(folder, excludes):
    package = _zip_folder(folder, excludes)
    sha = hashlib.sha256(package).hexdigest()
    if _airt.kv_get(KV_NAMESPACE, f"pkg:{sha}:n") is None:
        chunks = [package[i:i + CHUNK_BYTES] for i in range(0, len(package), CHUNK_BYTES)] or [b""]
        for i, chunk in enumerate(chunks):
            _airt.kv_put(KV_NAMESPACE, f"pkg:{sha}:{i}", chunk, True)
        _airt.kv_put(KV_NAMESPACE, f"pkg:{sha}:n", str(len(chunks)).encode(), True)
    return URI_PREFIX + sha


_uploaded = {}  # (folder, excludes) -> uri, for this driver's life


def store(runtime_env):
    """Stores `runtime_env` (a validated, merged one) in the cluster; the key calls carry, or
    None for an empty one."""
    if not runtime_env:
        return None
    stored = {}
    if runtime_env.get("env_vars"):
        stored["env_vars"] = dict(runtime_env["env_vars"])
    working_dir = runtime_env.get("working_dir")
    if working_dir:
        if working_dir.startswith(URI_PREFIX):
            stored["working_dir"] = working_dir
        else:
            excludes = tuple(runtime_env.get("excludes") or ())
            cache_key = (os.path.abspath(working_dir), excludes)
            if cache_key not in _uploaded:
                _uploaded[cache_key] = _upload_working_dir(working_dir, excludes)
            stored["working_dir"] = _uploaded[cache_key]
    if not stored:
        return None
    data = pickle.dumps(stored, protocol=5)
    key = hashlib.sha256(data).hexdigest()
    _airt.kv_put(KV_NAMESPACE, "env:" + key, data, False)
    return key


# Worker side.

_environments = {}  # key -> the stored dict


def fetch(key):
    if key not in _environments:
        data = _airt.kv_get(KV_NAMESPACE, "env:" + key)
        if data is None:
            raise LookupError(f"runtime_env {key} is not in the head's KV")
        _environments[key] = pickle.loads(data)
    return _environments[key]


def _node_folder():
    return os.environ.get("AIRT_NODE_DIR") or os.path.join(os.path.expanduser("~"), ".airt")


def unpacked_working_dir(uri):
    """The folder `uri`'s package is unpacked to on this node, unpacking it the first time."""
    sha = uri[len(URI_PREFIX):]
    target = os.path.join(_node_folder(), "runtime_resources", "working_dir", sha)
    if os.path.isdir(target):
        return target
    count = _airt.kv_get(KV_NAMESPACE, f"pkg:{sha}:n")
    if count is None:
        raise LookupError(f"working_dir package {sha} is not in the head's KV")
    package = b"".join(_airt.kv_get(KV_NAMESPACE, f"pkg:{sha}:{i}") or b""
                       for i in range(int(count)))
    if hashlib.sha256(package).hexdigest() != sha:
        raise ValueError(f"working_dir package {sha}: its bytes do not match their hash")
    partial = f"{target}.partial-{os.getpid()}"
    with zipfile.ZipFile(io.BytesIO(package)) as archive:
        archive.extractall(partial)
    try:
        os.rename(partial, target)  # another worker may have won the race: theirs is the same
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
    return target


class Applied:
    """An environment applied to this process; restore() puts back what it changed."""

    def __init__(self, key):
        self._saved_env = {}
        self._saved_cwd = None
        self._path_entry = None
        if not key:
            return
        environment = fetch(key)
        for name, value in (environment.get("env_vars") or {}).items():
            self._saved_env[name] = os.environ.get(name)
            os.environ[name] = value
        uri = environment.get("working_dir")
        if uri:
            folder = unpacked_working_dir(uri)
            self._saved_cwd = os.getcwd()
            os.chdir(folder)
            sys.path.insert(0, folder)
            self._path_entry = folder

    def restore(self):
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self._saved_cwd is not None:
            os.chdir(self._saved_cwd)
        if self._path_entry is not None and self._path_entry in sys.path:
            sys.path.remove(self._path_entry)


# What new calls inherit: the driver's init(runtime_env=...), or in a worker the running call's.
_parent = {"env": {}, "key": None}
_stored = {}  # the pickle of a merged environment -> its key, for this process's life


def set_parent(environment, key):
    _parent["env"] = environment or {}
    _parent["key"] = key


def parent():
    return _parent["env"], _parent["key"]


def key_for(option_env):
    """The key a call with `option_env` (its runtime_env option, or None) carries."""
    if not option_env:
        return _parent["key"]
    merged = merge(_parent["env"], validate(option_env))
    signature = pickle.dumps(sorted((k, repr(v)) for k, v in merged.items()))
    if signature not in _stored:
        _stored[signature] = store(merged)
    return _stored[signature]
