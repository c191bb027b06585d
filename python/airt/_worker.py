"""A Python worker: `python -m airt._worker FLAGS` (the node starts it with airt-worker's flags).

It runs airt-worker's own loop (airt._airt.run_worker); each task names a Python function by the
key under which its driver stored it, cloudpickled, in the head's KV (airt.remote_function), and
carries the call's pickled arguments, the last one the keyword arguments.
"""

import pickle
import sys
import traceback

import cloudpickle

from airt import _airt
from airt.actor import METHOD_PREFIX
from airt.exceptions import encode_cause
from airt.remote_function import FUNCTION_NAMESPACE, FUNCTION_PREFIX

_functions = {}


def _function(name):
    if name not in _functions:
        key = name[len(FUNCTION_PREFIX):]
        data = _airt.kv_get(FUNCTION_NAMESPACE, key)
        if data is None:
            raise LookupError(f"no Python function {key} in the head's function table")
        _functions[name] = cloudpickle.loads(data)
    return _functions[name]


def _call(kind, name, actor, args):
    """Runs one task: "task" and "method" answer (True, pickled return), "create" (True, the new
    instance); a failure (False, the remote traceback)."""
    try:
        positional = [pickle.loads(a) for a in args[:-1]]
        keywords = pickle.loads(args[-1]) if args else {}
        if kind == "method":
            if not name.startswith(METHOD_PREFIX):
                return False, f"{name} is not a method of a Python actor"
            result = getattr(actor, name[len(METHOD_PREFIX):])(*positional, **keywords)
            return True, pickle.dumps(result, protocol=5)
        if not name.startswith(FUNCTION_PREFIX):
            return False, f"{name} is not a Python function of airt (a C++ one on a Python worker?)"
        target = _function(name)
        if kind == "create":
            return True, target(*positional, **keywords)
        return True, pickle.dumps(target(*positional, **keywords), protocol=5)
    except BaseException as error:  # the user's error, whatever it is, goes back to the caller
        return False, traceback.format_exc() + encode_cause(error)


def main():
    # Tasks from C++ name modules on the job's code search path (airt._pymodule); tasks run on
    # the main thread, where cancel can interrupt them (airt._cancellable).
    from airt import _cancellable, _pymodule
    argv = sys.argv[1:]
    _pymodule.add_code_search_path(argv)
    return _cancellable.run_worker(argv, _pymodule.dispatching(_call))


if __name__ == "__main__":
    sys.exit(main())
