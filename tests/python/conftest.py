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


class Cluster:
    """A head and nodes started as processes (real daemons on loopback), for tests whose drivers
    run as processes of their own (`run_driver`)."""

    def __init__(self, root):
        self.root = root
        self.processes = []
        self.address = None
        self.node_ids = []

    def _spawn(self, name, argv):
        import ctypes
        import signal
        import subprocess

        def die_with_pytest():
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

        log = open(os.path.join(self.root, name + ".log"), "w")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env(),
                                   preexec_fn=die_with_pytest)
        self.processes.append(process)
        return os.path.join(self.root, name + ".log"), process

    def env(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(BUILD, "python")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env["AIRT_PYTHON"] = sys.executable
        if self.address:
            env["AIRT_ADDRESS"] = self.address
        return env

    @staticmethod
    def _wait_line(path, prefix, process, timeout=30):
        import time
        deadline = time.time() + timeout
        while time.time() < deadline:
            with open(path) as f:
                for line in f:
                    if line.startswith(prefix):
                        return line[len(prefix):].strip()
            if process.poll() is not None:
                raise RuntimeError(f"{path}: exited with {process.returncode}: {open(path).read()}")
            time.sleep(0.05)
        raise RuntimeError(f"{path}: no '{prefix}' line in {timeout} s")

    def start_head(self):
        log, process = self._spawn("head", [os.path.join(BUILD, "head", "airt-head"), "--port=0",
                                            f"--temp-dir={self.root}"])
        self.address = self._wait_line(log, "head ready ", process)

    def add_node(self, *flags, code_search_path=""):
        name = f"node{len(self.node_ids) + 1}"
        log, process = self._spawn(name, [
            os.path.join(BUILD, "worker", "airt-node"), f"--head-address={self.address}",
            f"--temp-dir={self.root}", "--object-store-memory=256M",
            f"--python-executable={sys.executable}",
            f"--worker-code-search-path={code_search_path}", *flags])
        self.node_ids.append(self._wait_line(log, "node ready ", process))
        return self.node_ids[-1]

    def run_driver(self, code, *args, timeout=180, check=True):
        """Runs `code` as a driver process joined to this cluster; its stdout."""
        import subprocess
        result = subprocess.run([sys.executable, "-c", code, *args], env=self.env(),
                                capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"driver failed ({result.returncode}):\n{result.stdout}\n"
                                 f"{result.stderr}")
        return result.stdout

    def stop(self):
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
        for process in reversed(self.processes):
            try:
                process.wait(timeout=10)
            except Exception:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory, task_functions_dir):
    """A head and two 2-CPU nodes; the second one alone has the custom resource "node2"."""
    cluster = Cluster(str(tmp_path_factory.mktemp("two-nodes")))
    try:
        cluster.start_head()
        cluster.add_node("--num-cpus=2", code_search_path=task_functions_dir)
        cluster.add_node("--num-cpus=2", '--resources={"node2": 4}',
                         code_search_path=task_functions_dir)
        yield cluster
    finally:
        cluster.stop()
