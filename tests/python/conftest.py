"""pytest set-up: the airt package of the build tree (build/python, or AIRT_BUILD_DIR's), and
the C++ libraries of the end-to-end tests, whose functions the tests call from Python."""

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("AIRT_BUILD_DIR", "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))


@pytest.fixture(scope="session")
def task_functions_dir():
    """The folder of libairt_task_functions.so (tests/e2e/task_functions.cc)."""
    path = os.path.join(BUILD, "tests", "e2e")
    if not os.path.exists(os.path.join(path, "libairt_task_functions.so")):
        pytest.fail(f"{path}/libairt_task_functions.so is missing: build the project first")
    return path


@pytest.fixture(scope="session")
def python_modules_dir(tmp_path_factory):
    """A folder on the session job's code search path: Python workers import modules written
    there (as C++ drivers' airt::PyFunction calls do)."""
    return str(tmp_path_factory.mktemp("python_modules"))


@pytest.fixture(scope="session")
def cluster(task_functions_dir, python_modules_dir):
    """A local cluster (airt.init() with no address) for the session, stopped at its end."""
    os.environ.pop("AIRT_ADDRESS", None)
    import airt
    airt.init(num_cpus=2, code_search_path=[task_functions_dir, python_modules_dir])
    yield airt
    airt.shutdown()
