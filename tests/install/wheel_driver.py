"""The first driver a Python user writes, run by wheel_test.sh in the venv the wheel went into.

    python wheel_driver.py ok VENV       a Python task runs, on VENV's interpreter
    python wheel_driver.py refused       a Python task fails, saying how to give the node a python

It joins the cluster `airt start --head` recorded under $AIRT_TEMP_DIR (address="auto").
"""

import os
import sys

import airt


def main():
    mode = sys.argv[1]
    airt.init(address="auto")

    @airt.remote
    def where(x):
        import sys as worker_sys
        import airt as worker_airt
        return x * 2, worker_sys.prefix, worker_airt.__file__

    ref = where.remote(21)
    if mode == "ok":
        venv = os.path.realpath(sys.argv[2])
        value, prefix, package = airt.get(ref, timeout=60)
        assert value == 42, value
        assert os.path.realpath(prefix) == venv, f"the worker ran {prefix}, not {venv}"
        assert os.path.realpath(package).startswith(venv + os.sep), package
        print(f"task ran on {prefix} with {package}: 21 * 2 = {value}")
    else:
        try:
            airt.get(ref, timeout=60)
        except Exception as error:  # the kind is the error map's; the message is the contract
            message = str(error)
            assert "--python-executable" in message, message
            print(f"refused as expected: {type(error).__name__}: {message}")
        else:
            raise AssertionError("a Python task ran on a node with no python that imports airt")
    airt.shutdown()


if __name__ == "__main__":
    main()
