"""The console scripts `pip install` puts on the environment's PATH: `airt`, `airt-head` and
`airt-node` (pyproject.toml's [project.scripts]), as `pip install ray` gives `ray`.

Each replaces itself (exec) with the C++ binary of the same name that the wheel installs beside
the package (site-packages/airt/), so that flags, output and exit status are the binary's own.
The cluster it starts runs Python tasks with this environment's interpreter: $AIRT_PYTHON is set
to sys.executable unless the caller set it (the node's default otherwise is the python3 on its
PATH; docs/install.md). The binaries find each other beside themselves (their RPATH is $ORIGIN).
"""

import os
import sys

# site-packages/airt/: the C++ binaries and libraries lie beside the package's modules.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def binary_path(name):
    """The bundled binary `name` (airt, airt-head, airt-node, airt-worker)."""
    return os.path.join(PACKAGE_DIR, name)


def daemon_environment(environ=None):
    """`environ` (default os.environ) for the binaries: AIRT_PYTHON names this interpreter unless
    it is set already (an empty value counts as unset)."""
    env = dict(os.environ if environ is None else environ)
    if not env.get("AIRT_PYTHON") and sys.executable:
        env["AIRT_PYTHON"] = sys.executable
    return env


def _exec(name):
    binary = binary_path(name)
    if not os.access(binary, os.X_OK):
        sys.stderr.write(f"{name}: {binary} is missing or not executable: reinstall the airt "
                         f"package (pip install airt, or pip install . in its source tree)\n")
        return 127
    try:
        os.execve(binary, [name] + sys.argv[1:], daemon_environment())
    except OSError as error:  # execve returns only on failure
        sys.stderr.write(f"{name}: cannot run {binary}: {error}\n")
        return 126


def main():
    """`airt start|status|stop ...` (cli/airt.cc)."""
    return _exec("airt")


def head_main():
    """`airt-head ...`: the head daemon alone."""
    return _exec("airt-head")


def node_main():
    """`airt-node ...`: a node daemon alone."""
    return _exec("airt-node")


if __name__ == "__main__":
    sys.exit(main())
