"""@airt.distributed and airt.runtime: the ranks' return values in rank order, a rank's error on
the caller with its rank and traceback, and (on nodes declaring GPUs, real processes on
loopback) gpus= spanning nodes with the torchrun environment of each rank."""

import json
import os

import pytest

import airt
from conftest import Cluster


def test_the_ranks_return_values_come_back_in_rank_order(cluster):
    @airt.distributed(num_workers=2)
    def where(offset, scale=1):
        return (airt.runtime.get_global_rank() * scale + offset, airt.runtime.get_local_rank(),
                airt.runtime.get_world_size(), airt.runtime.get_node_rank(), os.getpid(),
                os.environ.get("MASTER_PORT"))

    ranks = where.distributed(10, scale=100)
    assert [r[:4] for r in ranks] == [(10, 0, 2, 0), (110, 1, 2, 0)]
    assert ranks[0][4] != ranks[1][4] and ranks[0][5] == ranks[1][5]
    assert where(1) == (1, 0, 1, 0, os.getpid(), os.environ.get("MASTER_PORT"))  # a plain call


def test_a_ranks_exception_is_raised_with_its_rank_and_remote_traceback(cluster):
    @airt.distributed(num_workers=2)
    def fails():
        if airt.runtime.get_global_rank() == 1:
            raise KeyError("only on rank one")
        return "fine"

    with pytest.raises(KeyError) as info:
        fails.distributed()
    error = info.value
    assert isinstance(error, airt.exceptions.RayTaskError)
    assert error.rank == 1 and error.node_id
    assert "rank 1 of 2 (node " in str(error) and "only on rank one" in str(error)
    assert "in fails" in str(error)  # the remote traceback's frame


def test_bad_decorator_arguments_are_refused():
    with pytest.raises(ValueError, match="positive int"):
        airt.distributed(num_workers=0)
    with pytest.raises(ValueError, match="not both"):
        airt.distributed(gpus=2, num_workers=3)
    with pytest.raises(ValueError, match="needs gpus"):
        airt.distributed(num_workers=2, gpu_type="H100")


def test_runtime_outside_a_gang_is_rank_zero_of_one(monkeypatch):
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK"):
        monkeypatch.delenv(key, raising=False)
    assert (airt.runtime.get_global_rank(), airt.runtime.get_local_rank(),
            airt.runtime.get_world_size(), airt.runtime.get_local_world_size(),
            airt.runtime.get_node_rank()) == (0, 0, 1, 1, 0)


@pytest.fixture(scope="module")
def gpu_nodes(tmp_path_factory):
    """Two H100-labelled nodes declaring two GPUs each."""
    cluster = Cluster(str(tmp_path_factory.mktemp("distributed-gpus")))
    try:
        cluster.start_head()
        for _ in range(2):
            cluster.add_node("--num-cpus=2", "--num-gpus=2", "--gpu-memory=80G",
                             "--labels=accelerator_type=H100")
        yield cluster
    finally:
        cluster.stop()


SPAN = """
import json, os, airt
airt.init()

@airt.distributed(gpus=3, gpu_type="H100")
def where():
    return {k: os.environ[k] for k in ("RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK",
                                       "WORLD_SIZE", "CUDA_VISIBLE_DEVICES")} | {
        "node": airt.get_runtime_context().get_node_id(), "gpus": airt.get_gpu_ids()}
print(json.dumps(where.distributed()))
"""


def test_gpus_above_one_nodes_count_span_nodes(gpu_nodes):
    ranks = json.loads(gpu_nodes.run_driver(SPAN).strip().splitlines()[-1])
    assert [r["RANK"] for r in ranks] == ["0", "1", "2"]
    assert [(r["NODE_RANK"], r["LOCAL_RANK"], r["LOCAL_WORLD_SIZE"]) for r in ranks] == [
        ("0", "0", "2"), ("0", "1", "2"), ("1", "0", "1")]
    assert ranks[0]["node"] == ranks[1]["node"] != ranks[2]["node"]
    assert set(gpu_nodes.node_ids) == {r["node"] for r in ranks}
    for r in ranks:  # the node's GPUs of the gang: one of its own for each local rank
        same_node = [s for s in ranks if s["node"] == r["node"]]
        visible = r["CUDA_VISIBLE_DEVICES"].split(",")
        assert len(set(visible)) == len(visible) == len(same_node), r
        assert all(s["CUDA_VISIBLE_DEVICES"] == r["CUDA_VISIBLE_DEVICES"] for s in same_node)
