"""Fallback memory from Python: a put and a task's return larger than the node's whole object
store (--object-store-memory) are held in a file on the node's disk and read back byte for byte;
with the fallback limit at 1 MiB the same put raises ObjectStoreFullError naming the folder."""

import shutil
import subprocess
import sys
import tempfile
import textwrap

from conftest import Cluster

DRIVER = textwrap.dedent("""
    import glob, os, sys
    import numpy as np
    import airt
    from airt import exceptions

    airt.init(num_cpus=1, object_store_memory=64 << 20)
    expected = np.random.default_rng(7).integers(0, 255, 96 << 20, dtype=np.uint8)
    ref = airt.put(expected)
    files = glob.glob(os.path.join(sys.argv[1], "*", "node-*", "fallback", "airt-fallback-*"))
    files += glob.glob(os.path.join(sys.argv[1], "node-*", "fallback", "airt-fallback-*"))
    print("fallback files:", len(files))
    assert np.array_equal(airt.get(ref), expected)
    print("put: read back")

    @airt.remote
    def total(array):
        return int(array.sum(dtype=np.uint64))

    assert airt.get(total.remote(ref), timeout=120) == int(expected.sum(dtype=np.uint64))
    print("task: read it")

    @airt.remote
    def make(n):
        return np.full(n, 3, dtype=np.uint8)

    back = airt.get(make.remote(96 << 20), timeout=120)
    assert back.shape == (96 << 20,) and int(back.min()) == 3 and int(back.max()) == 3
    print("return: read back")
    airt.shutdown()
    print("OK")
""")

LIMITED_DRIVER = textwrap.dedent("""
    import numpy as np
    import airt
    from airt import exceptions

    airt.init(num_cpus=1, object_store_memory=64 << 20)
    kept = airt.put(np.arange(8 << 20, dtype=np.uint8))
    try:
        airt.put(np.zeros(96 << 20, dtype=np.uint8))
        print("no error")
    except exceptions.ObjectStoreFullError as error:
        text = str(error)
        assert "capacity is " + str(64 << 20) in text and "/fallback refused" in text, text
        print("put: ObjectStoreFullError")
    assert np.array_equal(airt.get(kept), np.arange(8 << 20, dtype=np.uint8))
    airt.shutdown()
    print("OK")
""")


def run_driver(tmp_path, source, **env_extra):
    env = Cluster(str(tmp_path)).env()
    env.pop("AIRT_ADDRESS", None)  # the driver starts a local cluster of its own
    env["AIRT_TEMP_DIR"] = str(tmp_path)
    # The local cluster makes its session folder under $TMPDIR: a short one of the test's own
    # (pytest's tmp_path is too long for the store's socket path).
    session_root = tempfile.mkdtemp(prefix="airt-fb-")
    env["TMPDIR"] = session_root
    env.update(env_extra)
    try:
        return subprocess.run([sys.executable, "-c", source, session_root], env=env,
                              capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(session_root, ignore_errors=True)


def test_a_put_and_a_return_larger_than_the_store_read_back_from_fallback(tmp_path):
    result = run_driver(tmp_path, DRIVER)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines == ["fallback files: 1", "put: read back", "task: read it", "return: read back",
                     "OK"], result.stdout + result.stderr


def test_a_put_past_the_fallback_limit_raises_object_store_full(tmp_path):
    result = run_driver(tmp_path, LIMITED_DRIVER, AIRT_OBJECT_STORE_FALLBACK_LIMIT="1M")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == ["put:", "ObjectStoreFullError", "OK"], result.stdout
