"""The programs of tests/ray_compat/ (written for Ray) run on airt with only their imports
changed, each a process of its own with its own local cluster."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "ray_compat"))
import run as ray_compat  # noqa: E402


def test_rewrite_changes_only_the_imports():
    source = "import ray\nfrom ray.util import ActorPool\nx = 'import ray'\n    import ray\n"
    assert ray_compat.rewrite(source) == (
        "import airt as ray\nfrom airt.util import ActorPool\nx = 'import ray'\n"
        "    import airt as ray\n")
    with pytest.raises(ValueError, match="does not rewrite"):
        ray_compat.rewrite("import ray.util\n")


@pytest.mark.parametrize("name", ray_compat.programs())
def test_ray_program_runs_on_airt(name):
    passed, _, output = ray_compat.run_program(name)
    assert passed, f"{name} failed on airt:\n{output}"
