"""airt.util.collective (Ray's ray.util.collective shapes) on the session's local cluster: actors
and tasks as ranks, numpy arrays and CPU torch tensors, the hung-rank error."""

import numpy as np
import pytest

DTYPES = [np.int8, np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64]


@pytest.fixture(scope="module")
def workers(cluster):
    airt = cluster
    from airt.util import collective as col

    @airt.remote(num_cpus=0)
    class Worker:
        def setup(self, world, rank, group, timeout_ms=30000):
            col.init_collective_group(world, rank, "gloo", group, gloo_timeout=timeout_ms)
            return col.get_rank(group), col.get_collective_group_size(group)

        def sweep(self, group):
            rank = col.get_rank(group)
            world = col.get_collective_group_size(group)
            out = {}
            for dtype in DTYPES:
                for op in (col.ReduceOp.SUM, col.ReduceOp.PRODUCT, col.ReduceOp.MIN,
                           col.ReduceOp.MAX, col.ReduceOp.AVERAGE):
                    a = np.full(5, rank + 1, dtype=dtype)
                    col.allreduce(a, group, op)
                    out[(np.dtype(dtype).name, int(op))] = a.tolist()
            b = np.arange(4, dtype=np.float32) * (rank + 1)
            col.broadcast(b, 1, group)
            out["broadcast"] = b.tolist()
            gathered = [np.zeros(3, dtype=np.int64) for _ in range(world)]
            col.allgather(gathered, np.full(3, rank, dtype=np.int64), group)
            out["allgather"] = [g.tolist() for g in gathered]
            scattered = np.zeros(2, dtype=np.float64)
            col.reducescatter(scattered, [np.full(2, r + rank, dtype=np.float64)
                                          for r in range(world)], group)
            out["reducescatter"] = scattered.tolist()
            r = np.full(2, rank + 1, dtype=np.int32)
            col.reduce(r, 0, group)
            out["reduce"] = r.tolist()
            if rank == 0:
                col.send(np.array([7, 8], dtype=np.int32), 1, group)
            else:
                got = np.zeros(2, dtype=np.int32)
                col.recv(got, 0, group)
                out["recv"] = got.tolist()
            col.barrier(group)
            return out

        def torch_allreduce(self, group):
            import torch
            t = torch.ones(4) * (col.get_rank(group) + 1)
            col.allreduce(t, group, col.ReduceOp.AVERAGE)
            return t.tolist()

        def allreduce_declared(self, group):
            a = np.ones(3, dtype=np.float32)
            col.allreduce(a, group)  # joins on first use (create_collective_group)
            return col.get_rank(group), a.tolist()

        def skip(self, group, do_second):
            a = np.ones(3, dtype=np.float32)
            col.allreduce(a, group)
            if not do_second:
                return "skipped"
            try:
                col.allreduce(a, group)
            except Exception as e:  # noqa: BLE001 - the test reads the message
                return str(e)
            return ""

        def destroy(self, group):
            col.destroy_collective_group(group)
            return col.get_rank(group)

    return airt, col, [Worker.remote() for _ in range(3)]


def test_actors_agree_on_every_collective_type_and_op(workers):
    airt, col, w = workers
    assert airt.get([w[i].setup.remote(2, i, "sweep") for i in range(2)]) == [(0, 2), (1, 2)]
    results = airt.get([w[i].sweep.remote("sweep") for i in range(2)])
    for out in results:
        for dtype in DTYPES:
            name = np.dtype(dtype).name
            assert out[(name, 0)] == [3] * 5
            assert out[(name, 1)] == [2] * 5
            assert out[(name, 2)] == [1] * 5
            assert out[(name, 3)] == [2] * 5
            assert out[(name, 4)] == ([1] * 5 if np.issubdtype(dtype, np.integer) else [1.5] * 5)
        assert out["broadcast"] == [0.0, 2.0, 4.0, 6.0]
        assert out["allgather"] == [[0, 0, 0], [1, 1, 1]]
    assert results[0]["reducescatter"] == [1.0, 1.0]   # (0+0) + (0+1)
    assert results[1]["reducescatter"] == [3.0, 3.0]   # (1+0) + (1+1)
    assert results[0]["reduce"] == [3, 3] and results[1]["reduce"] == [2, 2]
    assert results[1]["recv"] == [7, 8]
    pytest.importorskip("torch")
    assert airt.get([w[i].torch_allreduce.remote("sweep") for i in range(2)]) == [[1.5] * 4] * 2
    assert airt.get([w[i].destroy.remote("sweep") for i in range(2)]) == [-1, -1]


def test_create_collective_group_from_the_driver_joins_on_first_use(workers):
    airt, col, w = workers
    col.create_collective_group(w[:2], 2, [1, 0], backend="gloo", group_name="declared")
    assert airt.get([w[i].allreduce_declared.remote("declared") for i in range(2)]) == [
        (1, [2.0] * 3), (0, [2.0] * 3)]
    airt.get([w[i].destroy.remote("declared") for i in range(2)])
    col.destroy_collective_group("declared")  # the driver drops the declaration
    with pytest.raises(ValueError):
        col.create_collective_group(w[:2], 2, [0, 0], group_name="bad")


def test_every_rank_names_the_rank_that_skipped_an_operation(workers):
    airt, col, w = workers
    airt.get([w[i].setup.remote(3, i, "hung", 1500) for i in range(3)])
    messages = airt.get([w[i].skip.remote("hung", i != 2) for i in range(3)])
    assert messages[2] == "skipped"
    for r in (0, 1):
        assert f"allreduce #2 of collective group 'hung' (rank {r} of 3)" in messages[r]
        assert "never reached it: rank 2 (node " in messages[r]
        assert "whose last operation was #1" in messages[r]
    airt.get([w[i].destroy.remote("hung") for i in range(3)])


def test_bad_calls_raise_clear_errors(cluster):
    from airt.util import collective as col
    with pytest.raises(RuntimeError, match="not initialized"):
        col.allreduce(np.ones(2), "nobody")
    with pytest.raises(ValueError):
        col.init_collective_group(2, 5, "gloo", "bad-rank")
    with pytest.raises(cluster.exceptions.InvalidArgumentError):
        col.init_collective_group(1, 0, "mpi", "bad-backend")
    col.init_collective_group(1, 0, "gloo", "solo")
    with pytest.raises(cluster.exceptions.InvalidArgumentError, match="C-contiguous"):
        col.allreduce(np.ones((4, 4))[:, 0], "solo")
    a = np.arange(3, dtype=np.float64)
    col.allreduce(a, "solo", col.ReduceOp.AVERAGE)
    assert a.tolist() == [0.0, 1.0, 2.0]
    col.destroy_collective_group("solo")
    with pytest.raises(cluster.exceptions.RayError, match="nccl backend"):
        col.init_collective_group(1, 0, "nccl", "gpu")  # no GPU plugin, or no CUDA device here
