"""The Python worker's side of C++ calling Python (airt::PyFunction, airt::PyActorClass): calls
named "pymodule:<module>:<attribute>" and "pymodule.method:<name>" with msgpack arguments, as a
C++ driver sends them, here sent through airt._airt from Python. The module is written into a
folder on the job's code search path, which the workers put on sys.path. (The C++ driver's own
side: tests/e2e/cross_language_test.cc.)"""

import msgpack
import pytest

import airt
from airt import _airt, exceptions
from airt.object_ref import ObjectRef

MODULE = "xlang_pytest_module"

SOURCE = '''
import sys


def add(a, b):
    return a + b


def where():
    return {"file": __file__, "path": sys.path[:5]}


def echo(*values):
    return list(values)


def fail(message):
    raise KeyError("no " + message)


def unencodable():
    return object()


class Outer:
    @staticmethod
    def inner(x):
        return x * 2


class Counter:
    def __init__(self, start):
        self.n = start

    def add(self, k):
        self.n += k
        return self.n
'''


@pytest.fixture(scope="module")
def module(cluster, python_modules_dir):
    with open(f"{python_modules_dir}/{MODULE}.py", "w") as f:
        f.write(SOURCE)
    return python_modules_dir


def call(attribute, *args):
    """What airt::Task(airt::PyFunction<R>{MODULE, attribute}).Remote(args...) sends."""
    encoded = [msgpack.packb(a, use_bin_type=True) for a in args]
    ref = _airt.submit(f"pymodule:{MODULE}:{attribute}", encoded, {"CPU": 1.0}, 0, True)[0]
    return ObjectRef(ref, ObjectRef.MSGPACK)


def get(ref):
    try:
        return airt.get(ref, timeout=60)
    except _airt.Error as error:
        raise exceptions.translate(error) from None


def test_a_function_is_found_on_the_jobs_code_search_path(module):
    found = get(call("where"))
    assert found["file"] == f"{module}/{MODULE}.py"
    assert module in found["path"]


def test_msgpack_values_go_both_ways(module):
    assert get(call("add", 1, 2)) == 3
    assert get(call("add", "py", "thon")) == "python"
    assert get(call("add", [1, 2], [3])) == [1, 2, 3]
    assert get(call("add", 0.5, 2.25)) == 2.75
    values = [None, True, -7, 2 ** 40, 1.5, "text", b"\x00\xff", [1, [2]], {"k": {"n": 1}}]
    assert get(call("echo", *values)) == values
    assert get(call("Outer.inner", 21)) == 42  # a dotted attribute


def test_a_python_exception_comes_back_with_its_traceback(module):
    with pytest.raises(exceptions.RayTaskError) as caught:
        get(call("fail", "key"))
    text = str(caught.value)
    assert "Traceback (most recent call last)" in text
    assert f"{MODULE}.py" in text
    assert "KeyError: 'no key'" in text


def test_what_cannot_be_called_fails_naming_why(module):
    with pytest.raises(exceptions.RayTaskError, match="TypeError"):
        get(call("unencodable"))  # a return msgpack cannot encode
    with pytest.raises(exceptions.RayTaskError, match="ModuleNotFoundError"):
        ref = _airt.submit("pymodule:no_such_module_xyz:f", [], {"CPU": 1.0}, 0, True)[0]
        get(ObjectRef(ref, ObjectRef.MSGPACK))
    with pytest.raises(exceptions.RayTaskError, match="AttributeError"):
        get(call("no_such_function"))


def test_an_actor_made_from_cpp_keeps_its_state(module):
    actor = _airt.create_actor(f"pymodule:{MODULE}:Counter", [msgpack.packb(10)], {}, "", "", 0,
                               1, True)

    def method(name, *args):
        encoded = [msgpack.packb(a) for a in args]
        return ObjectRef(_airt.submit_actor_task(actor, f"pymodule.method:{name}", encoded)[0],
                         ObjectRef.MSGPACK)

    first, second = method("add", 5), method("add", 1)
    assert get(first) == 15
    assert get(second) == 16
    with pytest.raises(exceptions.RayTaskError, match="AttributeError"):
        get(method("no_such_method"))
    _airt.kill_actor(actor, True)
