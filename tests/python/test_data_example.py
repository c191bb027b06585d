"""examples/batch_inference.py runs end to end: generated images, a PyTorch model on a pool of
two actors with declared GPUs, predictions in parquet (its own local cluster, a process)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_batch_inference_example_writes_one_prediction_per_image(tmp_path):
    env = dict(os.environ)
    env.pop("AIRT_ADDRESS", None)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p])
    out = tmp_path / "predictions"
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "batch_inference.py"), "--images", "64",
         "--size", "16", "--batch-size", "16", "--out", str(out)],
        env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "64 predictions in" in result.stdout
    assert "Actor pool: up to 2 actors" in result.stdout
    import pyarrow.parquet as pq
    table = pq.read_table(str(out))
    assert table.num_rows == 64
    assert set(table.column("label").to_pylist()) <= {0, 1, 2, 3}
    assert len(set(table.column("path").to_pylist())) == 64
