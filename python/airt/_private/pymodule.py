"""Python functions and actors called from C++ (airt::PyFunction, airt::PyActorClass): the
worker side.

A C++ driver names them by module, not by a pickle in the head's function table, so the worker
imports them: "pymodule:<module>:<attribute>" is a function (or, for an actor's creation, a class)
found by importing <module> and walking the dotted <attribute>; "pymodule.method:<name>" is a
method of the actor this worker hosts. Arguments and returns are msgpack, as for C++ functions.
The module must be importable: the job's code search path folders are put first on sys.path
(add_code_search_path), as Ray's workers do with the C++ driver's code search path.
"""

import importlib
import os
import sys
import traceback

from airt.object_ref import decode_msgpack, encode_msgpack

FUNCTION_PREFIX = "pymodule:"
METHOD_PREFIX = "pymodule.method:"

_CODE_SEARCH_PATH_FLAG = "--code-search-path="

_targets = {}


def add_code_search_path(argv):
    """Puts the folders of the worker's --code-search-path (the node's and the job's code, as
    airt-worker gets them) first on sys.path, in their order. Library files are left out."""
    folders = []
    for arg in argv:
        if arg.startswith(_CODE_SEARCH_PATH_FLAG):
            folders += [p for p in arg[len(_CODE_SEARCH_PATH_FLAG):].split(":") if p]
    folders = [os.path.abspath(p) for p in folders if os.path.isdir(p)]
    sys.path[:0] = [p for p in dict.fromkeys(folders) if p not in sys.path]


def _target(name):
    """The function or class "pymodule:<module>:<attribute>" names."""
    if name not in _targets:
        module_name, colon, attribute = name[len(FUNCTION_PREFIX):].partition(":")
        if not colon or not module_name or not attribute:
            raise ValueError(f"{name!r} is not pymodule:<module>:<attribute>")
        target = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
        if not callable(target):
            raise TypeError(f"{module_name}:{attribute} is a {type(target).__name__}, not callable")
        _targets[name] = target
    return _targets[name]


def call(kind, name, actor, args):
    """Runs one call from C++ as the worker's fallback does: "task" and "method" answer (True,
    the msgpack return), "create" (True, the new instance); a failure (False, the traceback)."""
    try:
        values = [decode_msgpack(a) for a in args]
        if kind == "method":
            if not name.startswith(METHOD_PREFIX):
                return False, f"{name} is not a method of an actor made from C++"
            result = getattr(actor, name[len(METHOD_PREFIX):])(*values)
        else:
            if not name.startswith(FUNCTION_PREFIX):
                return False, f"{name} is a method name, called as a {kind}"
            result = _target(name)(*values)
            if kind == "create":
                return True, result
        return True, encode_msgpack(result)
    except BaseException:  # the user's error, whatever it is, goes back to the C++ caller
        return False, traceback.format_exc()


def dispatching(fallback):
    """`fallback` (the worker's call for airt's pickled Python functions), with the C++ callers'
    pymodule names sent to call() instead."""
    def dispatch(kind, name, actor, args):
        if name.startswith(FUNCTION_PREFIX) or name.startswith(METHOD_PREFIX):
            return call(kind, name, actor, args)
        return fallback(kind, name, actor, args)
    return dispatch
