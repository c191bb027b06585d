"""Runs the programs of this folder (written for Ray: `import ray`, `from ray.util import ...`)
on airt, with only their imports changed, and reports each.

    python tests/ray_compat/run.py [NAME ...]      # every program, or those named

Each program is copied into a temporary folder with `import ray` made `import airt as ray` and
`from ray...` made `from airt...`, then run as a process of its own with the build tree's
package first on PYTHONPATH (AIRT_BUILD_DIR, default build). A program passes when it exits 0 (it
asserts its own results). The same programs run unchanged on Ray with run_on_ray.sh."""

import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TIMEOUT_S = 300

_IMPORT_RAY = re.compile(r"^([ \t]*)import ray[ \t]*$", re.MULTILINE)
_FROM_RAY = re.compile(r"^([ \t]*)from ray(\.| )", re.MULTILINE)


def programs():
    """The programs' names (file names without .py), sorted."""
    return sorted(name[:-3] for name in os.listdir(HERE)
                  if name.endswith(".py") and name != "run.py" and not name.startswith("_"))


def rewrite(source):
    """`source` with its Ray imports made airt's; ValueError when it imports Ray some other
    way (`import ray.x`, `import ray as y`), which this runner does not rewrite."""
    out = _FROM_RAY.sub(lambda m: f"{m.group(1)}from airt{m.group(2)}", source)
    out = _IMPORT_RAY.sub(lambda m: f"{m.group(1)}import airt as ray", out)
    leftover = re.search(r"^\s*(import ray\b.*|from ray\b.*)$", out, re.MULTILINE)
    if leftover:
        raise ValueError(f"an import this runner does not rewrite: {leftover.group(0).strip()}")
    return out


def _env():
    env = dict(os.environ)
    build = os.path.join(ROOT, os.environ.get("AIRT_BUILD_DIR", "build"), "python")
    env["PYTHONPATH"] = os.pathsep.join([build] + [p for p in env.get("PYTHONPATH", "").split(
        os.pathsep) if p])
    env.pop("AIRT_ADDRESS", None)  # each program starts its own local cluster
    return env


def run_program(name, timeout=TIMEOUT_S):
    """Runs program `name` on airt: (passed, seconds, its output)."""
    with open(os.path.join(HERE, name + ".py")) as f:
        source = rewrite(f.read())
    with tempfile.TemporaryDirectory(prefix=f"ray_compat_{name}_") as folder:
        path = os.path.join(folder, name + ".py")
        with open(path, "w") as f:
            f.write(source)
        started = time.monotonic()
        try:
            result = subprocess.run([sys.executable, path], cwd=folder, env=_env(),
                                    capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            output = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            return False, time.monotonic() - started, output + f"\ntimed out after {timeout} s"
        return (result.returncode == 0, time.monotonic() - started,
                result.stdout + result.stderr + f"\nexit status {result.returncode}")


def main(argv):
    names = argv or programs()
    unknown = sorted(set(names) - set(programs()))
    if unknown:
        print(f"no such program: {', '.join(unknown)} (have: {', '.join(programs())})")
        return 2
    failed = []
    for name in names:
        passed, seconds, output = run_program(name)
        print(f"{'PASS' if passed else 'FAIL'} {name} ({seconds:.1f} s)")
        if not passed:
            failed.append(name)
            print("    " + output.strip().replace("\n", "\n    "))
    print(f"{len(names) - len(failed)}/{len(names)} programs passed on airt")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
